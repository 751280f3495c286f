// Upstream's node agent (`istio.io/istio/cni/cmd/install-cni`: installer + ambient node agent),
// built from the Go module proxy like its CNI plugin (bench/lib/istio-cni.ts: same pinned
// pseudo-version, same cache), and run on a bench node as its DaemonSet pod would run on a real
// one, without touching this machine: in a mount namespace of its own (unshare -m) and a chroot
// whose /host holds the node's proc root (so /host/proc/1/ns/net is the node's netns, which
// ALLOW_SWITCH_TO_HOST_NS=true makes it enter for host rules), a CNI conf and bin directory of
// its own, and the agent's ServiceAccount token at the in-cluster path. It stays in this
// machine's network namespace (it reaches the apiserver on 127.0.0.1), as the podwire agent does.
// Its readiness is upstream's fixed :8000/readyz.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ensureIstioCni, ISTIO_VERSION } from './istio-cni.js';

export const INSTALL_CNI_PKG = 'istio.io/istio/cni/cmd/install-cni';
/** Upstream's readiness port (constants.ReadinessPort): not configurable. */
export const UPSTREAM_READY_PORT = 8000;

export function installCniPath(): string {
  const cache = process.env.PODWIRE_ISTIO_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'podwire', 'istio');
  return join(cache, 'bin', `install-cni-${ISTIO_VERSION}`);
}

/** Both binaries (agent and plugin, which its installer copies), building them when missing; or why not. */
export function ensureIstioAgent(opts: { timeoutS?: number; log?: (m: string) => void } = {}): { agent?: string; plugin?: string; why?: string } {
  const log = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  if (spawnSync('go', ['version'], { encoding: 'utf8' }).status !== 0) return { why: 'no Go toolchain (go version failed)' };
  for (const tool of ['unshare', 'chroot', 'mount']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return { why: `${tool} not found` };
  }
  const plugin = ensureIstioCni({ ...opts, log });
  if (!plugin.path) return { why: `istio-cni: ${plugin.why}` };
  const out = installCniPath();
  if (existsSync(out)) return { agent: out, plugin: plugin.path };
  const dir = mkdtempSync(join(tmpdir(), 'pwt-install-cni-build-'));
  const t0 = Date.now();
  try {
    writeFileSync(join(dir, 'go.mod'), 'module podwire.local/installcni\n\ngo 1.24\n');
    log(`install-cni: building ${INSTALL_CNI_PKG}@${ISTIO_VERSION} from the Go module proxy (first run only)`);
    const env = { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=mod -buildvcs=false' };
    const timeout = (opts.timeoutS ?? 600) * 1000;
    const get = spawnSync('go', ['get', `istio.io/istio@${ISTIO_VERSION}`], { cwd: dir, env, encoding: 'utf8', timeout });
    if (get.status !== 0) return { why: `go get failed: ${(get.stderr || get.error?.message || '').trim().split('\n').slice(-3).join(' ')}` };
    mkdirSync(dirname(out), { recursive: true });
    const tmp = `${out}.tmp-${process.pid}`;
    const b = spawnSync('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', tmp, INSTALL_CNI_PKG], { cwd: dir, env, encoding: 'utf8', timeout: Math.max(10_000, timeout - (Date.now() - t0)) });
    if (b.status !== 0) {
      rmSync(tmp, { force: true });
      return { why: `go build failed${b.error ? ` (${b.error.message})` : ''}: ${(b.stderr ?? '').trim().split('\n').slice(-3).join(' ')}` };
    }
    renameSync(tmp, out);
    log(`install-cni: built in ${Math.round((Date.now() - t0) / 1000)} s → ${out}`);
    return { agent: out, plugin: plugin.path };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface UpstreamNode {
  name: string;
  procRoot: string;
  zdsPath: string;
  /** A directory of this node's own (the chroot and its CNI dirs go there). */
  dir: string;
}

export interface UpstreamCluster {
  server: string;
  caFile: string;
  agentTokenFile: string;
}

/** The chroot: the machine's system directories, the node's /host, the ServiceAccount, the binaries. */
function prepareRoot(node: UpstreamNode, cluster: UpstreamCluster, bins: { agent: string; plugin: string }): { root: string; script: string } {
  const root = join(node.dir, 'upstream-root');
  const host = join(node.dir, 'upstream-host');
  rmSync(root, { recursive: true, force: true });
  const binds: Array<[string, string]> = [];
  // /tmp first: the root itself is under it, and must not be bound again inside it with its mounts.
  for (const d of ['tmp', 'usr', 'lib', 'lib64', 'lib32', 'bin', 'sbin', 'etc', 'dev', 'sys', 'run']) {
    const src = `/${d}`;
    if (!existsSync(src)) continue;
    const st = lstatSync(src);
    if (st.isSymbolicLink()) {
      mkdirSync(root, { recursive: true });
      symlinkSync(readlinkSync(src), join(root, d));
    } else {
      mkdirSync(join(root, d), { recursive: true });
      binds.push([src, join(root, d)]);
    }
  }
  for (const d of ['proc', 'host/proc', 'host/etc/cni/net.d', 'host/opt/cni/bin', 'opt/cni/bin', 'var/run/secrets/kubernetes.io/serviceaccount']) mkdirSync(join(root, d), { recursive: true });
  // The node's own CNI directories (kept across restarts, as on a node), with a primary network to chain to.
  mkdirSync(join(host, 'net.d'), { recursive: true });
  mkdirSync(join(host, 'bin'), { recursive: true });
  const primary = join(host, 'net.d', '10-pwt-bench.conflist');
  if (!existsSync(primary)) writeFileSync(primary, `${JSON.stringify({ cniVersion: '1.0.0', name: 'pwt-bench', plugins: [{ type: 'ptp', ipam: { type: 'host-local', subnet: '10.99.0.0/16' } }] })}\n`);
  // Upstream's nftables host rule needs the kubelet's uid and finds it by its process (comm, cmdline,
  // status): a stand-in in this node's proc root, as root (podwire's agent is told KUBELET_UID=0).
  const kubelet = join(node.procRoot, '999');
  if (!existsSync(kubelet)) {
    mkdirSync(join(kubelet, 'ns'), { recursive: true });
    symlinkSync(readlinkSync(join(node.procRoot, '1', 'ns', 'net')), join(kubelet, 'ns', 'net'));
    writeFileSync(join(kubelet, 'comm'), 'kubelet\n');
    writeFileSync(join(kubelet, 'cmdline'), '/usr/bin/kubelet\0--config=/var/lib/kubelet/config.yaml\0');
    writeFileSync(join(kubelet, 'status'), 'Name:\tkubelet\nState:\tS (sleeping)\nTgid:\t999\nPid:\t999\nPPid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n');
    writeFileSync(join(kubelet, 'cgroup'), '0::/system.slice/kubelet.service\n');
    writeFileSync(join(kubelet, 'stat'), '999 (kubelet) S 1 999 999 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 999 0 0\n');
  }
  const sa = join(node.dir, 'upstream-sa');
  mkdirSync(sa, { recursive: true });
  writeFileSync(join(sa, 'token'), readFileSync(cluster.agentTokenFile));
  writeFileSync(join(sa, 'ca.crt'), readFileSync(cluster.caFile));
  writeFileSync(join(sa, 'namespace'), 'istio-system');
  copyFileSync(bins.agent, join(root, 'install-cni'));
  copyFileSync(bins.plugin, join(root, 'opt', 'cni', 'bin', 'istio-cni'));
  binds.push([node.procRoot, join(root, 'host', 'proc')], [join(host, 'net.d'), join(root, 'host', 'etc', 'cni', 'net.d')],
    [join(host, 'bin'), join(root, 'host', 'opt', 'cni', 'bin')], [sa, join(root, 'var', 'run', 'secrets', 'kubernetes.io', 'serviceaccount')]);
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  // Private propagation first, so nothing mounted here is seen outside; all of it goes with the last process.
  const script = ['set -e', 'mount --make-rprivate /', ...binds.map(([s, d]) => `mount ${s === '/tmp' ? '--bind' : '--rbind'} ${q(s)} ${q(d)}`),
    `mount -t proc proc ${q(join(root, 'proc'))}`, `exec chroot ${q(root)} /install-cni`].join('\n');
  return { root, script };
}

export interface UpstreamAgent {
  proc: ChildProcess;
  pid: number;
  /** spawn → :8000/readyz answered 200, ms. */
  spawnToReadyMs: number;
  /** VmRSS / VmHWM of the agent process, MiB. */
  mem(): { rssMb: number; peakRssMb: number; threads: number };
  kill(): Promise<void>;
}

const mb = (kb: number) => Math.round(kb / 102.4) / 10;

/** A process's VmRSS, VmHWM (MiB) and thread count from /proc, without touching it (no forced GC). */
export function processMem(pid: number): { rssMb: number; peakRssMb: number; threads: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const f = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? NaN);
  return { rssMb: mb(f('VmRSS')), peakRssMb: mb(f('VmHWM')), threads: f('Threads') };
}

function ready(): Promise<boolean> {
  return new Promise((resolve) => {
    const r = request({ host: '127.0.0.1', port: UPSTREAM_READY_PORT, path: '/readyz', timeout: 500 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    r.on('error', () => resolve(false));
    r.on('timeout', () => { r.destroy(); resolve(false); });
    r.end();
  });
}

/** Starts upstream's agent for `node` and waits for its readiness (at most `timeoutMs`). */
export async function startUpstreamAgent(node: UpstreamNode, cluster: UpstreamCluster, bins: { agent: string; plugin: string }, env: Record<string, string>, opts: { timeoutMs?: number; log?: (m: string) => void } = {}): Promise<UpstreamAgent> {
  if (await ready()) throw new Error(`something already answers on :${UPSTREAM_READY_PORT}/readyz; upstream's agent needs that port`);
  const { script } = prepareRoot(node, cluster, bins);
  const url = new URL(cluster.server);
  const fullEnv: Record<string, string> = {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    KUBERNETES_SERVICE_HOST: url.hostname, KUBERNETES_SERVICE_PORT: url.port || '443',
    POD_NAME: `istio-cni-node-${node.name}`, POD_NAMESPACE: 'istio-system', NODE_NAME: node.name,
    AMBIENT_ENABLED: 'true', ALLOW_SWITCH_TO_HOST_NS: 'true', REPAIR_ENABLED: 'false',
    ZTUNNEL_UDS_ADDRESS: node.zdsPath, CNI_AGENT_RUN_DIR: join(node.dir, 'upstream-run'),
    // Upstream's default selects nothing; its chart's default: the dataplane-mode label on pod or namespace.
    AMBIENT_ENABLEMENT_SELECTOR: JSON.stringify([{ podSelector: { matchLabels: { 'istio.io/dataplane-mode': 'ambient' } } }, { podSelector: { matchExpressions: [{ key: 'istio.io/dataplane-mode', operator: 'DoesNotExist' }] }, namespaceSelector: { matchLabels: { 'istio.io/dataplane-mode': 'ambient' } } }]),
    AMBIENT_DNS_CAPTURE: 'true', AMBIENT_IPV6: 'true', NATIVE_NFTABLES: 'true',
    LOG_LEVEL: 'warn',
    ...env,
  };
  mkdirSync(fullEnv.CNI_AGENT_RUN_DIR!, { recursive: true });
  mkdirSync(dirname(node.zdsPath), { recursive: true });
  const t0 = performance.now();
  const proc = spawn('unshare', ['-m', 'sh', '-c', script], { env: fullEnv, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => { if (stderr.length < 64 * 1024) stderr += d.toString(); });
  let exited: number | null | undefined;
  const exit = new Promise<void>((resolve) => proc.once('exit', (code) => { exited = code; resolve(); }));
  for (const end = Date.now() + (opts.timeoutMs ?? 60_000); ; await new Promise((r) => setTimeout(r, 10))) {
    if (exited !== undefined) throw new Error(`upstream agent exited (${exited}) before ready: ${stderr.trim().split('\n').slice(-5).join(' | ')}`);
    if (await ready()) break;
    if (Date.now() > end) {
      proc.kill('SIGKILL');
      throw new Error(`upstream agent not ready within ${opts.timeoutMs ?? 60_000} ms: ${stderr.trim().split('\n').slice(-5).join(' | ')}`);
    }
  }
  const spawnToReadyMs = performance.now() - t0;
  const pid = proc.pid!;
  return {
    proc, pid, spawnToReadyMs,
    mem: () => processMem(pid),
    // SIGKILL: no cleanup (host rules, probe set and pods' rules stay, as across an upgrade).
    kill: async () => {
      if (exited === undefined) proc.kill('SIGKILL');
      await exit;
    },
  };
}
