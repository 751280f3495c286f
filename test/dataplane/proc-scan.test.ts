// Netns discovery by scanning a proc root (spec §5.10): cgroup parsing in every kubelet/runtime
// format, then walks of a fake proc root whose `<pid>/ns/net` are symlinks to real netns
// (/run/netns/pwt-…, the host's /proc/self/ns/net), and one bounded walk of the real /proc. The
// walk only identifies candidates; proving and opening them: netns-proof.test.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  canonicalPodUid, matchCgroupPath, parseCgroupFile, parseStartTime, scanPodNetns, type NetnsId, type ProcScanResult,
} from '../../lib/dataplane/proc-scan.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const UID_A = '863b91d4-4b68-4efa-917f-4b560e3e86aa';
const UID_B = '2c48913c-b29f-11e7-9350-020968147796';
const UID_C = '72f7f152-440c-66ac-9084-e0fc1d8a910c';
const UID_D = 'daa5c7ee-3484-4533-af39-3591564fd252';
const CID = '9bca8d63d5fa610783847915bcff0ecac1273e5b4bed3f6fa1b07350e0135961';
const us = (u: string) => u.replace(/-/g, '_');

// The cgroup path formats kubelet + runtimes produce (cgroupfs and systemd drivers, v1 and v2).
const FORMATS: Array<[string, string, string | undefined]> = [
  ['cgroupfs v1', `/kubepods/burstable/pod${UID_B}/${CID}`, UID_B],
  ['cgroupfs guaranteed (no QoS dir)', `/kubepods/pod${UID_B}/${CID}`, UID_B],
  ['systemd + containerd', `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${us(UID_A)}.slice/cri-containerd-${CID}.scope`, UID_A],
  ['systemd + docker', `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod${us(UID_B)}.slice/docker-${CID}.scope`, UID_B],
  ['systemd + cri-o', `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${us(UID_A)}.slice/crio-${CID}.scope`, UID_A],
  ['containerd systemd v1 (colons)', `/kubepods-besteffort-pod${us(UID_C)}.slice:cri-containerd:${CID}`, UID_C],
  ['kind (docker-in-docker)', `/docker/8d461fa5765781bcf5f7eb192f101bc3103d4b932e26236f43feecfa20664f96/kubepods/besteffort/pod${UID_D}/${CID}`, UID_D],
  ['cgroup namespace relative', `/../../pod${UID_B}/${CID}`, UID_B],
  ['UID without dashes', `/kubepods/besteffort/pod${UID_B.replace(/-/g, '')}/${CID}`, UID_B.replace(/-/g, '')],
];

describe('cgroup parsing', () => {
  it.each(FORMATS)('%s', (_name, path, uid) => {
    expect(matchCgroupPath(path)).toEqual({ podUid: uid, containerId: CID });
  });

  it('cri-o without a pod UID gives only the container id', () => {
    expect(matchCgroupPath(`/../crio-${CID}.scope`)).toEqual({ containerId: CID });
  });

  it.each(['/', '/system.slice/containerd.service', '/user.slice/user-0.slice/session-1.scope', `/kubepods/burstable/pod${UID_B}/`, `/kubepods/burstable/podnothex/${CID}`])(
    'no match: %s', (path) => {
      expect(matchCgroupPath(path)).toBeUndefined();
    });

  it('canonicalises systemd escapes and case', () => {
    expect(canonicalPodUid(us(UID_A).toUpperCase())).toBe(UID_A);
  });

  it('reads v1 and v2 files line by line; the path may contain colons', () => {
    const v1 = [
      '12:pids:/system.slice/x.service',
      `11:memory:/kubepods-besteffort-pod${us(UID_C)}.slice:cri-containerd:${CID}`,
      `1:name=systemd:/kubepods-besteffort-pod${us(UID_C)}.slice:cri-containerd:${CID}`,
      '',
    ].join('\n');
    expect(parseCgroupFile(v1)).toEqual({ ok: true, podUid: UID_C, containerId: CID });
    expect(parseCgroupFile(`0::/kubepods/pod${UID_B}/${CID}\n`)).toEqual({ ok: true, podUid: UID_B, containerId: CID });
    expect(parseCgroupFile('0::/init.scope\n')).toEqual({ ok: true, podUid: undefined, containerId: undefined });
  });

  it('conflicting UIDs or container ids across lines make the process unattributable', () => {
    expect(parseCgroupFile(`2:cpu:/kubepods/pod${UID_A}/${CID}\n1:memory:/kubepods/pod${UID_B}/${CID}\n`))
      .toEqual({ ok: false, reason: 'conflicting-pod-uid' });
    expect(parseCgroupFile(`2:cpu:/kubepods/pod${UID_A}/${CID}\n1:memory:/kubepods/pod${UID_A}/abc\n`))
      .toEqual({ ok: false, reason: 'conflicting-container-id' });
  });

  it('starttime is field 22, counted after the last ")"', () => {
    const tail = 'S 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10';
    expect(parseStartTime(`4242 (a) b (c d) ${tail}`)).toBe(987654);
    expect(parseStartTime(`4242 (sleep) ${tail}`)).toBe(987654);
    expect(parseStartTime('4242 (x) S 1 2')).toBeUndefined();
    expect(parseStartTime('garbage')).toBeUndefined();
  });
});

// ---- fake proc roots ----

const roots: string[] = [];
afterEach(() => {
  while (roots.length) rmSync(roots.pop()!, { recursive: true, force: true });
});

const HOST_NS = '/proc/self/ns/net';

interface FakeProc {
  /** netns target (a path stat() resolves to an nsfs inode), or null: no ns/net (vanished pid). */
  ns: string | null;
  cgroup?: string;
  start?: number;
}

function fakeRoot(procs: Record<number | string, FakeProc>): string {
  const root = mkdtempSync(join(tmpdir(), 'pwt-proc-'));
  roots.push(root);
  for (const [pid, p] of Object.entries(procs)) {
    const dir = join(root, String(pid));
    mkdirSync(join(dir, 'ns'), { recursive: true });
    if (p.ns) symlinkSync(p.ns, join(dir, 'ns', 'net'));
    if (p.cgroup !== undefined) writeFileSync(join(dir, 'cgroup'), p.cgroup);
    if (p.start !== undefined) {
      writeFileSync(join(dir, 'stat'), `${pid} (my (odd) comm) S 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 ${p.start} 1000 10\n`);
    }
  }
  return root;
}

const v1 = (uid: string) => `12:memory:/kubepods/burstable/pod${uid}/${CID}\n1:name=systemd:/kubepods/burstable/pod${uid}/${CID}\n`;
const sd = (uid: string) => `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${us(uid)}.slice/cri-containerd-${CID}.scope\n`;
/** The pod's oldest candidate. */
const first = (r: ProcScanResult, uid: string) => r.candidates.get(uid)?.[0];
const id = (p: string): NetnsId => {
  const st = statSync(p);
  return { dev: st.dev, ino: st.ino };
};

describe.skipIf(!privileged())('scan of a fake proc root with real netns', () => {
  it('finds each pod, skips host-netns and vanished pids, reports missing', async () => {
    const a = await freshNetns();
    const b = await freshNetns();
    const nsA = `/run/netns/${a.name}`;
    const nsB = `/run/netns/${b.name}`;
    const root = fakeRoot({
      1: { ns: HOST_NS, cgroup: '0::/init.scope\n', start: 1 },
      self: { ns: HOST_NS, cgroup: v1(UID_D) }, // not numeric: ignored
      150: { ns: nsA, cgroup: v1(UID_A), start: 700 }, // app container of pod A
      120: { ns: nsA, cgroup: v1(UID_A), start: 500 }, // pause of pod A: earliest
      200: { ns: nsB, cgroup: sd(UID_B), start: 900 },
      300: { ns: HOST_NS, cgroup: v1(UID_C), start: 10 }, // hostNetwork pod C
      400: { ns: null, cgroup: v1(UID_D) }, // exited between readdir and stat
      401: { ns: nsA }, // no cgroup file
    });
    const r = scanPodNetns([UID_A, UID_B, UID_C, UID_D], { procRoot: root });
    // One candidate per netns, represented by the pod's oldest process in it.
    expect(r.candidates.get(UID_A)).toEqual([{ path: join(root, '120', 'ns', 'net'), pid: 120, startTime: 500, ...id(nsA) }]);
    expect(r.candidates.get(UID_B)).toEqual([{ path: join(root, '200', 'ns', 'net'), pid: 200, startTime: 900, ...id(nsB) }]);
    expect(id(nsA)).not.toEqual(id(nsB));
    expect(id(nsA)).not.toEqual(id(HOST_NS));
    expect(r.candidates.size).toBe(2);
    expect(r.missing).toEqual([UID_C, UID_D]);
    expect(r).toMatchObject({ scanned: 7, skipped: 2, truncated: false });
    // The returned path really leads to that netns.
    expect(id(first(r, UID_A)!.path)).toEqual(id(nsA));
  });

  it('matches UIDs however they are spelled (systemd escapes, case, no dashes)', async () => {
    const a = await freshNetns();
    const root = fakeRoot({ 1: { ns: HOST_NS }, 10: { ns: `/run/netns/${a.name}`, cgroup: sd(UID_A), start: 5 } });
    const asked = UID_A.toUpperCase().replace(/-/g, '');
    const r = scanPodNetns([asked], { procRoot: root });
    expect(first(r, asked)?.pid).toBe(10);
    expect(r.missing).toEqual([]);
  });

  it('one pod in two netns: both are candidates, the earliest process first', async () => {
    const a = await freshNetns();
    const b = await freshNetns();
    const root = fakeRoot({
      1: { ns: HOST_NS },
      10: { ns: `/run/netns/${a.name}`, cgroup: v1(UID_A), start: 800 }, // lower pid, later start
      20: { ns: `/run/netns/${b.name}`, cgroup: sd(UID_A), start: 100 },
    });
    const r = scanPodNetns([UID_A], { procRoot: root });
    expect(first(r, UID_A)).toMatchObject({ pid: 20, ...id(`/run/netns/${b.name}`) });
    expect(r.candidates.get(UID_A)!.map((x) => x.pid)).toEqual([20, 10]);
    // Deterministic: same answer on every run.
    expect(first(scanPodNetns([UID_A], { procRoot: root }), UID_A)?.pid).toBe(20);
  });

  it('a visitor from another pod is a candidate of its own pod (the ownership check decides, not the walk)', async () => {
    const a = await freshNetns();
    const nsA = `/run/netns/${a.name}`;
    const root = fakeRoot({
      1: { ns: HOST_NS },
      5: { ns: nsA, cgroup: v1(UID_B), start: 9000 }, // pod B's process visiting pod A's netns (setns)
      30: { ns: nsA, cgroup: v1(UID_A), start: 100 }, // pod A's sandbox
    });
    const r = scanPodNetns([UID_A, UID_B], { procRoot: root });
    expect(first(r, UID_A)).toMatchObject({ pid: 30, ...id(nsA) });
    expect(first(r, UID_B)).toMatchObject({ pid: 5, ...id(nsA) });
    expect(r.missing).toEqual([]);
  });

  it('host netns by explicit identity, and refusal when it cannot be known', async () => {
    const a = await freshNetns();
    const nsA = `/run/netns/${a.name}`;
    const root = fakeRoot({ 10: { ns: nsA, cgroup: v1(UID_A), start: 1 } }); // no pid 1
    expect(() => scanPodNetns([UID_A], { procRoot: root })).toThrow(/host netns/);
    expect(first(scanPodNetns([UID_A], { procRoot: root, hostNetns: id(HOST_NS) }), UID_A)?.pid).toBe(10);
    expect(scanPodNetns([UID_A], { procRoot: root, hostNetns: id(nsA) }).missing).toEqual([UID_A]);
  });

  it('caps the pids read (lowest first) and the bytes read per cgroup file', async () => {
    const a = await freshNetns();
    const nsA = `/run/netns/${a.name}`;
    const junk = '5:blkio:/system.slice/some-long-service-name.service\n'.repeat(2000); // ~106 KB
    const root = fakeRoot({
      1: { ns: HOST_NS },
      2: { ns: HOST_NS },
      9: { ns: nsA, cgroup: v1(UID_A), start: 1 },
      10: { ns: nsA, cgroup: junk + v1(UID_B), start: 1 },
    });
    const capped = scanPodNetns([UID_A], { procRoot: root, maxPids: 2 });
    expect(capped).toMatchObject({ scanned: 2, truncated: true, missing: [UID_A] });
    expect(first(scanPodNetns([UID_A], { procRoot: root, maxPids: 3 }), UID_A)?.pid).toBe(9);

    expect(scanPodNetns([UID_B], { procRoot: root }).missing).toEqual([UID_B]); // 64 KiB default cap
    expect(first(scanPodNetns([UID_B], { procRoot: root, maxCgroupBytes: 1 << 20 }), UID_B)?.pid).toBe(10);
    // A line cut by the cap is dropped, never half-matched (here: the UID line cut mid container id).
    const line = `0::/kubepods/pod${UID_A}/${CID}\n`;
    const cut = fakeRoot({ 1: { ns: HOST_NS }, 7: { ns: nsA, cgroup: line, start: 1 } });
    expect(scanPodNetns([UID_A], { procRoot: cut, maxCgroupBytes: line.length - 10 }).missing).toEqual([UID_A]);
    expect(first(scanPodNetns([UID_A], { procRoot: cut, maxCgroupBytes: line.length }), UID_A)?.pid).toBe(7);
    expect(() => scanPodNetns([UID_A], { procRoot: cut, maxPids: 0 })).toThrow(RangeError);
    expect(() => scanPodNetns(['not-a-uid'], { procRoot: cut })).toThrow(TypeError);
  });
});

describe.skipIf(!privileged())('scan of the real /proc', () => {
  let child: ChildProcess | undefined;
  afterEach(() => {
    if (child?.pid !== undefined && child.exitCode === null) child.kill('SIGKILL');
    child = undefined;
  });

  it('walks it without errors in bounded time and finds nothing for a random UID', async () => {
    const ns = await freshNetns();
    child = spawn('ip', ['netns', 'exec', ns.name, 'sleep', '30'], { stdio: 'ignore' });
    await new Promise<void>((res, rej) => {
      child!.once('spawn', () => res());
      child!.once('error', rej);
    });
    const uid = randomUUID();
    const t0 = performance.now();
    // This process is in the host netns; /proc/1/ns/net may be unreadable in a sandboxed CI root.
    const r = scanPodNetns([uid], { procRoot: '/proc', hostNetns: id(HOST_NS) });
    const ms = performance.now() - t0;
    expect(ms).toBeLessThan(5000);
    expect(r.candidates.size).toBe(0);
    expect(r.missing).toEqual([uid]);
    expect(r.scanned).toBeGreaterThan(2); // at least pid 1, this test process and the child
    expect(r.truncated).toBe(false);
    expect(r.skipped).toBeLessThan(r.scanned);
  });
});
