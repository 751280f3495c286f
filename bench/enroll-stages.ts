// Issue #16 profile: where one enrollment's time goes, stage by stage, for podwire's nftables and
// iptables paths and the Istio-style path in the same run (dual stack, ztunnel-sim acking in its
// own process), and how throughput scales with pods in flight (1, 2, 4, 8) on this machine.
// Stages are timed at the Dataplane's seams: in-pod rules (netlink handle, routes, rules),
// ZDS add with the fd until the ack, probe-set upsert + retain; "netns open + cache" is the rest.
//   npm run bench -- enroll-stages [N=300] [SCALE=500]
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { PATHS, podInfo, withNode, type Agent, type PathDef } from './lib/enroll-node.js';
import { writeResults, type Series } from './lib/report.js';

const N = Number(process.argv[2] ?? 300);
const SCALE = Number(process.argv[3] ?? 500);
const FLIGHT = [1, 2, 4, 8];

type Timed = Record<string, (...a: never[]) => Promise<unknown>>;

/** Wraps `obj[name]` so each call's duration is pushed to `into`. */
function timeMethod(obj: Timed, name: string, into: number[]): void {
  const f = obj[name]!.bind(obj);
  obj[name] = (async (...a: never[]) => {
    const t0 = performance.now();
    try {
      return await f(...a);
    } finally {
      into.push((performance.now() - t0) * 1000);
    }
  }) as never;
}

async function stages(path: PathDef): Promise<Series[]> {
  return withNode(path, N, async (agent: Agent, pods) => {
    const t = { rules: [] as number[], zds: [] as number[], upsert: [] as number[], retain: [] as number[], total: [] as number[] };
    const dp = agent.dataplane as unknown as { opts: { rules: Timed; ztunnel: Timed }; probes: Timed };
    timeMethod(dp.opts.rules, 'apply', t.rules);
    timeMethod(dp.opts.ztunnel, 'podAdded', t.zds);
    timeMethod(dp.probes, 'upsert', t.upsert);
    timeMethod(dp.probes, 'retain', t.retain);
    for (const p of pods) {
      const t0 = performance.now();
      await agent.dataplane.enroll(podInfo(p), { netnsPath: p.netnsPath });
      t.total.push((performance.now() - t0) * 1000);
    }
    const rest = t.total.map((v, i) => v - t.rules[i]! - t.zds[i]! - t.upsert[i]! - t.retain[i]!);
    const probe = t.upsert.map((v, i) => v + t.retain[i]!);
    const l = path.label;
    return [
      { label: `${l}: whole enrollment`, samples: t.total },
      { label: `${l}:   in-pod rules (handle, routes, rules)`, samples: t.rules },
      { label: `${l}:   ZDS add + fd → ack (peer in another process)`, samples: t.zds },
      { label: `${l}:   probe set (upsert + retain)`, samples: probe },
      { label: `${l}:   netns open, validation, cache`, samples: rest },
    ];
  });
}

/**
 * CPU time (user + system, µs) a process has used so far, the children it waited for included; with
 * `task`, that one thread's own time only.
 */
function processCpuUs(pid: number, task?: number): number {
  const f = readFileSync(task === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${task}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ');
  // utime, stime, cutime, cstime (fields 14-17, in clock ticks of 10 ms here)
  return (task === undefined ? [11, 12, 13, 14] : [11, 12]).reduce((s, i) => s + Number(f[i]), 0) * 10_000;
}

const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;

/**
 * SCALE pods enrolled with `inFlight` at once: per-pod time from the wall clock (µs per pod), and
 * how many of the machine's cores the agent and the peer kept busy meanwhile (their CPU time ÷ wall).
 */
async function throughput(path: PathDef, inFlight: number): Promise<Series> {
  return withNode(path, SCALE, async (agent, pods, peerPid) => {
    const t = { rules: [] as number[], zds: [] as number[] };
    const dp = agent.dataplane as unknown as { opts: { rules: Timed; ztunnel: Timed } };
    timeMethod(dp.opts.rules, 'apply', t.rules);
    timeMethod(dp.opts.ztunnel, 'podAdded', t.zds);
    let next = 0;
    const cpu0 = processCpuUs(process.pid);
    const js0 = processCpuUs(process.pid, process.pid);
    const peer0 = processCpuUs(peerPid);
    const t0 = performance.now();
    await Promise.all(Array.from({ length: inFlight }, async () => {
      while (next < pods.length) {
        const p = pods[next++]!;
        await agent.dataplane.enroll(podInfo(p), { netnsPath: p.netnsPath });
      }
    }));
    const wallUs = (performance.now() - t0) * 1000;
    const cpu = processCpuUs(process.pid) - cpu0;  // the agent (this process) and the tools it waited for
    const peer = processCpuUs(peerPid) - peer0;
    const js = processCpuUs(process.pid, process.pid) - js0;  // the agent's JS thread alone
    const perPod = wallUs / pods.length;
    return {
      label: `${path.label}, ${inFlight} in flight (µs per pod, wall)`, samples: [perPod],
      notes: {
        pods: pods.length, inFlight, podsPerSec: Math.round(1e6 / perPod),
        agentCpuUsPerPod: Math.round(cpu / pods.length), peerCpuUsPerPod: Math.round(peer / pods.length),
        coresBusy: Math.round(((cpu + peer) / wallUs) * 100) / 100, jsThreadBusy: Math.round((js / wallUs) * 100) / 100, cores: availableParallelism(),
        // Per pod, queueing included: ZDS is one request in flight per ztunnel connection.
        rulesMedianUs: Math.round(median(t.rules)), zdsMedianUs: Math.round(median(t.zds)),
      },
    };
  });
}

// Warm-up (not recorded): JIT, the engines' reference rule sets.
for (const p of PATHS) await withNode(p, 30, async (a, pods) => { for (const x of pods) await a.dataplane.enroll(podInfo(x), { netnsPath: x.netnsPath }); });

const series: Series[] = [];
for (const p of PATHS) {
  series.push(...await stages(p));
  console.log(`${p.label}: stages done`);
}
const ratios: Record<string, [string, string]> = {
  'Istio-style / podwire nftables (whole)': ['Istio-style iptables: whole enrollment', 'podwire nftables: whole enrollment'],
  'Istio-style / podwire iptables (whole)': ['Istio-style iptables: whole enrollment', 'podwire iptables: whole enrollment'],
  'Istio-style / podwire nftables (in-pod rules)': ['Istio-style iptables:   in-pod rules (handle, routes, rules)', 'podwire nftables:   in-pod rules (handle, routes, rules)'],
};
for (const p of [PATHS[0]!, PATHS[2]!]) {
  for (const f of FLIGHT) {
    const s = await throughput(p, f);
    series.push(s);
    console.log(`${s.label}: ${s.samples[0]!.toFixed(0)} µs per pod, ${String(s.notes!.podsPerSec)} pods/s, ${String(s.notes!.coresBusy)} cores busy (JS thread ${String(s.notes!.jsThreadBusy)}), rules ${String(s.notes!.rulesMedianUs)} µs, ZDS ${String(s.notes!.zdsMedianUs)} µs`);
  }
  ratios[`${p.label}: 8 in flight vs 1 (speed-up)`] = [`${p.label}, 1 in flight (µs per pod, wall)`, `${p.label}, 8 in flight (µs per pod, wall)`];
}
writeResults('enroll-stages', `One enrollment by stage (dual stack, N=${N}) and throughput by pods in flight (${SCALE} pods)`, series, ratios);
