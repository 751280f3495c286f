// Agent restart at scale: N enrolled pods (dual stack, rules in place, probe
// set filled) are reconciled by a new agent: every netns re-opened, its
// rules verified (re-applied only on drift), the probe set refilled and
// pruned. Measured per path: the wall time of the whole reconcile, and the
// process's peak fds (and the transient part: above what the cache holds
// afterwards, one netns fd per pod) and peak threads while it runs (sampled
// every 2 ms).
// Paths: podwire nftables and iptables (bounded: RECONCILE_CONCURRENCY pods
// at once), podwire nftables with every pod at once (how reconcile ran
// before it was bounded), and the Istio-style check (`iptables-save` per
// family exec'd in each pod) in the same harness.
//   npm run bench -- reconcile [PODS=1000] [RUNS=3]
import { readdirSync, readFileSync } from 'node:fs';
import { Dataplane, RECONCILE_CONCURRENCY, type ReconcileReport } from '../lib/dataplane/dataplane.js';
import { IpsetProbeSet } from '../lib/dataplane/probe-set-ipset.js';
import { NodeDataplane } from '../lib/dataplane/node.js';
import type { PodInfo, ZtunnelSink } from '../lib/dataplane/types.js';
import { buildNode, type DemoNode, type DemoPod } from '../lib/demo/topology.js';
import type { Netns } from '../lib/net/netns/netns.js';
import { IstioStyleRules } from './lib/istio-style.js';
import { writeResults, type Series } from './lib/report.js';

const PODS = Number(process.argv[2] ?? process.env.PODS ?? 1000);
const RUNS = Number(process.argv[3] ?? process.env.RUNS ?? 3);

/** ztunnel is not part of a restart's rule work: a sink that acknowledges at once. */
const ztunnel: ZtunnelSink = { podAdded: async () => undefined, podDeleted: async () => undefined };

interface Path {
  label: string;
  backend: 'nftables' | 'iptables';
  /** A fresh agent over the node, as after a restart. */
  agent(host: Netns): Promise<{ dataplane: Dataplane; close(): Promise<void> }>;
}

const podwire = (backend: 'nftables' | 'iptables', concurrency?: number) => async (host: Netns) => {
  const node = await NodeDataplane.start({ host, backend, ztunnel, ...(concurrency ? { concurrency } : {}) });
  return { dataplane: node.dataplane, close: () => node.close() };
};

const istio = async (host: Netns) => {
  const dataplane = new Dataplane({ rules: new IstioStyleRules(), ztunnel, probes: new IpsetProbeSet(await host.netlink(), true) });
  await dataplane.start();
  return { dataplane, close: () => dataplane.close() };
};

const paths: Path[] = [
  { label: `podwire nftables (${RECONCILE_CONCURRENCY} at once)`, backend: 'nftables', agent: podwire('nftables') },
  { label: `podwire iptables (${RECONCILE_CONCURRENCY} at once)`, backend: 'iptables', agent: podwire('iptables') },
  { label: 'podwire nftables (all at once, unbounded)', backend: 'nftables', agent: podwire('nftables', 1024) },
  { label: 'Istio-style iptables-save check', backend: 'iptables', agent: istio },
];

const pod = (p: DemoPod): PodInfo => ({ uid: p.uid, name: p.name, namespace: 'bench', ips: [p.ip4, p.ip6] });

function threads(): number {
  return Number(/^Threads:\s+(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN);
}

/**
 * Samples fds and threads every 2 ms while fn runs. `transientFds`: the peak
 * above what is held once it is done (each enrolled pod's netns fd stays
 * open by design: the pod cache holds it).
 */
async function peaks<T>(fn: () => Promise<T>): Promise<{ value: T; peakFds: number; transientFds: number; peakThreads: number; baseThreads: number }> {
  const baseThreads = threads();
  let peakFds = readdirSync('/proc/self/fd').length;
  let peakThreads = baseThreads;
  const sample = () => {
    peakFds = Math.max(peakFds, readdirSync('/proc/self/fd').length);
    peakThreads = Math.max(peakThreads, threads());
  };
  const timer = setInterval(sample, 2);
  try {
    const value = await fn();
    sample();
    const held = readdirSync('/proc/self/fd').length;
    return { value, peakFds, transientFds: peakFds - held, peakThreads, baseThreads };
  } finally {
    clearInterval(timer);
  }
}

async function measure(path: Path, node: DemoNode): Promise<{ samples: number[]; notes: Record<string, unknown> }> {
  // Enroll every pod once with this path's backend (not timed), then restart the agent RUNS times.
  const first = await path.agent(node.node);
  for (const p of node.pods) await first.dataplane.enroll(pod(p), { netnsPath: p.netnsPath });
  await first.close();
  const samples: number[] = [];
  let peakFds = 0;
  let transientFds = 0;
  let peakThreads = 0;
  let baseThreads = 0;
  let report: ReconcileReport | undefined;
  const items = node.pods.map((p) => ({ pod: pod(p), netnsPath: p.netnsPath }));
  for (let run = 0; run < RUNS; run++) {
    const agent = await path.agent(node.node);
    global.gc?.();
    const t0 = performance.now();
    const r = await peaks(() => agent.dataplane.reconcile(items));
    samples.push((performance.now() - t0) * 1000);
    await agent.close();
    report = r.value;
    if (report.failed.length > 0 || !report.complete) throw new Error(`${path.label}: reconcile incomplete: ${JSON.stringify(report.failed.slice(0, 3))}`);
    peakFds = Math.max(peakFds, r.peakFds);
    transientFds = Math.max(transientFds, r.transientFds);
    peakThreads = Math.max(peakThreads, r.peakThreads);
    baseThreads = r.baseThreads;
  }
  return { samples, notes: { pods: node.pods.length, runs: RUNS, peakFds, transientFds, peakThreads, threadsBefore: baseThreads, repaired: report?.repaired.length ?? 0, probeEntries: report?.probeEntries } };
}

const series: Series[] = [];
for (const path of paths) {
  const node = await buildNode({ prefix: `pwt-bench-${process.pid}-`, pods: PODS, concurrency: 8 });
  try {
    const r = await measure(path, node);
    series.push({ label: path.label, samples: r.samples, notes: r.notes });
    console.log(`${path.label}: ${(r.samples.reduce((a, b) => a + b, 0) / r.samples.length / 1000).toFixed(0)} ms mean`, r.notes);
  } finally {
    await node.teardown();
  }
}
writeResults('reconcile', `Agent restart: reconcile of ${PODS} enrolled pods (whole reconcile)`, series, {
  'Istio-style / podwire nftables': ['Istio-style iptables-save check', paths[0]!.label],
  'Istio-style / podwire iptables': ['Istio-style iptables-save check', paths[1]!.label],
});
