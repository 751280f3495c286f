// A real Kubernetes node on this machine, for the end-to-end tests and `npm run cluster:up`:
// kubelet + containerd 1.6 + runc, with Debian's bridge + host-local as the primary CNI, all in
// a node netns and a private mount and pid namespace of their own. Nothing touches the host:
//
//   netns   `pwt-node-<pid>-<i>`: eth0 (a veth into the cluster's fabric netns, the node IP),
//           the `kubernetes` Service VIP on lo (a forwarder process relays it to the host's
//           apiserver on 127.0.0.1), cni0 and every pod veth the bridge plugin makes.
//   mounts  one namespace (unshare --propagation private) for the kubelet, containerd and every
//           container: /run, /var/log, /var/lib/cni and /var/lib/kubelet are private there; the
//           node's /etc/cni/net.d, /opt/cni/bin, /run/netns, /run/istio-cni and /run/ztunnel are
//           node-local dirs under `dir` bound over them (so the chart's default host paths
//           work, and the host sees what the installer wrote at `<dir>/cni-net` etc.).
//   pids    a pid namespace whose init is tini: stop() kills it and with it every process of
//           the node, and the mount namespace (overlays, tmpfs, netns pins) goes with them.
//   cgroups every pod under `/pwt-node-<pid>-<i>` in each hierarchy (the kubelet's cgroupRoot,
//           cgroupfs driver, QoS cgroups under it), removed by stop().
//
// The kubelet and containerd are separate processes entered into those namespaces
// (nsenter -t <init>), so a test can restart either alone, or restart the whole node (a
// reboot: the namespaces go, the node's dirs and the runtime's and kubelet's disk state stay).
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { containerdConfigToml } from '../lib/containerd-config.mjs';
import { tokenKubeconfig } from './controlplane.mjs';
import { cgroupMounts, hidingScript, removeCgroupTree, shq } from './host-isolation.mjs';

/** Debian's reference CNI plugins the node's primary network uses. */
export const CNI_PLUGIN_DIR = '/usr/lib/cni';
export const PRIMARY_CNI_PLUGINS = ['bridge', 'host-local', 'loopback', 'portmap'];
/** What a node needs on the machine (besides the kubelet built by build.mjs). */
export const NODE_TOOLS = ['containerd', 'containerd-shim-runc-v2', 'runc', 'ctr', 'tini', 'nsenter', 'unshare', 'setpriv', 'ip', 'iptables'];

/** The `kubernetes` Service's ClusterIP (first address of the control plane's service range). */
export const API_VIP = '10.96.0.1';
/** Host paths the node's mount namespace makes private (see the file comment). */
const HIDDEN = ['/run', '/var/log', '/var/lib/cni', '/var/lib/kubelet', '/etc/cni', '/opt/cni'];
/** Node-local dirs bound over the node's standard paths: `<dir>/<name>` → path. */
export const NODE_DIRS = {
  'cni-net': '/etc/cni/net.d',
  'cni-bin': '/opt/cni/bin',
  netns: '/run/netns',
  'istio-cni': '/run/istio-cni',
  ztunnel: '/run/ztunnel',
};
const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', timeout: opts.timeoutMs ?? 30_000, env: { PATH, ...opts.env } });
  if (r.status !== 0 && !opts.allowFail) {
    throw Object.assign(new Error(`${cmd} ${args.join(' ')}: ${r.error?.message ?? (r.stderr || `exit ${r.status}`).trim()}`), { code: 'NODE_SETUP' });
  }
  return r;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
};

function childrenOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
function comm(pid) {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}
/** The pids of `root`'s descendants (depth-first). */
function descendants(root) {
  const out = [];
  const todo = [root];
  while (todo.length) {
    for (const c of childrenOf(todo.pop())) {
      out.push(c);
      todo.push(c);
    }
  }
  return out;
}

/** The node's primary network: bridge cni0 + host-local over the node's pod CIDR. */
export function bridgeConflist(podCidr) {
  const gateway = podCidr.replace(/\.0\/24$/, '.1');
  return {
    cniVersion: '1.0.0',
    name: 'pwt-bridge',
    plugins: [
      {
        type: 'bridge', bridge: 'cni0', isGateway: true, ipMasq: false, hairpinMode: true,
        ipam: { type: 'host-local', ranges: [[{ subnet: podCidr, gateway }]], routes: [{ dst: '0.0.0.0/0' }] },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
}

function containerdToml(dir, sandboxImage) {
  return containerdConfigToml({
    root: join(dir, 'ctrd/root'), state: join(dir, 'ctrd/state'), temp: join(dir, 'ctrd/tmp'), opt: join(dir, 'ctrd/opt'),
    socket: join(dir, 'containerd.sock'), sandboxImage, cniBinDir: NODE_DIRS['cni-bin'], cniConfDir: NODE_DIRS['cni-net'],
  });
}

function kubeletConfig(o) {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // This machine's hierarchy is cgroup v1 (hybrid); every pod cgroup under our own root.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: o.cgroupRoot,
    cgroupsPerQOS: true,
    enforceNodeAllocatable: [],
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${o.socket}`,
    podLogsDir: o.podLogsDir,
    resolvConf: o.resolvConf,
    staticPodPath: '',
    address: o.nodeIp,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: false }, x509: {} },
    authorization: { mode: 'AlwaysAllow' },
    registerWithTaints: o.taints,
    maxPods: 110,
    serializeImagePulls: false,
    // Nothing pulls here (images are imported): never collect them, never evict for disk.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
    // Status reported often, so a stopped kubelet is noticed within the test's patience.
    nodeStatusUpdateFrequency: '4s',
    nodeStatusReportFrequency: '10s',
    syncFrequency: '10s',
    shutdownGracePeriod: '0s',
    localStorageCapacityIsolation: false,
  };
}

/**
 * Starts one node. `cluster`: { fabricNetns, caFile, apiPort, forwarderScript } from
 * cluster.mjs; `token`: the node's kubelet token (user system:node:<name>).
 * Returns a handle (see node.d.mts).
 */
export async function startNode({ dir, name, netnsName, nodeIp, podCidr, cluster, token, kubelet, sandboxImage, taints = [], detached = false, log = () => undefined }) {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const d of [...Object.keys(NODE_DIRS), 'kubelet', 'pod-logs', 'ctrd/root', 'ctrd/state', 'ctrd/tmp', 'ctrd/opt', 'stage', 'logs']) {
    mkdirSync(join(dir, d), { recursive: true });
  }
  const cgroupRoot = `/${netnsName}`;
  const socket = join(dir, 'containerd.sock');
  const state = { initPid: 0, launcherPid: 0, kubeletPid: 0, containerdPid: 0, forwarderPid: 0 };

  // ---- network: the node netns, eth0 into the fabric, the API VIP on lo ----
  if (!existsSync(`/run/netns/${netnsName}`)) sh('ip', ['netns', 'add', netnsName]);
  const nsIp = (...args) => sh('ip', ['-n', netnsName, ...args]);
  nsIp('link', 'set', 'lo', 'up');
  if (sh('ip', ['-n', netnsName, 'link', 'show', 'eth0'], { allowFail: true }).status !== 0) {
    const peer = `n-${name.slice(-12)}`.slice(0, 15);
    sh('ip', ['-n', cluster.fabricNetns, 'link', 'add', peer, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netnsName]);
    sh('ip', ['-n', cluster.fabricNetns, 'link', 'set', peer, 'master', 'br0', 'up']);
    nsIp('addr', 'add', `${nodeIp}/24`, 'dev', 'eth0');
    nsIp('link', 'set', 'eth0', 'up');
    nsIp('addr', 'add', `${API_VIP}/32`, 'dev', 'lo');
  }

  // ---- files: CNI plugins and the primary conflist, containerd and kubelet config ----
  for (const p of PRIMARY_CNI_PLUGINS) {
    const dst = join(dir, 'cni-bin', p);
    if (!existsSync(dst)) copyFileSync(join(CNI_PLUGIN_DIR, p), dst);
  }
  const conflist = join(dir, 'cni-net', '10-pwt-bridge.conflist');
  if (!existsSync(conflist)) writeFileSync(conflist, `${JSON.stringify(bridgeConflist(podCidr), null, 2)}\n`);
  writeFileSync(join(dir, 'containerd.toml'), containerdToml(dir, sandboxImage));
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 127.0.0.1\noptions ndots:1\n');
  writeFileSync(join(dir, 'kubelet.yaml'), `${JSON.stringify(kubeletConfig({
    cgroupRoot, socket, podLogsDir: join(dir, 'pod-logs'), resolvConf: join(dir, 'resolv.conf'), nodeIp, taints,
  }), null, 2)}\n`);
  writeFileSync(join(dir, 'kubelet.kubeconfig'), tokenKubeconfig(`https://${API_VIP}:443`, cluster.caFile, `system:node:${name}`, token), { mode: 0o600 });
  for (const m of cgroupMounts()) mkdirSync(join(m, cgroupRoot), { recursive: true });

  // ---- the namespaces: pid 1 is tini; the script before it makes the mounts ----
  const init = [
    '#!/bin/sh', '# pid 1 of the node\'s pid namespace, in its private mount namespace (scripts/kube/node.mjs)', 'set -eu',
    ...hidingScript(HIDDEN, join(dir, 'stage'), 'pwt-node'),
    ...Object.entries(NODE_DIRS).flatMap(([d, p]) => [`mkdir -p ${shq(p)}`, `mount --bind ${shq(join(dir, d))} ${shq(p)}`]),
    // The runtime's bind mounts (netns pins, kubelet volumes) must reach the containers that
    // mount those paths with HostToContainer propagation: shared, within this namespace only.
    'mount --make-rshared /',
    `: > ${shq(join(dir, 'init.ready'))}`,
    'exec tini -s -- sleep infinity',
  ];
  writeFileSync(join(dir, 'init.sh'), `${init.join('\n')}\n`, { mode: 0o755 });

  const spawnLogged = (args, logName, opts = {}) => {
    const fd = openSync(join(dir, 'logs', logName), 'a');
    try {
      const argv = detached ? args : ['setpriv', '--pdeathsig', 'KILL', '--', ...args];
      const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd], detached, env: { PATH, HOME: dir, TMPDIR: join(dir, 'ctrd/tmp'), ...opts.env } });
      child.unref();
      child.on('error', () => undefined);
      return child;
    } finally {
      closeSync(fd);
    }
  };
  const enter = (argv) => ['nsenter', '-t', String(state.initPid), '-m', '-p', '-n', '-r', '-w', '--', ...argv];
  /** The pid, inside the node, of the process `comm` that `launcher` (an nsenter) started. */
  const findUnder = async (launcher, name, timeoutMs) => {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const pid = descendants(launcher).find((p) => comm(p) === name);
      if (pid) return pid;
      if (!alive(launcher) || Date.now() > end) return 0;
      await sleep(20);
    }
  };

  const startInit = async () => {
    rmSync(join(dir, 'init.ready'), { force: true });
    const launcher = spawnLogged(['nsenter', `--net=/run/netns/${netnsName}`, '--',
      'unshare', '--mount', '--pid', '--fork', '--kill-child', '--propagation', 'private', '--mount-proc', '--',
      '/bin/sh', join(dir, 'init.sh')], 'init.log');
    state.launcherPid = launcher.pid;
    const end = Date.now() + 20_000;
    while (!existsSync(join(dir, 'init.ready'))) {
      if (launcher.exitCode !== null || Date.now() > end) {
        throw Object.assign(new Error(`node ${name}: the namespaces did not come up:\n${tail('init.log')}`), { code: 'NODE_START' });
      }
      await sleep(20);
    }
    state.initPid = await findUnder(launcher.pid, 'tini', 5000);
    if (!state.initPid) throw Object.assign(new Error(`node ${name}: no init process`), { code: 'NODE_START' });
  };
  const startContainerd = async () => {
    const launcher = spawnLogged(enter(['containerd', '--config', join(dir, 'containerd.toml')]), 'containerd.log');
    state.containerdPid = await findUnder(launcher.pid, 'containerd', 10_000);
    const end = Date.now() + 30_000;
    while (!existsSync(socket) || sh('ctr', ['-a', socket, 'version'], { allowFail: true }).status !== 0) {
      if (!state.containerdPid || !alive(state.containerdPid) || Date.now() > end) {
        throw Object.assign(new Error(`node ${name}: containerd did not start:\n${tail('containerd.log')}`), { code: 'NODE_START' });
      }
      await sleep(50);
    }
  };
  // Run as `kubelet` (comm is the name execve was given): how agents (ours, upstream's) find it.
  const kubeletPath = join(dir, 'bin', 'kubelet');
  if (!existsSync(kubeletPath)) {
    mkdirSync(join(dir, 'bin'), { recursive: true });
    symlinkSync(kubelet, kubeletPath);
  }
  const startKubelet = async () => {
    const launcher = spawnLogged(enter([kubeletPath, '--config', join(dir, 'kubelet.yaml'), '--kubeconfig', join(dir, 'kubelet.kubeconfig'),
      '--root-dir', join(dir, 'kubelet'), '--hostname-override', name, '--node-ip', nodeIp, '--v', '1']), 'kubelet.log');
    state.kubeletPid = await findUnder(launcher.pid, 'kubelet', 10_000);
    if (!state.kubeletPid) throw Object.assign(new Error(`node ${name}: the kubelet did not start:\n${tail('kubelet.log')}`), { code: 'NODE_START' });
  };
  const startForwarder = () => {
    // Runs in the host's namespaces: listens in the node netns, connects to the host's loopback.
    const child = spawnLogged([process.execPath, cluster.forwarderScript, `/run/netns/${netnsName}`, `${API_VIP}:443`, `127.0.0.1:${cluster.apiPort}`], 'forwarder.log');
    state.forwarderPid = child.pid;
  };
  const tail = (logName, n = 25) => {
    try {
      return readFileSync(join(dir, 'logs', logName), 'utf8').split('\n').slice(-n).join('\n');
    } catch {
      return '';
    }
  };
  const kill = async (pid, signal = 'SIGKILL', waitMs = 10_000) => {
    if (!pid || !alive(pid)) return;
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    const end = Date.now() + waitMs;
    while (alive(pid) && Date.now() < end) await sleep(20);
  };
  /** Kills every process of the node (the pid namespace's init takes the rest with it). */
  const killAll = async () => {
    const init = state.initPid;
    await kill(state.initPid || state.launcherPid);
    if (state.launcherPid) await kill(state.launcherPid);
    // Wait for the namespace's processes to be reaped (their cgroups are busy until then).
    const end = Date.now() + 10_000;
    while (init && alive(init) && comm(init) === 'tini' && Date.now() < end) await sleep(20);
    Object.assign(state, { initPid: 0, launcherPid: 0, kubeletPid: 0, containerdPid: 0 });
  };

  const node = {
    name, dir, netnsName, nodeIp, podCidr, socket, cgroupRoot, state,
    /** The node's path `p` (e.g. /etc/cni/net.d) as the host sees it, when it is one of NODE_DIRS. */
    hostPath(p) {
      for (const [d, np] of Object.entries(NODE_DIRS)) if (p === np || p.startsWith(`${np}/`)) return join(dir, d, p.slice(np.length));
      return join(`/proc/${state.initPid}/root`, p);
    },
    log: tail,
    /** argv inside the node's namespaces (mount, pid, net), e.g. ctr or iptables-save. */
    exec(argv, o = {}) {
      const r = spawnSync(enter(argv)[0], enter(argv).slice(1), { encoding: 'utf8', timeout: o.timeoutMs ?? 30_000, input: o.input, env: { PATH, HOME: dir } });
      return { code: r.status, stdout: r.stdout ?? '', stderr: r.stderr || (r.error ? r.error.message : '') };
    },
    /** `ctr images import` into the runtime's k8s.io namespace. */
    importImage(tarball) {
      const r = node.exec(['ctr', '-a', socket, '-n', 'k8s.io', 'images', 'import', tarball], { timeoutMs: 120_000 });
      if (r.code !== 0) throw Object.assign(new Error(`ctr images import ${tarball}: ${r.stderr.trim()}`), { code: 'NODE_IMAGE' });
    },
    tagImage(from, to) {
      const r = node.exec(['ctr', '-a', socket, '-n', 'k8s.io', 'images', 'tag', '--force', from, to]);
      if (r.code !== 0) throw Object.assign(new Error(`ctr images tag ${from} ${to}: ${r.stderr.trim()}`), { code: 'NODE_IMAGE' });
    },
    async restartKubelet({ downMs = 0 } = {}) {
      await kill(state.kubeletPid);
      if (downMs) await sleep(downMs);
      await startKubelet();
    },
    async stopKubelet() {
      await kill(state.kubeletPid);
      state.kubeletPid = 0;
    },
    startKubelet,
    /** A reboot: every process of the node dies, its namespaces go; then all starts again. */
    async restart({ downMs = 0 } = {}) {
      await killAll();
      // /run is a tmpfs on a real node: what the node-local dirs behind it held is gone too.
      for (const [d, p] of Object.entries(NODE_DIRS)) {
        if (!p.startsWith('/run/')) continue;
        for (const e of readdirSync(join(dir, d))) rmSync(join(dir, d, e), { recursive: true, force: true });
      }
      if (downMs) await sleep(downMs);
      await startInit();
      await startContainerd();
      await startKubelet();
    },
    /** Kills everything of the node and removes its cgroups, netns and dir. Idempotent. */
    async stop() {
      await killAll();
      await removeNode(node.record());
    },
    /** What removeNode needs, for a process that did not start the node (`npm run cluster:down`). */
    record() {
      return { name, dir, netnsName, cgroupRoot, pids: [state.initPid, state.launcherPid, state.forwarderPid].filter(Boolean) };
    },
  };

  try {
    startForwarder();
    await startInit();
    await startContainerd();
    await startKubelet();
    log(`node ${name}: kubelet ${state.kubeletPid}, containerd ${state.containerdPid} in netns ${netnsName} (${nodeIp}, pods ${podCidr})`);
    return node;
  } catch (err) {
    err.message += `\n--- kubelet.log\n${tail('kubelet.log')}`;
    await node.stop().catch(() => undefined);
    throw err;
  }
}

/**
 * Removes a node from its record (node.record()): kills its processes (the pid namespace's init
 * takes the rest with it), then removes its cgroups, netns and dir. Idempotent.
 */
export async function removeNode({ name, dir, netnsName, cgroupRoot, pids = [] }) {
  const problems = [];
  for (const pid of pids) {
    if (!pid || !alive(pid)) continue;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      continue;
    }
    const end = Date.now() + 10_000;
    while (alive(pid) && Date.now() < end) await sleep(20);
  }
  for (const m of cgroupMounts()) {
    const end = Date.now() + 10_000;
    for (;;) {
      try {
        removeCgroupTree(join(m, cgroupRoot));
        break;
      } catch (err) {
        if (Date.now() > end) {
          problems.push(`cgroup ${m}${cgroupRoot}: ${err.message}`);
          break;
        }
        await sleep(50);
      }
    }
  }
  sh('ip', ['netns', 'del', netnsName], { allowFail: true });
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch (err) {
    problems.push(`${dir}: ${err.message}`);
  }
  if (problems.length) throw Object.assign(new Error(`node ${name} stop: ${problems.join('; ')}`), { code: 'NODE_STOP' });
}

/** Removes cgroups, netns and dirs of nodes whose creating process is gone (pwt-node-<pid>-…). */
export function sweepNodeLeftovers(tmp) {
  const dead = (n) => {
    const pid = /^pwt-(?:node|fabric|cluster)-(\d+)-?/.exec(n)?.[1];
    return pid !== undefined && !alive(Number(pid));
  };
  for (const m of cgroupMounts()) {
    try {
      for (const e of readdirSync(m)) if (e.startsWith('pwt-node-') && dead(e)) removeCgroupTree(join(m, e));
    } catch {
      // busy or unreadable: a later sweep
    }
  }
  try {
    for (const e of readdirSync(tmp)) if (dead(e) && statSync(join(tmp, e)).isDirectory()) rmSync(join(tmp, e), { recursive: true, force: true });
  } catch {
    // nothing to sweep
  }
}
