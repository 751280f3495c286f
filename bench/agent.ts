// The node agent end to end (lib/agent/agent.ts), against a control plane of
// its own (real kube-apiserver + etcd), on simulated nodes in `pwt-bench-`
// network namespaces, with a ztunnel-like peer (lib/testing/ztunnel-peer.ts, protocol
// only) in this process. The agent runs in a child process of its own (bench/lib/agent-child.ts), so
// its RSS is the agent's alone and each restart is a fresh process, as on a
// node. Nothing is created in the machine's own network namespace.
//
// Measured in one run (nftables backend, dual stack, N pods, default 1,000):
//   1. Restart to ready with N enrolled pods: an agent enrolls every pod
//      (namespace labels), stops without cleanup (the upgrade path: host rules
//      and sets stay), then a NEW agent process starts on the same node and
//      Agent.start() is timed until ready (RUNS restarts). Checked: every pod's
//      `nft -a list ruleset` (handles included) is byte-identical before and
//      after, and the startup snapshot reports repaired = 0.
//   2. The agent's RSS (after gc, and its peak VmHWM) at 0 and N enrolled pods.
//   3. Namespace label → all pods annotated `enabled` (a watch sees the last
//      one): first a namespace of 100 pods, then one with the other N-100.
//   4. The drift check (DriftCheck.runOnce) over N pods: no drift, and with a
//      few pods' rulesets flushed (found and repaired in the same round).
// Istio's way, in the same run, on a second node built the same way: the
// same controller and pipeline (same single-worker queue, annotation patches,
// ZDS adds, proc scan) with the in-pod rules programmed as upstream does
// (bench/lib/istio-style.ts: netlink routing, then `iptables-save` +
// `iptables-restore --noflush` per family exec'd in the pod) and the ipset
// probe set; its startup runs CreateInpodRules per pod the way upstream does
// with AMBIENT_RECONCILE_POD_RULES_ON_STARTUP when nothing drifted: routing
// via netlink and the `iptables-save` state check per family (no restore:
// upstream's executeCommands applies only on a delta), RECONCILE_CONCURRENCY
// pods at once as in bench/reconcile.ts (upstream loops one pod at a time).
//
// Upstream's own agent (install-cni, Go, built from the istio.io/istio module: bench/lib/istio-agent.ts),
// in the same run on a third node built the same way, when Go can build it: its RSS idle, after
// the first namespace and after all pods, new process → ready (its :8000/readyz) at start and
// after each restart (SIGKILL, so nothing is cleaned up), and label → enabled.
//
//   npm run bench:agent -- [--pods 1000] [--runs 3] [--label-pods 100] [--flush 5] [--node-flags='...'] [--upstream auto|off] [--istio-style on|off] [--out agent]
//   [--alt-node-flags='...'] (restarts with other flags, each just before one with --node-flags: a same-run comparison)
//   (--istio-style off: podwire alone, for profiling runs; --node-flags: extra Node/V8 flags for the agent processes, e.g. --max-semi-space-size=1;
//    --out: results file name in bench/results, default agent)
//   (or: npm run bench -- agent [--pods N] ...)
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { agentEnv } from '../test/helpers/agent-env.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { V1Pod } from '@kubernetes/client-node';
import { scanPodNetns } from '../lib/dataplane/proc-scan.js';
import { buildNode, type DemoNode, type DemoPod } from '../lib/demo/topology.js';
import { KubeClient } from '../lib/kube/client.js';
import { loadKubeconfig } from '../lib/kube/config.js';
import type { Informer } from '../lib/kube/informer.js';
import { patchPodStatus } from '../lib/kube/pods.js';
import { MERGE_PATCH } from '../lib/kube/rest.js';
import { podInformer } from '../lib/kube/resources.js';
import { REDIRECTION_ANNOTATION } from '../lib/mesh/constants.js';
import { Netns } from '../lib/net/netns/netns.js';
import { mapLimit } from '../lib/util/limit.js';
import { ensureIstioAgent, startUpstreamAgent, type UpstreamAgent } from './lib/istio-agent.js';
import { writeResults, type Series } from './lib/report.js';
import { cliBundle, startPodwireCli } from './lib/podwire-cli.js';
import type { ChildSpec, MemSample, ReadyMsg, SnapshotSummary } from './lib/agent-child.js';

/** Bytes → MiB, one decimal (upstream's agent is measured in the same unit: bench/lib/istio-agent.ts). */
const mb = (b: number) => Math.round(b / 104857.6) / 10;
const ms1 = (x: number) => Math.round(x * 10) / 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The parent's handle on an agent child. */
class AgentProc {
  private seq = 0;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: unknown): void }>();
  private readonly exited: Promise<number | null>;

  private constructor(readonly proc: ChildProcess, readonly ready: ReadyMsg, readonly spawnToReadyMs: number, exited: Promise<number | null>) {
    this.exited = exited;
    proc.on('message', (m: { type: string; id: number; ok: boolean; value: unknown; error: string }) => {
      if (m.type !== 'reply') return;
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.ok) p?.resolve(m.value);
      else p?.reject(new Error(`agent child: ${m.error}`));
    });
    void exited.then((code) => {
      for (const p of this.pending.values()) p.reject(new Error(`agent child exited (${code})`));
      this.pending.clear();
    });
  }

  static async start(spec: ChildSpec, children: Set<ChildProcess>, nodeFlags: string[]): Promise<AgentProc> {
    const t0 = performance.now();
    const proc = fork(fileURLToPath(new URL('./lib/agent-child.js', import.meta.url)), [JSON.stringify(spec)], { execArgv: ['--expose-gc', ...nodeFlags], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.add(proc);
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => { children.delete(proc); resolve(code); }));
    const ready = await new Promise<ReadyMsg>((resolve, reject) => {
      proc.on('message', function first(m: { type: string; error?: string }) {
        if (m.type === 'ready') { proc.off('message', first); resolve(m as ReadyMsg); }
        if (m.type === 'error') reject(new Error(`agent child failed to start: ${m.error}`));
      });
      void exited.then((code) => reject(new Error(`agent child exited (${code}) before ready`)));
    });
    return new AgentProc(proc, ready, performance.now() - t0, exited);
  }

  call<T>(cmd: string, arg?: unknown): Promise<T> {
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.proc.send({ id, cmd, arg });
    });
  }

  async stop(cleanup: boolean): Promise<void> {
    await this.call('stop', cleanup);
    const code = await this.exited;
    if (code !== 0) throw new Error(`agent child exited ${code}`);
  }
}

// ---- the simulated node (parent) ------------------------------------------------

interface BenchPod extends DemoPod {
  namespace: string;
  k8sUid: string;
}

/**
 * A node as test/helpers/agent-node.ts builds it, for N pods at once: the
 * demo topology's node and pod netns, each pod a Pod object bound to the
 * node and made Running with its IPs (pods/status), and a proc root mapping
 * each pod UID (cgroup path) to its netns, `1/ns/net` → the node netns.
 */
class BenchNode {
  readonly name: string;
  readonly dir: string;
  readonly procRoot: string;
  readonly zdsPath: string;
  pods: BenchPod[] = [];
  demo: DemoNode | undefined;

  constructor(readonly side: string, root: string, readonly admin: KubeClient) {
    this.name = `pwt-bench-${process.pid}-${side}`;
    this.dir = join(root, side);
    this.procRoot = join(this.dir, 'proc');
    this.zdsPath = join(this.dir, 'zds', 'ztunnel.sock');
  }

  /** Builds the netns and the Pod objects; `groups` is [namespace, pod count] in pod order. */
  async build(groups: Array<[string, number]>): Promise<void> {
    const total = groups.reduce((a, [, n]) => a + n, 0);
    const prefix = `${this.name}-`;
    this.demo = await buildNode({ prefix, pods: total, concurrency: 8 });
    mkdirSync(join(this.procRoot, '1', 'ns'), { recursive: true });
    symlinkSync(`/run/netns/${prefix}node`, join(this.procRoot, '1', 'ns', 'net'));
    writeFileSync(join(this.procRoot, '1', 'cgroup'), '0::/init.scope\n');
    writeFileSync(join(this.procRoot, '1', 'stat'), '1 (systemd) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n');
    for (const [ns] of groups) await this.admin.core.createNamespace({ body: { metadata: { name: ns } } });
    const nsOf = (i: number) => {
      let k = i;
      for (const [ns, n] of groups) { if (k < n) return ns; k -= n; }
      throw new Error('pod index out of range');
    };
    this.pods = await mapLimit(this.demo.pods, 16, async (p, i) => {
      const namespace = nsOf(i);
      await this.admin.core.createNamespacedPod({ namespace, body: {
        metadata: { name: p.name, labels: { app: p.name } },
        spec: { nodeName: this.name, containers: [{ name: 'app', image: 'registry.invalid/app:1' }], terminationGracePeriodSeconds: 0 },
      } });
      const o = await patchPodStatus(this.admin, { namespace, name: p.name }, { status: { phase: 'Running', podIP: p.ip4, podIPs: [{ ip: p.ip4 }, { ip: p.ip6 }] } });
      const uid = o.metadata!.uid!;
      const pid = 1000 + i;
      const dir = join(this.procRoot, String(pid));
      mkdirSync(join(dir, 'ns'), { recursive: true });
      symlinkSync(p.netnsPath, join(dir, 'ns', 'net'));
      writeFileSync(join(dir, 'cgroup'), `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${uid.replace(/-/g, '_')}.slice/cri-containerd-${'ab'.repeat(32)}.scope\n`);
      writeFileSync(join(dir, 'stat'), `${pid} (pause) S 1 ${pid} ${pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 ${1000 + pid} 0 0\n`);
      return { ...p, namespace, k8sUid: uid };
    });
  }

  /** The agent's environment for this node (as AgentTestNode.env(), every port and path its own). */
  async env(extra: Record<string, string> = {}): Promise<Record<string, string>> {
    return agentEnv({ name: this.name, procRoot: this.procRoot, runDir: join(this.dir, 'run'), zdsPath: this.zdsPath }, {
      AMBIENT_RECONCILE_POD_RULES_ON_STARTUP: 'true',
      // Rounds are run on demand (runOnce); the periodic one must not fire during the measurements.
      AMBIENT_DRIFT_CHECK_INTERVAL: '1h',
      ...extra,
    });
  }

  async teardown(): Promise<void> {
    const namespaces = [...new Set(this.pods.map((p) => p.namespace))];
    for (const ns of namespaces) await this.admin.core.deleteCollectionNamespacedPod({ namespace: ns, gracePeriodSeconds: 0 }).catch(() => undefined);
    await this.demo?.teardown();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** When each pod of a node was first seen annotated `enabled` (a watch of the node's pods). */
class EnabledWatch {
  readonly at = new Map<string, number>();
  private readonly informer: Informer<V1Pod>;

  constructor(admin: KubeClient, nodeName: string) {
    this.informer = podInformer(admin, { nodeName });
    const seen = (p: V1Pod) => {
      const uid = p.metadata?.uid;
      if (uid && p.metadata?.annotations?.[REDIRECTION_ANNOTATION] === 'enabled' && !this.at.has(uid)) this.at.set(uid, performance.now());
    };
    this.informer.on('add', seen);
    this.informer.on('update', seen);
  }

  async start(): Promise<void> {
    await this.informer.start().synced;
  }

  /** Waits until every uid was seen enabled; returns the time the last one was seen. */
  async all(uids: string[], timeoutMs: number): Promise<number> {
    for (const end = Date.now() + timeoutMs; ; await sleep(5)) {
      if (uids.every((u) => this.at.has(u))) return Math.max(...uids.map((u) => this.at.get(u)!));
      if (Date.now() > end) throw new Error(`${uids.filter((u) => !this.at.has(u)).length} of ${uids.length} pods not enabled within ${timeoutMs} ms`);
    }
  }

  stop(): Promise<void> {
    return this.informer.stop();
  }
}

async function labelNamespace(admin: KubeClient, name: string): Promise<void> {
  await admin.call({ verb: 'patch', resource: 'namespaces', name },
    (o) => admin.core.patchNamespace({ name, body: { metadata: { labels: { 'istio.io/dataplane-mode': 'ambient' } } } }, o),
    { contentType: MERGE_PATCH });
}

/** Each pod's `nft -a list ruleset` (rule handles included). */
function rulesets(pods: DemoPod[]): Promise<string[]> {
  return mapLimit(pods, 8, async (p) => {
    const ns = Netns.open(p.netnsPath);
    try {
      const r = await ns.spawn(['nft', '-a', 'list', 'ruleset'], { timeoutMs: 30_000 });
      if (r.code !== 0) throw new Error(`nft list ruleset in ${p.netnsName}: ${r.stderr}`);
      return r.stdout;
    } finally {
      ns.close();
    }
  });
}

async function flushRuleset(p: DemoPod): Promise<void> {
  const ns = Netns.open(p.netnsPath);
  try {
    const r = await ns.spawn(['nft', 'flush', 'ruleset'], { timeoutMs: 30_000 });
    if (r.code !== 0) throw new Error(`nft flush ruleset in ${p.netnsName}: ${r.stderr}`);
  } finally {
    ns.close();
  }
}

/** Waits until the CPUs are idle again (namespace teardown runs on in kernel workers), at most 30 s. */
async function settle(): Promise<void> {
  const busy = () => {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    return { idle: f[3]! + f[4]!, total: f.reduce((a, b) => a + b, 0) };
  };
  for (let i = 0; i < 150; i++) {
    const a = busy();
    await sleep(200);
    const b = busy();
    if ((b.idle - a.idle) / Math.max(1, b.total - a.total) > 0.95) return;
  }
}

/** The same median as report.ts (the lower one of an even count). */
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(xs.length / 2) - 1)]!;

interface SideResult {
  label: { first: { pods: number; ms: number }; rest?: { pods: number; ms: number } };
  restarts: Array<{ startMs: number; cpuMs: number; spawnToReadyMs: number; marks: Record<string, number>; snapshot: SnapshotSummary; zdsMs: number; mem?: MemSample }>;
  /** podwire with --alt-node-flags: restarts with the other flags, each one just before a restart of the main flags. */
  altRestarts?: SideResult['restarts'];
  memIdle?: MemSample;
  /** After the first namespace (labelPods pods). */
  memFirst?: MemSample;
  memEnrolled?: MemSample;
  /** The first agent's spawn → ready (no pod enrolled yet), ms. */
  firstSpawnToReadyMs?: number;
  /** podwire: `podwire agent` as the image runs it (the bundle) started RUNS times before any pod is enrolled: spawn → /readyz, and VmRSS 1 s later. */
  cli?: Array<{ spawnToReadyMs: number; mem: { rssMb: number; peakRssMb: number; threads: number } }>;
  /** The same with the CLI's modules (bin/podwire.js on dist/), alternating with the bundle's runs. */
  cliModules?: Array<{ spawnToReadyMs: number; mem: { rssMb: number; peakRssMb: number; threads: number } }>;
  rulesUnchanged?: { same: number; of: number };
  drift?: { clean: Array<{ checked: number; durationMs: number; drifted: number }>; flushed: Array<{ checked: number; durationMs: number; drifted: number; repaired: number; parts: string[] }>; after: { drifted: number } };
  buildS: number;
  /** Istio-style: mean ms per rules apply and verify, [first agent (enrollment), last agent (startup)]. */
  istioRules?: Record<string, unknown>[];
  /** One proc scan for one pod's UID over this node's proc root (what the informer path runs per pod), ms. */
  procScanMs?: number;
}

/** One side: build the node, enroll by labels, restart RUNS times; podwire also measures memory, rules and drift. */
async function side(mode: 'podwire' | 'istio', opts: { root: string; admin: KubeClient; kubeconfig: string; pods: number; labelPods: number; runs: number; flush: number; nodeFlags: string[]; altNodeFlags?: string[]; children: Set<ChildProcess> }): Promise<SideResult> {
  const { ZtunnelPeer } = await import('../lib/testing/ztunnel-peer.js');
  const tag = mode === 'podwire' ? 'a' : 'b';
  const node = new BenchNode(tag, opts.root, opts.admin);
  const first = `${node.name}-ns1`;
  const rest = `${node.name}-ns2`;
  const restCount = opts.pods - opts.labelPods;
  let watch: EnabledWatch | undefined;
  let peer: InstanceType<typeof ZtunnelPeer> | undefined;
  let agent: AgentProc | undefined;
  const log = (m: string) => console.log(`[${mode}] ${m}`);
  try {
    const b0 = performance.now();
    await node.build(restCount > 0 ? [[first, opts.labelPods], [rest, restCount]] : [[first, opts.labelPods]]);
    const buildS = (performance.now() - b0) / 1000;
    log(`node with ${opts.pods} pods built in ${buildS.toFixed(1)} s`);
    watch = new EnabledWatch(opts.admin, node.name);
    await watch.start();
    const out: SideResult = { label: { first: { pods: opts.labelPods, ms: 0 } }, restarts: [], buildS };
    if (mode === 'podwire') {
      // `podwire agent` as the image runs it, started like upstream's (no pods enrolled yet, no ztunnel).
      await settle();
      // Both entries in turn: the image's bundle (one module) and the CLI's modules as dist/ has them.
      const bundle = await cliBundle();
      out.cli = [];
      out.cliModules = [];
      for (let r = 0; r < opts.runs; r++) {
        for (const [entry, into] of [[bundle, out.cli], [undefined, out.cliModules]] as const) {
          const cli = await startPodwireCli(node.dir, await node.env(), opts.kubeconfig, opts.nodeFlags, entry ? { entry } : {});
          await sleep(1000);  // as upstream's idle sample: settled after ready
          into.push({ spawnToReadyMs: ms1(cli.spawnToReadyMs), mem: cli.mem() });
          await cli.kill();
        }
      }
      for (const [what, xs] of [['image bundle', out.cli], ['modules', out.cliModules]] as const) {
        log(`podwire agent (CLI, ${what}): new process → /readyz ${xs.map((c) => c.spawnToReadyMs).join(', ')} ms (no pods); RSS ${xs.map((c) => c.mem.rssMb).join(', ')} MiB`);
      }
    }
    peer = new ZtunnelPeer({ path: node.zdsPath, listeners: false, backoffInitialMs: 20, backoffMaxMs: 100, maxLogEntries: 0, maxCaptures: 0 }).start();
    const spec = async (): Promise<ChildSpec> => ({ mode, env: await node.env(), kubeconfig: opts.kubeconfig });
    if (mode === 'podwire') {
      const sample = node.pods.filter((_, i) => i % Math.max(1, Math.floor(opts.pods / 20)) === 0);
      const s0 = performance.now();
      for (const p of sample) if (!scanPodNetns([p.k8sUid], { procRoot: node.procRoot }).candidates.has(p.k8sUid)) throw new Error(`proc scan missed ${p.name}`);
      out.procScanMs = Math.round(((performance.now() - s0) / sample.length) * 100) / 100;
      log(`one proc scan over ${opts.pods + 1} pids: ${out.procScanMs} ms`);
    }

    await settle();
    agent = await AgentProc.start(await spec(), opts.children, opts.nodeFlags);
    out.firstSpawnToReadyMs = agent.spawnToReadyMs;
    log(`first agent ready in ${agent.ready.startMs.toFixed(0)} ms (no pods enrolled; spawn → ready ${agent.spawnToReadyMs.toFixed(0)} ms)`);
    // Enrollment needs a ztunnel: label only once the peer has connected and taken the (empty) snapshot.
    for (const end = Date.now() + 30_000; !peer.ready; await sleep(5)) {
      if (Date.now() > end) throw new Error('the ztunnel peer did not connect to the agent within 30 s');
    }
    if (mode === 'podwire') out.memIdle = await agent.call<MemSample>('mem');
    for (const [ns, count, key] of [[first, opts.labelPods, 'first'], [rest, restCount, 'rest']] as const) {
      if (count === 0) continue;
      const uids = node.pods.filter((p) => p.namespace === ns).map((p) => p.k8sUid);
      const t0 = performance.now();
      await labelNamespace(opts.admin, ns);
      const last = await watch.all(uids, 180_000);
      out.label[key] = { pods: count, ms: last - t0 };
      log(`label → ${count} pods enabled: ${(last - t0).toFixed(0)} ms (${((last - t0) / count).toFixed(2)} ms per pod)`);
      if (mode === 'podwire' && key === 'first') out.memFirst = await agent.call<MemSample>('mem');
    }
    for (const end = Date.now() + 60_000; peer.active.size < opts.pods; await sleep(10)) {
      if (Date.now() > end) throw new Error(`ztunnel peer holds ${peer.active.size} of ${opts.pods} pods`);
    }
    if (mode === 'podwire') out.memEnrolled = await agent.call<MemSample>('mem');
    const before = mode === 'podwire' ? await rulesets(node.pods) : undefined;
    if (mode === 'istio') out.istioRules = [await agent.call<Record<string, unknown>>('stats')];
    await agent.stop(false);
    agent = undefined;

    /** One restart with `flags`: a new agent over the enrolled pods, its snapshot checked whole, recorded in `into`. */
    const restart = async (flags: string[], into: SideResult['restarts'], what: string): Promise<AgentProc> => {
      await settle();
      const a = await AgentProc.start(await spec(), opts.children, flags);
      const zdsMs = await a.call<number>('zds');
      const snap = a.ready.snapshot!;
      if (snap.pods !== opts.pods || snap.failed > 0 || !snap.complete) throw new Error(`${mode}: startup snapshot incomplete: ${JSON.stringify(snap)}`);
      const mem = mode === 'podwire' ? await a.call<MemSample>('mem') : undefined;
      into.push({ startMs: a.ready.startMs, cpuMs: a.ready.cpuMs, spawnToReadyMs: a.spawnToReadyMs, marks: a.ready.marks, snapshot: snap, zdsMs, ...(mem ? { mem } : {}) });
      log(`${what}: ready in ${a.ready.startMs.toFixed(0)} ms, ${a.ready.cpuMs.toFixed(0)} ms CPU (spawn → ready ${a.spawnToReadyMs.toFixed(0)} ms; ${JSON.stringify(a.ready.marks)}), snapshot ${snap.pods} pods, ${snap.repaired} repaired, ztunnel has all ${zdsMs} ms after ready`);
      return a;
    };
    const alt = mode === 'podwire' ? opts.altNodeFlags : undefined;
    if (alt) out.altRestarts = [];
    for (let r = 0; r < opts.runs; r++) {
      // The other flags' restart just before the main one: both see the same machine, in turn.
      if (alt) await (await restart(alt, out.altRestarts!, `restart ${r + 1}, flags ${alt.join(' ')}`)).stop(false);
      agent = await restart(opts.nodeFlags, out.restarts, `restart ${r + 1}`);
      if (r < opts.runs - 1) {
        await agent.stop(false);
        agent = undefined;
      }
    }

    if (mode === 'podwire') {
      const after = await rulesets(node.pods);
      const same = after.filter((t, i) => t === before![i] && t.includes('# handle')).length;
      out.rulesUnchanged = { same, of: opts.pods };
      log(`in-pod rulesets byte-identical (handles included) after ${opts.runs} restarts: ${same} of ${opts.pods}`);

      const clean: Array<{ checked: number; durationMs: number; drifted: number }> = [];
      for (let i = 0; i < 5; i++) clean.push(await agent!.call('drift'));
      log(`drift check, no drift: ${clean.map((c) => c.durationMs.toFixed(0)).join(', ')} ms (${clean[0]!.checked} pods, ${clean.map((c) => c.drifted).join('/')} drifted)`);
      const flushed: Array<{ checked: number; durationMs: number; drifted: number; repaired: number; parts: string[] }> = [];
      const step = Math.max(1, Math.floor(opts.pods / (opts.flush * 3 + 1)));
      for (let rep = 0; rep < 3; rep++) {
        const victims = Array.from({ length: opts.flush }, (_, k) => node.pods[((rep * opts.flush + k) * step + 1) % opts.pods]!);
        for (const v of victims) await flushRuleset(v);
        flushed.push(await agent!.call('drift'));
      }
      log(`drift check, ${opts.flush} flushed: ${flushed.map((c) => `${c.durationMs.toFixed(0)} ms (${c.drifted} drifted, ${c.repaired} repaired: ${c.parts.join('+')})`).join(', ')}`);
      const again: { drifted: number } = await agent!.call('drift');
      out.drift = { clean, flushed, after: { drifted: again.drifted } };
      await agent!.stop(true);
    } else {
      out.istioRules!.push(await agent!.call<Record<string, unknown>>('stats'));
      await agent!.stop(false);
    }
    agent = undefined;
    return out;
  } finally {
    if (agent) agent.proc.kill('SIGKILL');
    await peer?.stop();
    await watch?.stop();
    await node.teardown();
  }
}

interface UpstreamMem { rssMb: number; peakRssMb: number; threads: number }
interface UpstreamResult {
  available: boolean;
  why?: string;
  firstSpawnToReadyMs?: number;
  memIdle?: UpstreamMem;
  memFirst?: UpstreamMem;
  memEnrolled?: UpstreamMem;
  label?: { first: { pods: number; ms: number }; rest?: { pods: number; ms: number } };
  restarts?: Array<{ spawnToReadyMs: number; zdsMs: number; mem: UpstreamMem }>;
}

/** Upstream's agent on a third node: memory idle/first namespace/all pods, label → enabled, restarts (SIGKILL). */
async function upstreamSide(opts: { root: string; admin: KubeClient; cluster: { server: string; caFile: string; agentTokenFile: string }; pods: number; labelPods: number; runs: number }): Promise<UpstreamResult> {
  const log = (m: string) => console.log(`[upstream] ${m}`);
  const bins = ensureIstioAgent({ log });
  if (!bins.agent || !bins.plugin) {
    log(`skipped: upstream's agent is not available (${bins.why})`);
    return { available: false, why: bins.why! };
  }
  const { ZtunnelPeer } = await import('../lib/testing/ztunnel-peer.js');
  const node = new BenchNode('c', opts.root, opts.admin);
  const first = `${node.name}-ns1`;
  const rest = `${node.name}-ns2`;
  const restCount = opts.pods - opts.labelPods;
  let watch: EnabledWatch | undefined;
  let peer: InstanceType<typeof ZtunnelPeer> | undefined;
  let agent: UpstreamAgent | undefined;
  try {
    await node.build(restCount > 0 ? [[first, opts.labelPods], [rest, restCount]] : [[first, opts.labelPods]]);
    log(`node with ${opts.pods} pods built`);
    watch = new EnabledWatch(opts.admin, node.name);
    await watch.start();
    peer = new ZtunnelPeer({ path: node.zdsPath, listeners: false, backoffInitialMs: 20, backoffMaxMs: 100, maxLogEntries: 0, maxCaptures: 0 }).start();
    const up = { name: node.name, procRoot: node.procRoot, zdsPath: node.zdsPath, dir: node.dir };
    const start = () => startUpstreamAgent(up, opts.cluster, { agent: bins.agent!, plugin: bins.plugin! }, { AMBIENT_RECONCILE_POD_RULES_ON_STARTUP: 'true' });
    const out: UpstreamResult = { available: true, restarts: [] };
    await settle();
    agent = await start();
    out.firstSpawnToReadyMs = ms1(agent.spawnToReadyMs);
    log(`first agent ready: spawn → ready ${agent.spawnToReadyMs.toFixed(0)} ms (no pods enrolled)`);
    for (const end = Date.now() + 30_000; !peer.ready; await sleep(5)) {
      if (Date.now() > end) throw new Error('the ztunnel peer did not connect to upstream\'s agent within 30 s');
    }
    await sleep(1000);
    out.memIdle = agent.mem();
    out.label = { first: { pods: opts.labelPods, ms: 0 } };
    for (const [ns, count, key] of [[first, opts.labelPods, 'first'], [rest, restCount, 'rest']] as const) {
      if (count === 0) continue;
      const uids = node.pods.filter((p) => p.namespace === ns).map((p) => p.k8sUid);
      const t0 = performance.now();
      await labelNamespace(opts.admin, ns);
      const last = await watch.all(uids, 600_000);
      out.label[key] = { pods: count, ms: last - t0 };
      log(`label → ${count} pods enabled: ${(last - t0).toFixed(0)} ms (${((last - t0) / count).toFixed(2)} ms per pod)`);
      if (key === 'first') out.memFirst = agent.mem();
    }
    for (const end = Date.now() + 60_000; peer.activeCount < opts.pods; await sleep(10)) {
      if (Date.now() > end) throw new Error(`ztunnel peer holds ${peer.activeCount} of ${opts.pods} pods`);
    }
    out.memEnrolled = agent.mem();
    log(`RSS idle ${out.memIdle.rssMb} MiB, after ${opts.labelPods} pods ${out.memFirst?.rssMb} MiB, after ${opts.pods} pods ${out.memEnrolled.rssMb} MiB`);
    await agent.kill();
    agent = undefined;
    for (let r = 0; r < opts.runs; r++) {
      await settle();
      const connects = peer.counters.connects;
      agent = await start();
      const readyAt = performance.now();
      let zdsMs = NaN;
      // The new agent's ZDS snapshot: the peer has connected again and holds every pod.
      for (const end = Date.now() + 120_000; Date.now() < end; await sleep(5)) {
        if (peer.counters.connects > connects && peer.ready && peer.activeCount >= opts.pods) { zdsMs = ms1(performance.now() - readyAt); break; }
      }
      await sleep(1000);
      const mem = agent.mem();
      out.restarts!.push({ spawnToReadyMs: ms1(agent.spawnToReadyMs), zdsMs, mem });
      log(`restart ${r + 1}: spawn → ready ${agent.spawnToReadyMs.toFixed(0)} ms, ztunnel has all ${zdsMs} ms after ready, RSS ${mem.rssMb} MiB`);
      await agent.kill();
      agent = undefined;
    }
    return out;
  } finally {
    await agent?.kill();
    await peer?.stop();
    await watch?.stop();
    await node.teardown();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { pods: { type: 'string', default: process.env.PODS ?? '1000' }, runs: { type: 'string', default: '3' }, 'label-pods': { type: 'string', default: '100' }, flush: { type: 'string', default: '5' }, 'node-flags': { type: 'string', default: '' }, upstream: { type: 'string', default: 'auto' }, 'istio-style': { type: 'string', default: 'on' }, 'alt-node-flags': { type: 'string' }, out: { type: 'string', default: 'agent' } },
    strict: true,
  });
  const int = (k: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${k} must be an integer ≥ ${min}, got ${v}`);
    return n;
  };
  const pods = int('pods', values.pods!, 1);
  const runs = int('runs', values.runs!, 1);
  const labelPods = Math.min(pods, int('label-pods', values['label-pods']!, 1));
  const flush = Math.min(pods, int('flush', values.flush!, 1));
  // Extra Node/V8 flags for the agent processes (e.g. --max-semi-space-size=1), recorded in the results.
  const nodeFlags = values['node-flags']!.split(/\s+/).filter(Boolean);
  // Other flags to compare in the same run: a restart with them before each restart with --node-flags.
  const altNodeFlags = values['alt-node-flags']?.split(/\s+/).filter(Boolean);
  if (!['auto', 'off'].includes(values.upstream!)) throw new Error(`--upstream must be auto or off, got ${values.upstream}`);
  if (!['on', 'off'].includes(values['istio-style']!)) throw new Error(`--istio-style must be on or off, got ${values['istio-style']}`);
  const outName = values.out!;
  if (!/^agent[a-z0-9-]*$/.test(outName)) throw new Error(`--out must be agent or agent-<suffix>, got ${outName}`);

  const { startControlPlane } = await import(new URL('../../scripts/kube/controlplane.mjs', import.meta.url).href) as typeof import('../scripts/kube/controlplane.mjs');
  const root = mkdtempSync(join(tmpdir(), 'pwt-bench-agent-'));
  const children = new Set<ChildProcess>();
  let cp: Awaited<ReturnType<typeof startControlPlane>> | undefined;
  let admin: KubeClient | undefined;
  try {
    cp = await startControlPlane({ dir: join(root, 'cp'), log: (m: string) => console.error(m) });
    admin = new KubeClient(loadKubeconfig(cp.adminKubeconfig), { requestTimeoutMs: 30_000 });
    const o = { root, admin, kubeconfig: cp.agentKubeconfig, pods, labelPods, runs, flush, nodeFlags, ...(altNodeFlags ? { altNodeFlags } : {}), children };
    const pw = await side('podwire', o);
    const is = values['istio-style'] === 'on' ? await side('istio', o) : undefined;
    const upstream: UpstreamResult = values.upstream === 'off' ? { available: false, why: '--upstream off' }
      : await upstreamSide({ root, admin, cluster: { server: cp.server, caFile: cp.caFile, agentTokenFile: cp.agentTokenFile }, pods, labelPods, runs });
    const parentRss = mb(process.memoryUsage().rss);

    const us = (xs: number[]) => xs.map((x) => x * 1000);
    const restNote = (r: SideResult) => ({
      pods, runs,
      spawnToReadyMs: r.restarts.map((x) => ms1(x.spawnToReadyMs)),
      startCpuMs: r.restarts.map((x) => x.cpuMs),
      marksMs: r.restarts.map((x) => x.marks),
      snapshotRepaired: r.restarts.map((x) => x.snapshot.repaired),
      snapshotFailed: r.restarts.map((x) => x.snapshot.failed),
      probeEntries: r.restarts[0]!.snapshot.probeEntries,
      ztunnelHasAllAfterReadyMs: r.restarts.map((x) => x.zdsMs),
    });
    const series: Series[] = [
      { label: `podwire: restart → ready (${pods} pods)`, samples: us(pw.restarts.map((x) => x.startMs)), notes: { ...restNote(pw), rulesUnchanged: pw.rulesUnchanged, rssAfterRestartMb: pw.restarts.map((x) => x.mem?.rssMb), peakRssMb: pw.restarts.map((x) => x.mem?.peakRssMb) } },
      ...(is ? [{ label: `Istio-style: restart → ready (${pods} pods)`, samples: us(is.restarts.map((x) => x.startMs)), notes: { ...restNote(is), rulesInLastAgent: is.istioRules?.[1] } }] : []),
      ...(pw.altRestarts ? [{ label: `podwire, flags ${altNodeFlags!.join(' ')}: restart → ready (${pods} pods)`, samples: us(pw.altRestarts.map((x) => x.startMs)), notes: { ...restNote({ ...pw, restarts: pw.altRestarts }), nodeFlags: altNodeFlags, rssAfterRestartMb: pw.altRestarts.map((x) => x.mem?.rssMb), peakRssMb: pw.altRestarts.map((x) => x.mem?.peakRssMb) } }] : []),
      { label: `podwire: startup snapshot (${pods} pods)`, samples: us(pw.restarts.map((x) => x.snapshot.durationMs)), notes: { pods, perPodMs: Math.round((median(pw.restarts.map((x) => x.snapshot.durationMs)) / pods) * 1000) / 1000 } },
      ...(is ? [{ label: `Istio-style: startup snapshot (${pods} pods)`, samples: us(is.restarts.map((x) => x.snapshot.durationMs)), notes: { pods, perPodMs: Math.round((median(is.restarts.map((x) => x.snapshot.durationMs)) / pods) * 1000) / 1000 } }] : []),
    ];
    const labelSeries = (who: string, r: SideResult | undefined, key: 'first' | 'rest', what: string) => {
      const l = r?.label[key];
      if (!l) return;
      const extra = who === 'podwire' ? { procScanPerPodMs: r!.procScanMs } : { rulesInFirstAgent: r!.istioRules?.[0] };
      series.push({ label: `${who}: label → ${l.pods} ${what} enabled`, samples: [l.ms * 1000], notes: { pods: l.pods, perPodMs: Math.round((l.ms / l.pods) * 100) / 100, ...extra } });
    };
    labelSeries('podwire', pw, 'first', 'pods');
    labelSeries('Istio-style', is, 'first', 'pods');
    labelSeries('podwire', pw, 'rest', 'more pods');
    labelSeries('Istio-style', is, 'rest', 'more pods');
    const d = pw.drift!;
    series.push(
      { label: `podwire: drift round, no drift (${pods} pods)`, samples: us(d.clean.map((x) => x.durationMs)), notes: { pods: d.clean[0]!.checked, drifted: d.clean.map((x) => x.drifted), perPodMs: Math.round((median(d.clean.map((x) => x.durationMs)) / pods) * 1000) / 1000 } },
      { label: `podwire: drift round, ${flush} flushed (${pods} pods)`, samples: us(d.flushed.map((x) => x.durationMs)), notes: { pods: d.flushed[0]!.checked, flushed: flush, drifted: d.flushed.map((x) => x.drifted), repaired: d.flushed.map((x) => x.repaired), parts: d.flushed[0]!.parts, driftedInNextRound: d.after.drifted } },
    );
    const ratios: Record<string, [string, string]> = is ? {
      'Istio-style / podwire restart → ready': [`Istio-style: restart → ready (${pods} pods)`, `podwire: restart → ready (${pods} pods)`],
      'Istio-style / podwire startup snapshot': [`Istio-style: startup snapshot (${pods} pods)`, `podwire: startup snapshot (${pods} pods)`],
      [`Istio-style / podwire label → ${labelPods} pods enabled`]: [`Istio-style: label → ${labelPods} pods enabled`, `podwire: label → ${labelPods} pods enabled`],
    } : {};
    if (is && pods > labelPods) ratios[`Istio-style / podwire label → ${pods - labelPods} more pods enabled`] = [`Istio-style: label → ${pods - labelPods} more pods enabled`, `podwire: label → ${pods - labelPods} more pods enabled`];
    // New process → ready (Node or Go runtime, imports, start), podwire and upstream's own agent.
    series.push(
      { label: 'podwire: new process → ready (no pods)', samples: [pw.firstSpawnToReadyMs! * 1000], notes: { pods: 0 } },
      { label: `podwire: new process → ready (${pods} pods)`, samples: us(pw.restarts.map((x) => x.spawnToReadyMs)), notes: { pods } },
      { label: 'podwire agent (CLI): new process → /readyz (no pods)', samples: us(pw.cli!.map((x) => x.spawnToReadyMs)), notes: { pods: 0, entry: 'the image\'s bundle', rssMb: pw.cli!.map((x) => x.mem.rssMb), nodeFlags } },
      { label: 'podwire agent (CLI, modules): new process → /readyz (no pods)', samples: us(pw.cliModules!.map((x) => x.spawnToReadyMs)), notes: { pods: 0, entry: 'bin/podwire.js on dist/', rssMb: pw.cliModules!.map((x) => x.mem.rssMb), nodeFlags } },
    );
    if (upstream.available) {
      const ur = upstream.restarts!;
      series.push(
        { label: 'upstream agent: new process → ready (no pods)', samples: [upstream.firstSpawnToReadyMs! * 1000], notes: { pods: 0 } },
        { label: `upstream agent: new process → ready (${pods} pods)`, samples: us(ur.map((x) => x.spawnToReadyMs)), notes: { pods, ztunnelHasAllAfterReadyMs: ur.map((x) => x.zdsMs), rssAfterRestartMb: ur.map((x) => x.mem.rssMb) } },
      );
      const ul = upstream.label!;
      series.push({ label: `upstream agent: label → ${ul.first.pods} pods enabled`, samples: [ul.first.ms * 1000], notes: { pods: ul.first.pods, perPodMs: Math.round((ul.first.ms / ul.first.pods) * 100) / 100 } });
      if (ul.rest) series.push({ label: `upstream agent: label → ${ul.rest.pods} more pods enabled`, samples: [ul.rest.ms * 1000], notes: { pods: ul.rest.pods, perPodMs: Math.round((ul.rest.ms / ul.rest.pods) * 100) / 100 } });
      ratios['upstream / podwire new process → ready (no pods)'] = ['upstream agent: new process → ready (no pods)', 'podwire: new process → ready (no pods)'];
      ratios['upstream / podwire agent (CLI) new process → /readyz (no pods)'] = ['upstream agent: new process → ready (no pods)', 'podwire agent (CLI): new process → /readyz (no pods)'];
      ratios['upstream / podwire agent (CLI, modules) new process → /readyz (no pods)'] = ['upstream agent: new process → ready (no pods)', 'podwire agent (CLI, modules): new process → /readyz (no pods)'];
      ratios[`upstream / podwire new process → ready (${pods} pods)`] = [`upstream agent: new process → ready (${pods} pods)`, `podwire: new process → ready (${pods} pods)`];
      ratios[`upstream / podwire label → ${labelPods} pods enabled`] = [`upstream agent: label → ${labelPods} pods enabled`, `podwire: label → ${labelPods} pods enabled`];
      if (ul.rest) ratios[`upstream / podwire label → ${ul.rest.pods} more pods enabled`] = [`upstream agent: label → ${ul.rest.pods} more pods enabled`, `podwire: label → ${ul.rest.pods} more pods enabled`];
    } else {
      console.log(`upstream's agent: not in this run (${upstream.why})`);
    }
    writeResults(outName, `Node agent, ${pods} pods (nftables, dual stack): restart, enrollment by label, drift check`, series, ratios);

    // The goals and the memory figures, next to the standard fields.
    const file = fileURLToPath(new URL(`../../bench/results/${outName}.json`, import.meta.url));
    const doc = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    const restartMed = median(pw.restarts.map((x) => x.startMs));
    const rss = pw.memEnrolled!;
    doc.checks = {
      restartToReady: { goalMs: 1000, medianMs: ms1(restartMed), met: restartMed <= 1000, pods },
      rss: { goalMb: 120, enrolledRssMb: rss.rssMb, peakRssMb: Math.max(rss.peakRssMb, ...pw.restarts.map((x) => x.mem?.peakRssMb ?? 0)), met: Math.max(rss.rssMb, ...pw.restarts.map((x) => x.mem?.rssMb ?? 0)) <= 120, pods },
      rulesUnchanged: pw.rulesUnchanged,
      snapshotRepaired: pw.restarts.map((x) => x.snapshot.repaired),
    };
    // Issue #25's goals (medians; upstream's agent in the same run when available).
    const afterRestart = median(pw.restarts.map((x) => x.mem!.rssMb));
    const spawnMed = median(pw.restarts.map((x) => x.spawnToReadyMs));
    const upSpawnMed = upstream.available ? median(upstream.restarts!.map((x) => x.spawnToReadyMs)) : undefined;
    const cliMed = median(pw.cli!.map((x) => x.spawnToReadyMs));
    doc.goals = {
      idleRss: { goalMb: 70, rssMb: pw.memIdle!.rssMb, met: pw.memIdle!.rssMb <= 70 },
      rssAtLabelPods: { pods: labelPods, rssMb: pw.memFirst?.rssMb, upstreamRssMb: upstream.memFirst?.rssMb, met: upstream.memFirst ? pw.memFirst!.rssMb <= upstream.memFirst.rssMb : undefined },
      rssEnrolled: { goalMb: 100, pods, rssMb: rss.rssMb, upstreamRssMb: upstream.memEnrolled?.rssMb, met: rss.rssMb <= 100 },
      rssAfterRestart: { goalMb: 100, pods, medianRssMb: afterRestart, upstreamRssMb: upstream.restarts?.map((x) => x.mem.rssMb), met: afterRestart <= 100 },
      newProcessToReady: { pods, medianMs: ms1(spawnMed), upstreamMedianMs: upSpawnMed, met: upSpawnMed === undefined ? undefined : spawnMed <= upSpawnMed },
      // Both processes as a node runs them (podwire's CLI, upstream's binary), spawn → /readyz, before any pod is enrolled.
      firstStart: {
        cliMedianMs: cliMed, cliModulesMedianMs: median(pw.cliModules!.map((x) => x.spawnToReadyMs)), upstreamMs: upstream.firstSpawnToReadyMs,
        cliRssMb: pw.cli!.map((x) => x.mem.rssMb), cliModulesRssMb: pw.cliModules!.map((x) => x.mem.rssMb), upstreamIdleRssMb: upstream.memIdle?.rssMb,
        met: upstream.firstSpawnToReadyMs === undefined ? undefined : cliMed <= upstream.firstSpawnToReadyMs,
      },
      restartToReady: { goalMs: 1000, pods, medianMs: ms1(restartMed), met: restartMed <= 1000 },
    };
    doc.memory = {
      unit: 'every *Mb field is MiB (2^20 bytes), podwire and upstream alike',
      note: 'the agent alone: a child process per agent (the ztunnel peer and the harness are in the bench process); RSS after two gc() calls, peak = VmHWM of that process',
      agentIdleMb: pw.memIdle, agentAfterLabelPodsMb: pw.memFirst, agentEnrolledMb: pw.memEnrolled, agentAfterRestartMb: pw.restarts.map((x) => x.mem),
      upstream: upstream.available
        ? { note: 'upstream\'s install-cni (Go): VmRSS/VmHWM of its process, no forced GC, sampled 1 s after the event', idleMb: upstream.memIdle, afterLabelPodsMb: upstream.memFirst, enrolledMb: upstream.memEnrolled, afterRestartMb: upstream.restarts!.map((x) => x.mem) }
        : { skipped: upstream.why },
      benchProcessRssMb: parentRss,
    };
    const commit = (() => { try { return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(); } catch { return undefined; } })();
    doc.setup = { commit, pods, labelPods, flush, runs, agentNodeFlags: ['--expose-gc', ...nodeFlags], ...(altNodeFlags ? { altNodeFlags: ['--expose-gc', ...altNodeFlags] } : {}), buildSeconds: { podwire: ms1(pw.buildS), istio: is ? ms1(is.buildS) : undefined }, istioStyle: values['istio-style'] };
    writeFileSync(file, `${JSON.stringify(doc, null, 2)}\n`);
    console.log(JSON.stringify({ checks: doc.checks, goals: doc.goals, memory: doc.memory }, null, 2));
  } finally {
    for (const c of children) c.kill('SIGKILL');
    admin?.close();
    await cp?.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
