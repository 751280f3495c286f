// What the CNI plugin adds to a pod's start, through a real runtime: containerd 1.6 + runc
// over CRI (test/helpers/containerd.ts) in a `pwt-bench-cni-` node netns, the bench playing
// the kubelet (Pod object first, then RunPodSandbox), a conflist of Debian's bridge +
// host-local (dual stack), and the agent (lib/agent/agent.ts, nftables) in this process with
// its installer writing the real chained entry, a ztunnel-like peer (lib/testing/ztunnel-peer.ts,
// protocol only) acking the ZDS adds. Against a control plane of its own (startControlPlane).
//
// Measured in one run, N sandboxes each, one after another, each removed afterwards:
//   1. RunPodSandbox, and StopPodSandbox + RemovePodSandbox, with the chain
//      - bridge + host-local only (baseline, no agent),
//      - + podwire-cni, ambient pod (enrolled: in-pod rules, ZDS add + ack, before RunPodSandbox returns),
//      - + podwire-cni, plain pod (not enrolled: the plugin asks the agent, which says no),
//      - + upstream's istio-cni plugin (built from the Go module proxy, bench/lib/istio-cni.ts),
//        ambient and plain, the same agent serving its POST /cmdadd.
//   2. The plugin exec'd alone (bench/lib/exec-timer.ts: a C posix_spawn loop): VERSION, and a
//      STATUS forwarded to the running agent; /bin/true as the exec floor; and the ADDs it decides
//      with the agent stopped (a run dir with no socket): a plain pod by the decision file, and
//      a pod of an excluded namespace (decided before any agent contact). Goal: ≤ 2 ms p50.
//
//   npm run bench:cni -- [--pods 40] [--rounds 2] [--execs 200] [--no-istio]
//   (--pods per chain in all, split over --rounds turns of every chain)
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect, type Server } from 'node:net';
import { freePort } from '../test/helpers/agent-env.js';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Agent } from '../lib/agent/agent.js';
import { parseAgentConfig } from '../lib/agent/config.js';
import { createLogging } from '../lib/util/log.js';
import { DECISION_FILE, DECISION_FILE_VERSION } from '../lib/cni/constants.js';
import { createNode, removeNetns } from '../lib/demo/topology.js';
import { INSTALL_SETTINGS, parseInstallConfig } from '../lib/install/config.js';
import { KubeClient } from '../lib/kube/client.js';
import { loadKubeconfig } from '../lib/kube/config.js';
import { listenTcp } from '../lib/net/sock/listen.js';
import type { Netns } from '../lib/net/netns/netns.js';
import { ZtunnelPeer } from '../lib/testing/ztunnel-peer.js';
import { bridgeConflist, debianCniAvailable, makeCniBinDir, writeConflist } from '../test/helpers/cni-fixtures.js';
import { startContainerd, type Containerd } from '../test/helpers/containerd.js';
import { ExecTimer } from './lib/exec-timer.js';
import { ensureIstioCni, ISTIO_VERSION } from './lib/istio-cni.js';
import { quantile, writeResults, type Series } from './lib/report.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SHIM = join(ROOT, 'build/Release/podwire-cni');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ms2 = (us: number) => Math.round(us / 10) / 100;

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  for (const end = Date.now() + timeoutMs; !(await check()); await sleep(5)) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
  }
}

interface PhaseResult { run: number[]; stop: number[]; remove: number[]; enrollSumS?: number; enrollCount?: number }

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { pods: { type: 'string', default: '40' }, rounds: { type: 'string', default: '2' }, execs: { type: 'string', default: '200' }, 'no-istio': { type: 'boolean', default: false } },
    strict: true,
  });
  const N = Number(values.pods);
  const EXECS = Number(values.execs);
  const ROUNDS = Number(values.rounds);
  if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be a positive integer');
  if (!Number.isInteger(N) || N < 1 || !Number.isInteger(EXECS) || EXECS < 1) throw new Error('--pods and --execs must be positive integers');
  if (!debianCniAvailable()) throw new Error('needs Debian\'s containernetworking-plugins (/usr/lib/cni/bridge, host-local)');
  if (!existsSync(SHIM)) throw new Error(`needs ${SHIM} (npm run build:native)`);

  const istio = values['no-istio'] ? { built: false, why: '--no-istio' } as ReturnType<typeof ensureIstioCni> : ensureIstioCni();
  if (!istio.path) console.error(`upstream istio-cni not available: ${istio.why}`);

  const { startControlPlane } = await import(new URL('../../scripts/kube/controlplane.mjs', import.meta.url).href) as typeof import('../scripts/kube/controlplane.mjs');
  const root = mkdtempSync(join(tmpdir(), 'pwt-bench-cni-'));
  const prefix = `pwt-bench-cni-${process.pid}-`;
  const nodeName = `pwt-bench-cni-${process.pid}`;
  const quiet = () => createLogging({ levels: { default: 'none' }, json: true });
  let cp: Awaited<ReturnType<typeof startControlPlane>> | undefined;
  let admin: KubeClient | undefined;
  let node: Netns | undefined;
  let ctrd: Containerd | undefined;
  let agent: Agent | undefined;
  let agentClient: KubeClient | undefined;
  let peer: ZtunnelPeer | undefined;
  let forwarder: Server | undefined;
  let timer: ExecTimer | undefined;
  const namespaces: string[] = [];
  try {
    cp = await startControlPlane({ dir: join(root, 'cp'), log: (m: string) => console.error(m) });
    admin = new KubeClient(loadKubeconfig(cp.adminKubeconfig), { requestTimeoutMs: 30_000 });
    node = (await createNode(prefix, { bridge: false })).node;
    const procRoot = join(root, 'proc');
    mkdirSync(join(procRoot, '1', 'ns'), { recursive: true });
    symlinkSync(`/run/netns/${prefix}node`, join(procRoot, '1', 'ns', 'net'));
    writeFileSync(join(procRoot, '1', 'cgroup'), '0::/init.scope\n');
    writeFileSync(join(procRoot, '1', 'stat'), '1 (systemd) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n');
    const runDir = join(root, 'run');
    const zdsPath = join(root, 'zds', 'ztunnel.sock');
    const confDir = join(root, 'net.d');
    mkdirSync(confDir);
    const binDir = makeCniBinDir(join(root, 'bin'));
    const conflist = bridgeConflist({ bridge: 'pwtcbr7', subnet4: '10.88.7.0/24', subnet6: 'fd00:88:7::/64', ipamDir: join(root, 'ipam') });
    writeConflist(confDir, conflist);
    ctrd = await startContainerd({ nodeNetns: `${prefix}node`, cniConfDir: confDir, cniBinDir: binDir });
    const c = ctrd;
    const mkNs = async (suffix: string, labels: Record<string, string> = {}) => {
      const name = `pwt-bench-cni-${process.pid}-${suffix}`;
      await admin!.core.createNamespace({ body: { metadata: { name, labels } } });
      namespaces.push(name);
      return name;
    };
    const ambientNs = await mkNs('ambient', { 'istio.io/dataplane-mode': 'ambient' });
    const plainNs = await mkNs('plain');
    peer = new ZtunnelPeer({ path: zdsPath, listeners: false, backoffInitialMs: 20, backoffMaxMs: 100, maxLogEntries: 0, maxCaptures: 0 });
    const p = peer;

    const baseEnv = async (extra: Record<string, string>) => ({
      NODE_NAME: nodeName, AMBIENT_ENABLED: 'true', POD_NAMESPACE: 'istio-system', ALLOW_SWITCH_TO_HOST_NS: 'true',
      HOST_PROC_ROOT: procRoot, HOST_MOUNTS_ROOT: c.hostMountsRoot, CNI_AGENT_RUN_DIR: runDir, ZTUNNEL_UDS_ADDRESS: zdsPath,
      AGENT_LISTEN_ADDRESS: '127.0.0.1', HEALTH_PORT: String(await freePort()), MONITORING_PORT: String(await freePort()),
      NATIVE_NFTABLES: 'true', KUBELET_UID: '0', MOUNTED_CNI_NET_DIR: confDir, CNI_BIN_TARGET_DIRS: binDir, CNI_PLUGIN_BINARY: SHIM,
      AMBIENT_DRIFT_CHECK_INTERVAL: '0', ...extra,
    });
    const startAgent = async (extra: Record<string, string> = {}) => {
      const env = await baseEnv(extra);
      agentClient = new KubeClient(loadKubeconfig(cp!.agentKubeconfig), { requestTimeoutMs: 30_000 });
      const a = new Agent({
        config: parseAgentConfig(env, [], { foreign: INSTALL_SETTINGS }), install: parseInstallConfig(env),
        client: agentClient, logging: quiet(), hostRuleRetryMs: 100,
      });
      await a.start();
      agent = a;
      p.start();  // idempotent: the peer reconnects to each new agent
      await until('ztunnel connected', () => a.node?.zds?.server.connectionCount === 1, 15_000);
      return a;
    };
    const stopAgent = async () => {
      await agent?.stop({ cleanup: true });
      agent = undefined;
      agentClient?.close();
      agentClient = undefined;
    };

    let seq = 0;
    /** One sandbox the kubelet's way; returns its timings (µs) and whether the peer got the pod. */
    const sandbox = async (ns: string): Promise<{ run: number; stop: number; remove: number; enrolled: boolean }> => {
      const name = `p${++seq}`;
      const created = await admin!.core.createNamespacedPod({ namespace: ns, body: { metadata: { name }, spec: { nodeName, terminationGracePeriodSeconds: 0, containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } } });
      const uid = created.metadata!.uid!;
      // The kubelet starts the sandbox once it has seen the pod through its own watch: by then the
      // agent's informer has it too. Wait for that (a fixed 50 ms without an agent), so the lookup
      // is the cache hit of a real node, not a race with the watch event.
      if (agent) await until('pod in the agent\'s cache', () => agent!.controller?.pods.get(name, ns) !== undefined, 5_000);
      else await sleep(50);
      const config = c.sandboxConfig({ name, namespace: ns, uid });
      mkdirSync(config.logDirectory!, { recursive: true });
      const t0 = performance.now();
      const id = await c.cri.runPodSandbox(config);
      const t1 = performance.now();
      const enrolled = p.active.has(uid);
      await c.cri.stopPodSandbox(id);
      const t2 = performance.now();
      await c.cri.removePodSandbox(id);
      const t3 = performance.now();
      await admin!.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0 } });
      if (agent) await until('unenrolled after DEL', () => !agent!.node!.dataplane.cache.has(uid) && !p.active.has(uid), 10_000);
      await sleep(20);  // let the informer's pod events pass before the next sandbox
      return { run: (t1 - t0) * 1000, stop: (t2 - t1) * 1000, remove: (t3 - t2) * 1000, enrolled };
    };
    const phase = async (what: string, ns: string, expectEnrolled: boolean, n: number): Promise<PhaseResult> => {
      // The chain was just changed: containerd reloads the conflist on its own; wait until a sandbox shows it.
      for (let i = 0; ; i++) {
        const s = await sandbox(ns);
        if (s.enrolled === expectEnrolled && i >= 2) break;
        if (i > 20) throw new Error(`${what}: warm-up sandboxes never ${expectEnrolled ? 'enrolled' : 'stayed unenrolled'}`);
      }
      const out: PhaseResult = { run: [], stop: [], remove: [] };
      // The agent's own time per enrollment (podwire_enroll_duration_seconds: rules, ZDS add + ack, probe set).
      const enrollHist = async () => {
        const v = agent ? (await agent.metrics.enrollDuration.get()).values : [];
        const pick = (suffix: string) => v.filter((x) => x.metricName === `podwire_enroll_duration_seconds_${suffix}`).reduce((a, x) => a + x.value, 0);
        return { sum: pick('sum'), count: pick('count') };
      };
      const h0 = await enrollHist();
      for (let i = 0; i < n; i++) {
        const s = await sandbox(ns);
        if (s.enrolled !== expectEnrolled) throw new Error(`${what}: sandbox ${i} ${s.enrolled ? 'enrolled' : 'not enrolled'}`);
        out.run.push(s.run);
        out.stop.push(s.stop);
        out.remove.push(s.remove);
      }
      const h1 = await enrollHist();
      out.enrollSumS = h1.sum - h0.sum;
      out.enrollCount = h1.count - h0.count;
      const med = (xs: number[]) => ms2(quantile([...xs].sort((a, b) => a - b), 0.5));
      console.log(`[${what}] RunPodSandbox p50 ${med(out.run)} ms, StopPodSandbox p50 ${med(out.stop)} ms, RemovePodSandbox p50 ${med(out.remove)} ms`);
      return out;
    };
    const types = () => (JSON.parse(readFileSync(join(confDir, '10-pwt.conflist'), 'utf8')) as { plugins: Array<{ type: string }> }).plugins.map((x) => x.type);

    // The chains take turns, ROUNDS times, so machine load drifting during the run (2 CPUs shared
    // with containerd, etcd and the apiserver) weighs on each alike.
    const empty = (): PhaseResult => ({ run: [], stop: [], remove: [] });
    const add = (into: PhaseResult, r: PhaseResult) => {
      into.run.push(...r.run); into.stop.push(...r.stop); into.remove.push(...r.remove);
      into.enrollSumS = (into.enrollSumS ?? 0) + (r.enrollSumS ?? 0);
      into.enrollCount = (into.enrollCount ?? 0) + (r.enrollCount ?? 0);
    };
    const base = empty();
    const pwAmbient = empty();
    const pwPlain = empty();
    const isAmbient = istio.path ? empty() : undefined;
    const isPlain = istio.path ? empty() : undefined;
    const per = Math.ceil(N / ROUNDS);
    let execs: Record<string, number[]> = {};
    let istioEnv: Record<string, string> = {};
    if (istio.path) {
      // The plugin runs in containerd's netns (the node's): reach the apiserver on the same address there.
      const apiPort = Number(new URL(cp.server).port);
      forwarder = await listenTcp(node, { address: '127.0.0.1', port: apiPort }, (sock) => {
        const up = connect(apiPort, '127.0.0.1');
        sock.pipe(up).pipe(sock);
        sock.on('error', () => up.destroy());
        up.on('error', () => sock.destroy());
      });
      const saDir = join(root, 'sa');
      mkdirSync(saDir);
      copyFileSync(cp.agentTokenFile, join(saDir, 'token'));
      copyFileSync(cp.caFile, join(saDir, 'ca.crt'));
      istioEnv = { CNI_PLUGIN_BINARY: istio.path, WRITE_PLUGIN_KUBECONFIG: 'true', KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(apiPort), SERVICE_ACCOUNT_DIR: saDir };
    }
    for (let round = 1; round <= ROUNDS; round++) {
      console.log(`round ${round} of ${ROUNDS}, ${per} sandboxes per chain`);
      // 1. Baseline: bridge + host-local, no agent.
      add(base, await phase('baseline', plainNs, false, per));

      // 2. podwire: the installer puts podwire-cni into the chain.
      await startAgent();
      await until('entry installed', () => types().join(',') === 'bridge,istio-cni' && readFileSync(join(binDir, 'istio-cni')).equals(readFileSync(SHIM)));
      add(pwAmbient, await phase('podwire ambient', ambientNs, true, per));
      add(pwPlain, await phase('podwire plain', plainNs, false, per));

      if (round === ROUNDS) {
        // 3. The plugin alone (last round, podwire's agent running).
        timer = ExecTimer.build();
        const list = JSON.parse(readFileSync(join(confDir, '10-pwt.conflist'), 'utf8')) as { cniVersion: string; name: string; plugins: Array<Record<string, unknown>> };
        const entry = list.plugins.find((x) => x.type === 'istio-cni')!;
        const netconf = (v: string) => JSON.stringify({ ...entry, cniVersion: v, name: list.name });
        const cniEnv = (command: string) => ({ PATH: '/usr/sbin:/usr/bin:/sbin:/bin', CNI_COMMAND: command, CNI_PATH: binDir });
        const installed = join(binDir, 'istio-cni');
        // One call each first, so a failure shows the plugin's answer.
        // (Asynchronous: the agent answering the plugin is in this process.)
        const check = (argv: string[], input: string, env: Record<string, string>) => new Promise<void>((resolve, reject) => {
          const child = execFile(argv[0]!, argv.slice(1), { env, encoding: 'utf8' }, (err, stdout, stderr) => {
            if (err) reject(new Error(`${argv.join(' ')} (CNI_COMMAND=${env.CNI_COMMAND}) failed (${err.code}): ${stdout}${stderr}`));
            else resolve();
          });
          child.stdin!.end(input);
        });
        for (const cmd of ['VERSION', 'STATUS']) await check([installed], netconf('1.1.0'), cniEnv(cmd));
        // A forwarded ADD for a plain pod (the agent looks it up in its cache and answers "not ambient"):
        // the plugin's whole part in a plain pod's RunPodSandbox.
        const probe = await admin.core.createNamespacedPod({ namespace: plainNs, body: { metadata: { name: 'exec-probe' }, spec: { nodeName, terminationGracePeriodSeconds: 0, containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } } });
        await until('probe pod cached', () => agent!.controller?.pods.get('exec-probe', plainNs) !== undefined);
        const addEnv = {
          ...cniEnv('ADD'), CNI_CONTAINERID: 'a0b1c2d3e4f5', CNI_NETNS: '/var/run/netns/cni-00000000-0000-0000-0000-000000000000', CNI_IFNAME: 'eth0',
          CNI_ARGS: `K8S_POD_NAMESPACE=${plainNs};K8S_POD_NAME=exec-probe;K8S_POD_INFRA_CONTAINER_ID=a0b1c2d3e4f5;K8S_POD_UID=${probe.metadata!.uid!};IgnoreUnknown=1`,
        };
        const addConf = JSON.stringify({ ...entry, cniVersion: list.cniVersion, name: list.name, prevResult: { cniVersion: list.cniVersion, interfaces: [{ name: 'eth0', sandbox: addEnv.CNI_NETNS }], ips: [{ address: '10.88.7.250/24', interface: 0 }], routes: [], dns: {} } });
        await check([installed], addConf, addEnv);
        // The agent stopped: a run dir without its socket, with a decision file as the agent leaves it.
        const downRun = join(root, 'run-down');
        mkdirSync(downRun, { mode: 0o700 });
        writeFileSync(join(downRun, DECISION_FILE), JSON.stringify({
          version: DECISION_FILE_VERSION, generation: 1, writtenAtMs: Date.now(), node: nodeName, excludeNamespaces: ['kube-system'],
          meshNamespaces: [ambientNs], pods: [{ namespace: plainNs, name: 'exec-probe', uid: probe.metadata!.uid!, mesh: false }],
        }), { mode: 0o600 });
        const downConf = JSON.stringify({ ...JSON.parse(addConf) as Record<string, unknown>, cni_agent_run_dir: downRun, exclude_namespaces: ['kube-system'] });
        const excludedEnv = { ...addEnv, CNI_ARGS: 'K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-0;K8S_POD_INFRA_CONTAINER_ID=a0b1c2d3e4f5;IgnoreUnknown=1' };
        await check([SHIM], downConf, addEnv);
        await check([SHIM], downConf, excludedEnv);
        execs = {
          'podwire-cni ADD, plain pod, agent stopped (decision file)': await timer.run(EXECS, [SHIM], downConf, addEnv),
          'podwire-cni ADD, excluded namespace, no agent': await timer.run(EXECS, [SHIM], downConf, excludedEnv),
          'exec floor: /bin/true': await timer.run(EXECS, ['/bin/true'], '', cniEnv('VERSION')),
          'podwire-cni VERSION': await timer.run(EXECS, [installed], netconf('1.1.0'), cniEnv('VERSION')),
          'podwire-cni STATUS (forwarded to the agent)': await timer.run(EXECS, [installed], netconf('1.1.0'), cniEnv('STATUS')),
          'podwire-cni ADD, plain pod (forwarded to the agent)': await timer.run(EXECS, [installed], addConf, addEnv),
        };
      }
      await stopAgent();
      await until('entry removed', () => types().join(',') === 'bridge');

      // 4. Upstream's plugin in the same chain, served by the same agent (its POST /cmdadd).
      if (istio.path) {
        await startAgent(istioEnv);
        await until('upstream entry installed', () => types().join(',') === 'bridge,istio-cni' && readFileSync(join(binDir, 'istio-cni')).equals(readFileSync(istio.path!)));
        add(isAmbient!, await phase('istio-cni ambient', ambientNs, true, per));
        add(isPlain!, await phase('istio-cni plain', plainNs, false, per));
        await stopAgent();
        await until('entry removed', () => types().join(',') === 'bridge');
      }
    }
    if (istio.path) execs['istio-cni (upstream) VERSION'] = await timer!.run(EXECS, [istio.path], JSON.stringify({ cniVersion: '1.1.0', name: 'pwt-net', type: 'istio-cni' }), { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', CNI_COMMAND: 'VERSION' });

    // Results.
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    const stats = (xs: number[]) => ({ p50Ms: ms2(quantile(sorted(xs), 0.5)), p90Ms: ms2(quantile(sorted(xs), 0.9)), minMs: ms2(sorted(xs)[0]!), n: xs.length });
    const chains: Array<[string, PhaseResult | undefined]> = [
      ['bridge + host-local (baseline)', base],
      ['+ podwire-cni, ambient pod', pwAmbient],
      ['+ podwire-cni, plain pod', pwPlain],
      ['+ istio-cni (upstream), ambient pod', isAmbient],
      ['+ istio-cni (upstream), plain pod', isPlain],
    ];
    const series: Series[] = [];
    for (const [label, r] of chains) {
      if (!r) continue;
      const enroll = r.enrollCount ? { agentEnrollments: r.enrollCount, agentEnrollMeanMs: Math.round((r.enrollSumS! / r.enrollCount) * 1e5) / 100 } : {};
      series.push({ label: `RunPodSandbox: ${label}`, samples: r.run, notes: { ...stats(r.run), ...enroll } });
      series.push({ label: `Stop+RemovePodSandbox: ${label}`, samples: r.stop.map((s, i) => s + r.remove[i]!), notes: { ...stats(r.stop.map((s, i) => s + r.remove[i]!)), stop: stats(r.stop), remove: stats(r.remove) } });
    }
    for (const [label, xs] of Object.entries(execs)) series.push({ label, samples: xs, notes: stats(xs) });
    const R = (a: string, b: string): [string, string] => [a, b];
    const ratios: Record<string, [string, string]> = {
      'RunPodSandbox podwire ambient / baseline': R('RunPodSandbox: + podwire-cni, ambient pod', 'RunPodSandbox: bridge + host-local (baseline)'),
      'RunPodSandbox podwire plain / baseline': R('RunPodSandbox: + podwire-cni, plain pod', 'RunPodSandbox: bridge + host-local (baseline)'),
      'Stop+Remove podwire ambient / baseline': R('Stop+RemovePodSandbox: + podwire-cni, ambient pod', 'Stop+RemovePodSandbox: bridge + host-local (baseline)'),
    };
    if (isAmbient) {
      ratios['RunPodSandbox istio-cni ambient / baseline'] = R('RunPodSandbox: + istio-cni (upstream), ambient pod', 'RunPodSandbox: bridge + host-local (baseline)');
      ratios['RunPodSandbox istio-cni ambient / podwire ambient'] = R('RunPodSandbox: + istio-cni (upstream), ambient pod', 'RunPodSandbox: + podwire-cni, ambient pod');
      ratios['RunPodSandbox istio-cni plain / podwire plain'] = R('RunPodSandbox: + istio-cni (upstream), plain pod', 'RunPodSandbox: + podwire-cni, plain pod');
      ratios['istio-cni VERSION / podwire-cni VERSION'] = R('istio-cni (upstream) VERSION', 'podwire-cni VERSION');
    }
    writeResults('cni', `CNI plugin cost through containerd + CRI (${N} sandboxes per chain, nftables, dual stack)`, series, ratios);

    const file = join(ROOT, 'bench/results/cni.json');
    const doc = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    const added = (r: PhaseResult | undefined, q: number) => r && ms2(quantile(sorted(r.run), q) - quantile(sorted(base.run), q));
    const addedRemove = (r: PhaseResult | undefined) => r && ms2(quantile(sorted(r.stop.map((s, i) => s + r.remove[i]!)), 0.5) - quantile(sorted(base.stop.map((s, i) => s + base.remove[i]!)), 0.5));
    doc.added = {
      note: 'p50 (and p90) of RunPodSandbox with the plugin minus the baseline chain\'s, ms; Stop+Remove the same at p50',
      podwireAmbient: { p50Ms: added(pwAmbient, 0.5), p90Ms: added(pwAmbient, 0.9), stopRemoveP50Ms: addedRemove(pwAmbient), goalP50Ms: 3, met: (added(pwAmbient, 0.5) ?? Infinity) <= 3 },
      podwirePlain: { p50Ms: added(pwPlain, 0.5), p90Ms: added(pwPlain, 0.9), stopRemoveP50Ms: addedRemove(pwPlain) },
      ...(isAmbient ? { istioAmbient: { p50Ms: added(isAmbient, 0.5), p90Ms: added(isAmbient, 0.9), stopRemoveP50Ms: addedRemove(isAmbient) } } : {}),
      ...(isPlain ? { istioPlain: { p50Ms: added(isPlain, 0.5), p90Ms: added(isPlain, 0.9), stopRemoveP50Ms: addedRemove(isPlain) } } : {}),
    };
    const down = (label: string) => execs[label] && ms2(quantile(sorted(execs[label]!), 0.5));
    const plainDown = down('podwire-cni ADD, plain pod, agent stopped (decision file)');
    doc.agentStopped = {
      note: 'podwire-cni exec, spawn to exit, p50 ms: ADDs decided without the agent (docs/cni-protocol.md)',
      plainPodByDecisionFileP50Ms: plainDown, excludedNamespaceP50Ms: down('podwire-cni ADD, excluded namespace, no agent'),
      goalP50Ms: 2, met: (plainDown ?? Infinity) <= 2,
    };
    const commit = (() => { try { return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim(); } catch { return undefined; } })();
    doc.setup = {
      commit, sandboxesPerChain: per * ROUNDS, rounds: ROUNDS, execs: EXECS, loadAverageAtEnd: loadavg().map((x) => Math.round(x * 100) / 100),
      runtime: 'containerd 1.6 (Debian) + runc over CRI, in a pwt- node netns; pause image; no containers',
      chain: 'bridge (isGateway) + host-local, 10.88.7.0/24 + fd00:88:7::/64; the plugin entry as the installer writes it',
      agent: 'lib/agent/agent.ts in the bench process, nftables backend, ZDS peer (protocol only) in the same process',
      execTimer: 'bench/lib/exec-timer.ts: C posix_spawn + waitpid loop, CLOCK_MONOTONIC, stdio from a file / to /dev/null',
      istio: istio.path ? { plugin: `istio.io/istio/cni/cmd/istio-cni@${ISTIO_VERSION} (built from the Go module proxy)`, builtNow: istio.built, buildSeconds: istio.seconds, apiserverVia: 'a TCP forwarder in the node netns (127.0.0.1:<apiserver port> → the apiserver), in the bench process' } : { skipped: istio.why },
    };
    writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);
    console.log(JSON.stringify({ added: doc.added, agentStopped: doc.agentStopped }, null, 2));
  } finally {
    await agent?.stop({ cleanup: true }).catch((e: Error) => console.error(`agent stop: ${e.message}`));
    agentClient?.close();
    await peer?.stop().catch(() => undefined);
    forwarder?.close();
    await ctrd?.stop().catch((e: Error) => console.error(e.message));
    if (admin) for (const ns of namespaces) {
      await admin.core.deleteCollectionNamespacedPod({ namespace: ns, gracePeriodSeconds: 0 }).catch(() => undefined);
      await admin.core.deleteNamespace({ name: ns }).catch(() => undefined);
    }
    admin?.close();
    await cp?.stop();
    node?.close();
    await removeNetns(`${prefix}node`).catch(() => undefined);
    timer?.dispose();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
