// A real container runtime for end-to-end tests: Debian's containerd 1.6 (CRI
// plugin) + runc, started per test file inside a `pwt-` node netns, with the
// test playing the kubelet over CRI (test/helpers/cri.ts).
//
// Isolation (house rule: never touch the host). containerd runs
//   setpriv --pdeathsig KILL  nsenter --net=<node netns>
//     unshare --mount --pid --fork --kill-child --propagation private --mount-proc
//       sh start.sh  →  exec tini -- containerd --config <dir>/config.toml
// so it lives in the node netns (cni0-style bridges, veths and portmap rules land
// there), in a private mount namespace and in a pid namespace of its own:
// - The host paths containerd 1.6 touches whatever its config says — `/var/run/netns`
//   (the `cni-<uuid>` netns pins), `/var/lib/cni` (libcni's result cache) and
//   `/run/containerd` (shim sockets, fifos, runc state) — are empty private dirs in that
//   mount namespace: a tmpfs over the ones that exist; for one that does not, its parent
//   becomes a private tmpfs that re-binds every other entry of the host's (so nothing
//   is ever created on the host). Everything else (root, state, sockets, opt, temp, pod
//   logs) is under one temp dir `$TMPDIR/pwt-ctrd-<pid>-XXXXXX`.
// - Everything it starts (shims, runc, pause and app containers) is inside its pid
//   namespace: killing the namespace's init kills them all, and then the mount namespace
//   (and with it every overlay rootfs, netns pin and tmpfs) goes away with nothing to
//   unmount by hand. `--pdeathsig KILL` + `--kill-child` do the same when the test
//   process dies without calling stop().
// - Pod cgroups go under `/pwt-ctrd-<pid>-<n>/kubepods/besteffort/pod<uid>` in every
//   hierarchy (kubelet's cgroupfs layout, so proc scans find the pod UID), removed at stop.
// The CNI netns paths containerd hands the plugins (`/var/run/netns/cni-…`) exist only in
// its mount namespace; from the test (or an agent: HOST_MOUNTS_ROOT) open them under
// `mountNsRoot` (= `/proc/<pid>/root`).
import { containerdConfigToml } from '../../scripts/lib/containerd-config.mjs';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, symlinkSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CriClient, NamespaceMode, type PodSandboxConfigT } from './cri.js';
import { pauseImage, type BuiltImage } from './oci-image.js';
import { processAlive } from '../../lib/demo/leftovers.js';
import { cgroupMounts, hidingPlan, hidingScript, removeCgroupTree, resolveUnder, shq } from '../../scripts/kube/host-isolation.mjs';

export { cgroupMounts, hidingPlan, resolveUnder };
import { Netns } from '../../lib/net/netns/netns.js';

/** What startContainerd needs on the machine (root too). */
export const CONTAINERD_TOOLS = ['containerd', 'containerd-shim-runc-v2', 'runc', 'ctr', 'tini', 'nsenter', 'unshare', 'setpriv', 'cc'];

/** The host paths containerd 1.6 uses regardless of its config; private in its mount namespace. */
export const HIDDEN_HOST_PATHS = ['/var/run/netns', '/var/lib/cni', '/run/containerd'];

export const CRI_NAMESPACE = 'k8s.io';

export interface StartContainerdOptions {
  /** The node netns containerd runs in: a `/run/netns` name or a path. */
  nodeNetns: string;
  /** CNI conf dir (containerd takes the first conflist there, and reloads on change). */
  cniConfDir: string;
  /** CNI bin dir (containerd 1.6 takes one dir: fill it with symlinks, see test/helpers/cni-fixtures.ts). */
  cniBinDir: string;
  /** More images to import besides pause (e.g. busyboxImage()). */
  images?: BuiltImage[];
  /** Extra environment for containerd, which its CNI plugins inherit. */
  env?: Record<string, string>;
  /** containerd's log level. Default `info` (the log is `<dir>/containerd.log`). */
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** How long to wait for the CRI socket and the images. Default 30 s. */
  startTimeoutMs?: number;
}

export interface PodSpec {
  name: string;
  /** Default `default`. */
  namespace?: string;
  /** Default: a fresh UUID. */
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Merged into the generated PodSandboxConfig (e.g. portMappings, dnsConfig, linux.sysctls). */
  extra?: Partial<PodSandboxConfigT>;
}

export interface Sandbox {
  id: string;
  /** The PodSandboxConfig it was created with (CreateContainer needs it again). */
  config: PodSandboxConfigT;
  /** PodSandboxStatus' primary IP and every IP (primary first). */
  ip: string;
  ips: string[];
  /** The netns path containerd gave the CNI plugins (`/var/run/netns/cni-…`, in its mount namespace). */
  netnsPath: string;
  /** The same netns, openable from the test's mount namespace (`mountNsRoot` + netnsPath). */
  hostNetnsPath: string;
  /** The pause process: its pid in the host's pid namespace. */
  pid: number;
}

export interface Containerd {
  /** The temp dir everything lives in. */
  readonly dir: string;
  /** containerd's gRPC (CRI) socket. */
  readonly socket: string;
  /** containerd's pid (host pid namespace). */
  readonly pid: number;
  /**
   * `/proc/<pid>/root`: containerd's mount namespace, seen from the host. Paths under it that
   * cross an absolute symlink (`/var/run` → `/run`) escape to the host's root: use hostPath(),
   * or hostMountsRoot for an agent.
   */
  readonly mountNsRoot: string;
  /**
   * A dir to give an agent as HOST_MOUNTS_ROOT: `<it>/var/run/netns` and `<it>/run/netns` are
   * symlinks to containerd's private netns dir, so `<it>` + CNI_NETNS opens the pod's netns.
   */
  readonly hostMountsRoot: string;
  /** The cgroup parent of every pod: `/pwt-ctrd-<pid>-<n>` (relative to each hierarchy's root). */
  readonly cgroupRoot: string;
  readonly cri: CriClient;
  /** The sandbox (pause) image's ref. */
  readonly pauseImage: string;
  /** A path in containerd's mount namespace, as the host can open it (symlinks resolved in that namespace). */
  hostPath(path: string): string;
  /** containerd's log so far. */
  log(): string;
  /** Runs argv inside containerd's namespaces (mount, pid, net): e.g. `ctr` or `ls /var/run/netns`. */
  exec(argv: string[], opts?: { timeoutMs?: number; input?: string }): { code: number | null; stdout: string; stderr: string };
  /** `ctr images import` of an OCI tarball, then waits until CRI lists the image. */
  importImage(image: BuiltImage): Promise<void>;
  /** A PodSandboxConfig the way the kubelet fills it (labels, log dir, cgroup parent, namespaces). */
  sandboxConfig(pod: PodSpec): PodSandboxConfigT;
  /** RunPodSandbox + PodSandboxStatus: the sandbox with its IPs and netns. */
  runPod(pod: PodSpec): Promise<Sandbox>;
  /** StopPodSandbox + RemovePodSandbox (what the kubelet does when a pod is deleted). */
  removePod(id: string): Promise<void>;
  /**
   * Removes every sandbox through CRI (so CNI DEL runs; `removeSandboxes: false` skips that),
   * kills containerd and all it started, removes the cgroups and the temp dir. Does all of it
   * even when a step fails, then rejects naming what failed (e.g. a plugin's DEL error).
   * Idempotent (later calls return the first call's promise); safe after a failed start.
   */
  stop(opts?: { removeSandboxes?: boolean }): Promise<void>;
}

let seq = 0;

function configToml(dir: string, opts: StartContainerdOptions, sandboxImage: string): string {
  return containerdConfigToml({
    root: join(dir, 'root'), state: join(dir, 'state'), temp: join(dir, 'tmp'), opt: join(dir, 'opt'), socket: join(dir, 'containerd.sock'),
    sandboxImage, cniBinDir: opts.cniBinDir, cniConfDir: opts.cniConfDir, ...(opts.logLevel ? { logLevel: opts.logLevel } : {}),
  });
}

/** start.sh: runs as pid 1 of the new pid namespace, in the new mount namespace. */
function startScript(dir: string): string {
  const lines = ['#!/bin/sh', '# pid 1 of containerd\'s pid namespace, in its private mount namespace (test/helpers/containerd.ts)', 'set -eu'];
  lines.push(...hidingScript(HIDDEN_HOST_PATHS, join(dir, 'stage'), 'pwt-ctrd'));
  lines.push(`exec tini -- containerd --config ${shq(join(dir, 'config.toml'))}`);
  return `${lines.join('\n')}\n`;
}


function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function comm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

function statusField(pid: number, field: string): string | undefined {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith(`${field}:`));
    return line?.slice(field.length + 1).trim();
  } catch {
    return undefined;
  }
}

/** Host pid of the process that is `nsPid` in the pid namespace whose init is `initPid`. */
function hostPidOf(initPid: number, nsPid: number): number | undefined {
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const ns = statusField(Number(e), 'NSpid')?.split(/\s+/).map(Number);
    if (!ns || ns[1] !== nsPid) continue;
    // is it a descendant of initPid?
    let cur = Number(e);
    for (let i = 0; i < 64 && cur > 1; i++) {
      if (cur === initPid) return Number(e);
      cur = Number(statusField(cur, 'PPid') ?? 0);
    }
  }
  return undefined;
}

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

async function retry<T>(what: string, timeoutMs: number, fn: () => T): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return fn();
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what}: ${(err as Error).message}`);
      await sleep(50);
    }
  }
}

/**
 * Removes what killed runs left (their processes died with them: --pdeathsig): the temp dirs
 * `pwt-ctrd-<pid>-*` (and the CRI tests' `pwt-cri-<pid>-*`) and the cgroups `pwt-ctrd-<pid>-*`
 * of pids that are gone. Called by the vitest global setup and teardown.
 */
export function sweepContainerdLeftovers(): void {
  const dead = (name: string): boolean => {
    const pid = /^pwt-(?:ctrd|cri)-(\d+)-/.exec(name)?.[1];
    return pid !== undefined && !processAlive(Number(pid));
  };
  try {
    for (const e of readdirSync(tmpdir())) if (dead(e)) rmSync(join(tmpdir(), e), { recursive: true, force: true });
  } catch {
    // no tmpdir listing: nothing to sweep
  }
  for (const m of cgroupMounts()) {
    try {
      for (const e of readdirSync(m)) {
        if (!dead(e)) continue;
        try {
          removeCgroupTree(join(m, e));
        } catch {
          // still busy: a later sweep gets it
        }
      }
    } catch {
      // unreadable hierarchy
    }
  }
}

/** Starts containerd in `opts.nodeNetns`; see the file comment. Rejects (with the log tail) if it does not come up. */
export async function startContainerd(opts: StartContainerdOptions): Promise<Containerd> {
  const netnsPath = opts.nodeNetns.includes('/') ? opts.nodeNetns : `/run/netns/${opts.nodeNetns}`;
  if (!existsSync(netnsPath)) throw new Error(`node netns ${netnsPath} does not exist`);
  for (const d of [opts.cniConfDir, opts.cniBinDir]) if (!statSync(d).isDirectory()) throw new Error(`${d} is not a directory`);
  const n = ++seq;
  const dir = mkdtempSync(join(tmpdir(), `pwt-ctrd-${process.pid}-`));
  const cgroupRoot = `/pwt-ctrd-${process.pid}-${n}`;
  const socket = join(dir, 'containerd.sock');
  const logPath = join(dir, 'containerd.log');
  const timeoutMs = opts.startTimeoutMs ?? 30_000;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let exitInfo: string | undefined;
  let initPid = 0;
  let pid = 0;
  const cri = new CriClient(socket);
  const log = (): string => {
    try {
      return readFileSync(logPath, 'utf8');
    } catch {
      return '';
    }
  };
  const tail = (): string => log().split('\n').slice(-25).join('\n');

  let stopping: Promise<void> | undefined;
  const stop = (o: { removeSandboxes?: boolean } = {}): Promise<void> => {
    stopping ??= (async () => {
      const problems: string[] = [];
      // 1. Sandboxes out through CRI, so the CNI DELs run (and leases are released) as on a node.
      if (child && exitInfo === undefined && pid && o.removeSandboxes !== false) {
        try {
          for (const s of await cri.listPodSandbox({}, { timeoutMs: 5000 })) {
            await cri.stopPodSandbox(s.id, { timeoutMs: 15_000 }).catch((e: Error) => problems.push(`stop ${s.id}: ${e.message}`));
            await cri.removePodSandbox(s.id, { timeoutMs: 15_000 }).catch((e: Error) => problems.push(`remove ${s.id}: ${e.message}`));
          }
        } catch (err) {
          problems.push(`listing sandboxes: ${(err as Error).message}`);
        }
      }
      cri.close();
      // 2. Kill the pid namespace's init: the kernel kills everything else in it, and unshare
      //    (which waits for its child) reaps the init and exits. Without an init (a failed
      //    start), kill unshare: --kill-child takes the namespace down the same way.
      if (child && exitInfo === undefined) {
        try {
          process.kill(initPid || child.pid!, 'SIGKILL');
        } catch {
          // gone already
        }
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), 10_000);
        });
        if (await Promise.race([exited.then(() => false), late])) {
          problems.push('containerd\'s namespace did not exit in 10 s after SIGKILL');
          try {
            process.kill(child.pid!, 'SIGKILL');
          } catch {
            // gone
          }
        }
        clearTimeout(timer);
      }
      if (initPid) await retry('waiting for the namespace init to go', 10_000, () => {
        if (processAlive(initPid) && comm(initPid) === 'tini') throw new Error(`pid ${initPid} still running`);
      }).catch((e: Error) => problems.push(e.message));
      // 3. Cgroups (kept by the kernel until their tasks are reaped: retry a little).
      for (const m of cgroupMounts()) {
        await retry(`removing ${m}${cgroupRoot}`, 10_000, () => removeCgroupTree(join(m, cgroupRoot))).catch((e: Error) => problems.push(e.message));
      }
      // 4. The temp dir (the mounts on it died with the mount namespace).
      await retry(`removing ${dir}`, 10_000, () => rmSync(dir, { recursive: true, force: true })).catch((e: Error) => problems.push(e.message));
      if (problems.length) throw new Error(`containerd stop: ${problems.join('; ')}`);
    })();
    return stopping;
  };

  try {
    for (const d of ['root', 'state', 'tmp', 'opt', 'pods', 'stage']) mkdirSync(join(dir, d), { recursive: true });
    const pause = pauseImage();
    writeFileSync(join(dir, 'config.toml'), configToml(dir, opts, pause.ref));
    writeFileSync(join(dir, 'start.sh'), startScript(dir), { mode: 0o755 });
    const logFd = openSync(logPath, 'a');
    try {
      child = spawn('setpriv', ['--pdeathsig', 'KILL', '--',
        'nsenter', `--net=${netnsPath}`, '--',
        'unshare', '--mount', '--pid', '--fork', '--kill-child', '--propagation', 'private', '--mount-proc', '--',
        '/bin/sh', join(dir, 'start.sh')], {
        stdio: ['ignore', logFd, logFd],
        env: {
          PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: dir, TMPDIR: join(dir, 'tmp'),
          ...opts.env,
        },
      });
    } finally {
      closeSync(logFd);
    }
    child.unref();
    exited = new Promise((resolve) => child!.once('exit', (code, signal) => {
      exitInfo = signal ? `signal ${signal}` : `exit ${code}`;
      resolve();
    }));
    child.once('error', (err) => {
      exitInfo = `spawn failed: ${err.message}`;
    });

    // Up when CRI answers Version.
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (exitInfo !== undefined) throw new Error(`containerd exited during start (${exitInfo}):\n${tail()}`);
      const criFailed = /msg="failed to load plugin io\.containerd\.grpc\.v1\.cri".*/.exec(log());
      if (criFailed) throw new Error(`containerd's CRI plugin did not load: ${criFailed[0]}`);
      if (existsSync(socket)) {
        try {
          await cri.version({ timeoutMs: 1000 });
          break;
        } catch {
          // not serving yet
        }
      }
      if (Date.now() > deadline) throw new Error(`containerd did not answer on ${socket} in ${timeoutMs} ms:\n${tail()}`);
      await sleep(20);
    }
    initPid = childrenOf(child.pid!)[0] ?? 0;
    pid = childrenOf(initPid).find((p) => comm(p) === 'containerd') ?? 0;
    if (!initPid || !pid) throw new Error(`cannot find containerd's processes under pid ${child.pid} (init ${initPid})`);
    if (readlinkSync(`/proc/${pid}/ns/net`) !== `net:[${statSync(netnsPath).ino}]`) {
      throw new Error(`containerd (pid ${pid}) is not in the node netns ${netnsPath}`);
    }

    const mountNsRoot = `/proc/${pid}/root`;
    const hostMountsRoot = join(dir, 'host-mounts');
    const privateNetns = resolveUnder(mountNsRoot, '/var/run/netns');
    for (const link of ['var/run/netns', 'run/netns']) {
      mkdirSync(dirname(join(hostMountsRoot, link)), { recursive: true });
      symlinkSync(privateNetns, join(hostMountsRoot, link));
    }
    const ctrd: Containerd = {
      dir, socket, pid, mountNsRoot, hostMountsRoot, cgroupRoot, cri, pauseImage: pause.ref,
      hostPath: (p) => resolveUnder(mountNsRoot, p),
      log,
      exec(argv, o = {}) {
        // -r -w: containerd's root and cwd too. Entering a mount namespace alone resets the root to
        // the namespace's own, which is not ours when the tests run in a chroot (a fresh root).
        const r = spawnSync('nsenter', ['-t', String(initPid), '-m', '-p', '-n', '-r', '-w', '--', ...argv], {
          encoding: 'utf8', timeout: o.timeoutMs ?? 30_000, input: o.input,
          env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', HOME: dir, TMPDIR: join(dir, 'tmp') },
        });
        return { code: r.status, stdout: r.stdout ?? '', stderr: r.stderr || (r.error ? r.error.message : '') };
      },
      async importImage(image) {
        const r = ctrd.exec(['ctr', '-a', socket, '-n', CRI_NAMESPACE, 'images', 'import', image.tarball], { timeoutMs: timeoutMs });
        if (r.code !== 0) throw new Error(`ctr images import ${image.tarball} failed (${r.code}): ${r.stderr.trim()}`);
        const until = Date.now() + timeoutMs;
        while (!(await cri.imageStatus(image.ref))) {
          if (Date.now() > until) throw new Error(`CRI does not list ${image.ref} after the import`);
          await sleep(20);
        }
      },
      sandboxConfig(pod) {
        const namespace = pod.namespace ?? 'default';
        const uid = pod.uid ?? randomUUID();
        const base: PodSandboxConfigT = {
          metadata: { name: pod.name, namespace, uid, attempt: 0 },
          hostname: pod.name,
          logDirectory: join(dir, 'pods', `${namespace}_${pod.name}_${uid}`),
          labels: {
            ...pod.labels, 'io.kubernetes.pod.name': pod.name, 'io.kubernetes.pod.namespace': namespace, 'io.kubernetes.pod.uid': uid,
          },
          annotations: { 'kubernetes.io/config.source': 'api', ...pod.annotations },
          linux: {
            cgroupParent: `${cgroupRoot}/kubepods/besteffort/pod${uid}`,
            securityContext: { namespaceOptions: { network: NamespaceMode.POD, pid: NamespaceMode.CONTAINER, ipc: NamespaceMode.POD } },
          },
        };
        const extra = pod.extra ?? {};
        return { ...base, ...extra, linux: { ...base.linux, ...extra.linux } };
      },
      async runPod(pod) {
        const config = ctrd.sandboxConfig(pod);
        mkdirSync(config.logDirectory!, { recursive: true });
        const id = await cri.runPodSandbox(config);
        const st = await cri.podSandboxStatus(id, { verbose: true });
        const info = JSON.parse(st.info.info ?? '{}') as {
          pid?: number; runtimeSpec?: { linux?: { namespaces?: Array<{ type: string; path?: string }> } };
        };
        const nsPath = info.runtimeSpec?.linux?.namespaces?.find((x) => x.type === 'network')?.path ?? '';
        const ip = st.status?.network?.ip ?? '';
        const ips = [ip, ...(st.status?.network?.additionalIps ?? []).map((x) => x.ip)].filter(Boolean);
        const hostPid = info.pid ? hostPidOf(initPid, info.pid) : undefined;
        return { id, config, ip, ips, netnsPath: nsPath, hostNetnsPath: ctrd.hostPath(nsPath), pid: hostPid ?? 0 };
      },
      async removePod(id) {
        await cri.stopPodSandbox(id);
        await cri.removePodSandbox(id);
      },
      stop,
    };
    await ctrd.importImage(pause);
    for (const img of opts.images ?? []) await ctrd.importImage(img);
    return ctrd;
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}

/**
 * What a CRI test's runtime runs in: a pwt- netns as the node's ("host") netns, lo up, and a pwt-
 * work dir for its config. `teardown` stops containerd first, then removes both.
 */
export class CriNode {
  private constructor(readonly name: string, readonly ns: Netns, readonly work: string) {}

  /** `name`: the netns's (the caller's pwt- name, e.g. test/helpers/netns.ts nsName()). */
  static async create(name: string): Promise<CriNode> {
    const ns = await Netns.create(name);
    await (await ns.netlink()).links.set('lo', { up: true });
    return new CriNode(name, ns, mkdtempSync(join(tmpdir(), `pwt-cri-${process.pid}-`)));
  }

  async teardown(ctrd: Containerd | undefined): Promise<void> {
    const problems: unknown[] = [];
    await ctrd?.stop().catch((e: unknown) => problems.push(e));
    this.ns.close();
    await Netns.remove(this.name).catch(() => undefined);
    rmSync(this.work, { recursive: true, force: true });
    if (problems.length) throw problems[0];
  }
}
