// Finding the kubelet's UID (lib/agent/kubelet-uid.ts): upstream's rules over a proc root written
// as plain files in a temp dir (parsing; hostile contents included), and once against the real
// /proc with a real process named `kubelet` running as another uid.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findKubeletProcesses, KubeletUidError, parseStatus, resolveKubeletUid } from '../../lib/agent/kubelet-uid.js';
import { privileged } from '../helpers/privileged.js';

let dirs: string[] = [];
let children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      const gone = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await gone;
    }
  }
  children = [];
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

const status = (name: string, uid: string, rest = '') =>
  `Name:\t${name}\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t1\nPid:\t1\nPPid:\t0\nUid:\t${uid}\nGid:\t0\t0\t0\t0\n${rest}`;

interface Entry { comm?: string; cmdline?: string[]; status?: string }

/** A proc root with one `<pid>/` per entry (comm as the kernel writes it, with "\n"). */
function procRoot(entries: Record<string, Entry>): string {
  const root = tempDir('pwt-kubeproc-');
  for (const [pid, e] of Object.entries(entries)) {
    const dir = join(root, pid);
    mkdirSync(dir, { recursive: true });
    if (e.comm !== undefined) writeFileSync(join(dir, 'comm'), `${e.comm}\n`);
    if (e.cmdline !== undefined) writeFileSync(join(dir, 'cmdline'), e.cmdline.map((a) => `${a}\0`).join(''));
    if (e.status !== undefined) writeFileSync(join(dir, 'status'), e.status);
  }
  return root;
}

const kubelet = (uid: number | string, o: Partial<Entry> = {}): Entry => ({
  comm: 'kubelet',
  cmdline: ['/usr/bin/kubelet', '--config=/var/lib/kubelet/config.yaml'],
  status: status('kubelet', typeof uid === 'number' ? `${uid}\t${uid}\t${uid}\t${uid}` : uid),
  ...o,
});

const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (err) {
    if (err instanceof KubeletUidError) return err.code;
    throw err;
  }
  return undefined;
};

describe('resolveKubeletUid over a proc root', () => {
  it('takes the real UID of the process named kubelet whose argv mentions kubelet', () => {
    const root = procRoot({
      1: { comm: 'systemd', cmdline: ['/sbin/init'], status: status('systemd', '0\t0\t0\t0') },
      812: kubelet(1000),
      900: { comm: 'containerd', cmdline: ['/usr/bin/containerd'], status: status('containerd', '0\t0\t0\t0') },
    });
    expect(resolveKubeletUid(root)).toEqual({
      uid: 1000, source: 'process', warnings: [],
      processes: [{ pid: 812, name: 'kubelet', uid: 1000, euid: 1000, fsuid: 1000 }],
    });
  });

  it("finds MicroK8s' kubelite by its kubelet arguments", () => {
    const root = procRoot({
      77: { comm: 'kubelite', cmdline: ['/snap/microk8s/123/kubelite', '--kubelet-args-file=/var/snap/microk8s/123/args/kubelet'], status: status('kubelite', '0\t0\t0\t0') },
    });
    expect(resolveKubeletUid(root)).toMatchObject({ uid: 0, processes: [{ pid: 77, name: 'kubelite' }] });
  });

  it('skips look-alikes: another comm, no kubelet in argv, a status of another name or with bad ids', () => {
    const root = procRoot({
      10: kubelet(5, { comm: 'kubelet-plugin' }),
      11: kubelet(5, { comm: 'Kubelet' }),
      12: kubelet(5, { cmdline: ['/usr/bin/sleep', '1000'] }),
      13: kubelet(5, { cmdline: [] }),           // a zombie or kernel thread: empty cmdline
      14: kubelet(5, { status: status('sleep', '5\t5\t5\t5') }),  // the pid was reused between reads
      15: kubelet('4294967295\t0\t0\t0'),        // (uid_t)-1
      16: kubelet('-1\t0\t0\t0'),
      17: kubelet('01\t1\t1\t1'),
      18: kubelet('5\t5\t5'),
      19: kubelet('5\t5\t5\t5', { status: `${status('kubelet', '5\t5\t5\t5')}Uid:\t0\t0\t0\t0\n` }),  // two Uid lines
      20: kubelet(5, { status: 'Name:\tkubelet\n' }),
      21: kubelet(5, { status: undefined }),
      22: kubelet(5, { comm: undefined }),
      '0123': kubelet(5),
      self: kubelet(5),
    });
    expect(findKubeletProcesses(root)).toEqual([]);
    expect(codeOf(() => resolveKubeletUid(root))).toBe('ERR_KUBELET_NOT_FOUND');
  });

  it('never follows links, never blocks on a FIFO', () => {
    const root = procRoot({ 30: kubelet(7, { comm: undefined }), 31: kubelet(7, { status: undefined }) });
    const real = procRoot({ 99: kubelet(7) });
    symlinkSync(join(real, '99', 'comm'), join(root, '30', 'comm'));
    execFileSync('mkfifo', [join(root, '31', 'status')]);
    symlinkSync(join(real, '99'), join(root, '32'));  // a pid entry that is a link
    expect(findKubeletProcesses(root)).toEqual([]);
  });

  it('several kubelets with one UID are fine; different UIDs are refused (ERR_KUBELET_AMBIGUOUS)', () => {
    expect(resolveKubeletUid(procRoot({ 40: kubelet(0), 41: kubelet(0) })).processes.map((p) => p.pid)).toEqual([40, 41]);
    // An unprivileged look-alike: upstream would take whichever it meets first.
    expect(codeOf(() => resolveKubeletUid(procRoot({ 40: kubelet(0), 4000: kubelet(1234) })))).toBe('ERR_KUBELET_AMBIGUOUS');
  });

  it('warns when the effective or fs UID differs from the real one', () => {
    const r = resolveKubeletUid(procRoot({ 50: kubelet('1000\t0\t0\t0') }));
    expect(r.uid).toBe(1000);
    expect(r.warnings).toHaveLength(1);
  });

  it('the override wins over any process; a bad override is a RangeError', () => {
    const root = procRoot({ 60: kubelet(1000) });
    expect(resolveKubeletUid(root, 0)).toEqual({ uid: 0, source: 'setting', processes: [], warnings: [] });
    expect(resolveKubeletUid(root, null).uid).toBe(1000);
    // The override needs no proc root at all.
    expect(resolveKubeletUid(join(root, 'missing'), 42).uid).toBe(42);
    for (const bad of [-1, 1.5, 2 ** 32 - 1, Number.NaN]) expect(() => resolveKubeletUid(root, bad)).toThrow(RangeError);
  });

  it('no kubelet → ERR_KUBELET_NOT_FOUND; a proc root that cannot be listed → ERR_KUBELET_PROC_ROOT', () => {
    expect(codeOf(() => resolveKubeletUid(procRoot({})))).toBe('ERR_KUBELET_NOT_FOUND');
    const root = procRoot({});
    expect(codeOf(() => resolveKubeletUid(join(root, 'missing')))).toBe('ERR_KUBELET_PROC_ROOT');
    const file = join(root, 'file');
    writeFileSync(file, '');
    expect(codeOf(() => resolveKubeletUid(file))).toBe('ERR_KUBELET_PROC_ROOT');
  });

  it('parseStatus reads what the kernel writes', () => {
    expect(parseStatus(status('kubelet', '0\t1\t2\t3'))).toEqual({ name: 'kubelet', uid: 0, euid: 1, fsuid: 3 });
    expect(parseStatus('Uid:\t0\t0\t0\t0\n')).toBeUndefined();
  });
});

describe.skipIf(!privileged())('resolveKubeletUid over the real /proc', () => {
  it('finds a real process named kubelet and its real uid', async () => {
    // Started as root, it names itself `kubelet` (prctl PR_SET_NAME) and drops to uid 4321 without
    // an exec, so no path has to be reachable for that uid (a fresh root's / can be 0700).
    const script = [
      'import ctypes, os, time',
      "ctypes.CDLL(None).prctl(15, b'kubelet', 0, 0, 0)",
      'os.setgid(4321); os.setuid(4321)',
      'time.sleep(1000)',
    ].join('\n');
    const child = spawn('/usr/bin/python3', ['-c', script, '--kubeconfig=/etc/kubernetes/kubelet.conf'], { stdio: 'ignore' });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    const want = { pid: child.pid, name: 'kubelet', uid: 4321, euid: 4321, fsuid: 4321 };
    let found = findKubeletProcesses('/proc');
    for (let i = 0; i < 500 && !found.some((f) => f.pid === child.pid && f.uid === 4321); i++) {
      await new Promise((r) => setTimeout(r, 10));
      found = findKubeletProcesses('/proc');
    }
    expect(found).toContainEqual(want);
    child.kill('SIGKILL');
  });
});
