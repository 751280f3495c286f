// `podwire demo`: a whole mesh node on one machine. Builds a simulated node
// in namespaces of its own, runs the real pipeline (rules → ZDS ack → probe
// set) for every pod against the ztunnel-like peer, proves redirection with
// real traffic, and tears everything down (unless asked to keep it).
import { rmSync } from 'node:fs';
import type { Server } from 'node:net';
import { join } from 'node:path';
import { NodeDataplane } from '../dataplane/node.js';
import type { PodInfo } from '../dataplane/types.js';
import type { Backend } from '../redirect/apply.js';
import { Netns } from '../net/netns/netns.js';
import { quantile } from '../util/stats.js';
import { mapLimit } from '../util/limit.js';
import { ZtunnelPeer } from '../testing/ztunnel-peer.js';
import { startApp } from './app.js';
import { runChecks, type CheckResult } from './checks.js';
import { collisions, createRunDir, defaultDemoPrefix, ipamDir, isSafePrefix } from './leftovers.js';
import { pinNeighbours } from './neighbours.js';
import { buildNode, createPod, describeExternal, removeNetns, type DemoNode, type DemoPod } from './topology.js';

export interface DemoOptions {
  pods: number;
  backend: Backend;
  /** Build the pods with the real bridge + host-local CNI plugins. */
  cni?: boolean;
  /** Leave everything up afterwards. */
  keep?: boolean;
  /** Namespace name prefix; default pwdemo-<pid>-. */
  prefix?: string;
  ipv6?: boolean;
  concurrency?: number;
  progress?: (stage: string, done: number, total: number) => void;
  /** Aborts between stages (Ctrl-C); teardown still runs. */
  signal?: AbortSignal;
}

export interface DemoReport {
  ok: boolean;
  backend: Backend;
  pods: number;
  enrolled: number;
  enrollMs: { p50: number; p99: number; total: number };
  checks: CheckResult[];
  /** Connections/datagrams the ztunnel-like peer took, per port, over all pods. */
  capturedByPort: Record<string, number>;
  probesBypassed: number;
  failures: string[];
  /** With keep: where things are and how to look around and tear down. */
  kept?: { node: string; pods: string[]; socket: string; commands: string[] };
}

const podInfo = (p: DemoPod): PodInfo => ({
  uid: p.uid, name: p.name, namespace: 'demo', serviceAccount: 'default', ips: [p.ip4, p.ip6],
});

function aborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw Object.assign(new Error('demo interrupted'), { code: 'ABORT_ERR' });
}

export async function runDemo(opts: DemoOptions): Promise<DemoReport> {
  if (!Number.isInteger(opts.pods) || opts.pods < 1 || opts.pods > 5000) throw new RangeError('pods must be 1..5000');
  if (opts.backend !== 'nftables' && opts.backend !== 'iptables') throw new TypeError('backend must be nftables or iptables');
  const prefix = opts.prefix ?? defaultDemoPrefix();
  if (!isSafePrefix(prefix)) throw new RangeError(`prefix must be 2-31 lowercase letters, digits and -, got ${JSON.stringify(prefix)}`);
  // Never build over (and then, on failure, tear down) what another run made.
  const taken = collisions(prefix);
  if (taken.length) {
    throw Object.assign(new Error(`an earlier run with prefix ${prefix} left ${taken.slice(0, 3).join(', ')}${taken.length > 3 ? ` and ${taken.length - 3} more` : ''} behind; `
      + `remove it with \`podwire cleanup --prefix ${prefix}\` (it skips runs that are still going)`), { code: 'ERR_DEMO_LEFTOVERS', leftovers: taken });
  }
  const ipv6 = opts.ipv6 ?? true;
  const concurrency = opts.concurrency ?? 8;
  const progress = opts.progress ?? (() => undefined);
  // The run dir (ZDS socket + the marker naming this process) exists before anything else and goes last:
  // `podwire cleanup` uses it to tell a live run from the leftovers of a killed one.
  const socketDir = createRunDir(prefix);
  const socketPath = join(socketDir, 'ztunnel.sock');

  // Everything started is recorded here and torn down in reverse order;
  // `namespace` entries are what --keep leaves in place.
  const cleanups: Array<{ namespace?: boolean; fn: () => Promise<void> | void }> = [
    { fn: () => rmSync(socketDir, { recursive: true, force: true }) },
  ];
  const onCleanup = (fn: () => Promise<void> | void, namespace = false) => cleanups.push({ fn, namespace });
  const report: DemoReport = {
    ok: false, backend: opts.backend, pods: opts.pods, enrolled: 0, enrollMs: { p50: 0, p99: 0, total: 0 },
    checks: [], capturedByPort: {}, probesBypassed: 0, failures: [],
  };
  try {
    progress('building node', 0, opts.pods);
    let built = 0;
    const node: DemoNode = await buildNode({
      prefix, pods: opts.pods, concurrency, cni: opts.cni === true, cniDataDir: ipamDir(prefix),
      onPod: () => progress('building node', ++built, opts.pods),
    });
    onCleanup(() => node.teardown(), true);
    aborted(opts.signal);
    const external = describeExternal(prefix);
    await createPod(node.node, external);
    onCleanup(() => removeNetns(external.netnsName), true);

    const podNs = node.pods.map((pod) => ({ pod, ns: Netns.open(pod.netnsPath) }));
    const extNs = Netns.open(external.netnsPath);
    onCleanup(() => {
      for (const p of podNs) p.ns.close();
      extNs.close();
    });
    await pinNeighbours(node.node, podNs, { pod: external, ns: extNs }, ipv6);
    const apps: Server[] = await mapLimit(podNs, 16, (p) => startApp(p.ns, p.pod.name));
    onCleanup(() => { for (const a of apps) a.close(); });
    aborted(opts.signal);

    // The node side: probe set + host rule, the ZDS server, then the ztunnel-like peer.
    const agent = await NodeDataplane.start({
      host: node.node, backend: opts.backend, ipv6, zdsPath: socketPath, kubeletUid: process.getuid?.() ?? 0,
    });
    onCleanup(() => agent.close());
    const dp = agent.dataplane;
    const peer = new ZtunnelPeer({ path: socketPath }).start();
    onCleanup(() => peer.stop());
    await peer.waitFor((p) => p.snapshotReceived, 10_000);
    aborted(opts.signal);

    // Enroll every pod through the pipeline.
    const latencies: number[] = [];
    const t0 = performance.now();
    let done = 0;
    // Two at a time (this kind of machine has two cores): latencies stay per-pod, not queueing.
    await mapLimit(node.pods, 2, async (pod) => {
      aborted(opts.signal);
      const s = performance.now();
      try {
        await dp.enroll(podInfo(pod), { netnsPath: pod.netnsPath });
        latencies.push(performance.now() - s);
        report.enrolled++;
      } catch (err) {
        report.failures.push(`enroll ${pod.name}: ${(err as Error).message}`);
      }
      progress('enrolling', ++done, node.pods.length);
    });
    report.enrollMs = {
      p50: round(quantile(latencies, 0.5)), p99: round(quantile(latencies, 0.99)), total: round(performance.now() - t0),
    };
    aborted(opts.signal);

    // Prove it with traffic.
    progress('sending traffic', 0, 1);
    report.checks = await runChecks({ node: node.node, external: { ns: extNs, pod: external }, pods: podNs, ipv6, concurrency: 16 });
    progress('sending traffic', 1, 1);
    for (const c of report.checks) {
      if (c.failed) report.failures.push(`${c.name}: ${c.failed} failed (${c.failures[0]})`);
      if (c.name.startsWith('probe')) report.probesBypassed += c.passed;
    }
    for (const p of node.pods) {
      for (const [port, count] of Object.entries(peer.podCounters(p.uid)?.byPort ?? {})) {
        report.capturedByPort[port] = (report.capturedByPort[port] ?? 0) + count;
      }
    }
    report.ok = report.failures.length === 0 && report.enrolled === opts.pods;
    if (opts.keep) {
      report.kept = {
        node: node.nodeName, pods: node.pods.map((p) => p.netnsName), socket: socketPath,
        commands: [
          `podwire inspect --netns ${node.nodeName}`,
          `ip netns exec ${node.pods[0]!.netnsName} nft list ruleset    # or iptables-save`,
          `podwire rules verify --kind inpod --backend ${opts.backend} --ipv6 --netns ${node.pods[0]!.netnsName}`,
          `podwire cleanup --prefix ${prefix}    # tear down`,
        ],
      };
    }
    return report;
  } catch (err) {
    report.failures.push((err as Error).message);
    throw Object.assign(err as Error, { report });
  } finally {
    // With keep (and success), the namespaces and their rules stay; the agent
    // side (ZDS server, ztunnel-like peer, apps) lives in this process and stops.
    const keepNamespaces = opts.keep === true && report.ok;
    for (const c of cleanups.reverse()) {
      if (keepNamespaces && c.namespace) continue;
      try {
        await c.fn();
      } catch {
        // keep tearing down the rest
      }
    }
  }
}

const round = (x: number) => Math.round(x * 1000) / 1000;
