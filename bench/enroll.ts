// Issue #6 benchmark: per-pod enrollment (in-pod rules + routes + ZDS add/ack
// + probe-set upsert, dual stack) at 100, 500 and 1,000 pods, for podwire's
// nftables and iptables paths and for the Istio-style path — per family
// `iptables-save` then `iptables-restore --noflush`, exec'd inside the pod
// netns by a thread that entered it, as upstream does — all in one run.
//   npm run bench -- enroll [SCALES=100,500,1000]
import { PATHS as paths, podInfo as pod, withNode, type PathDef } from './lib/enroll-node.js';
import { writeResults, type Series } from './lib/report.js';

const SCALES = (process.argv[2] ?? process.env.SCALES ?? '100,500,1000').split(',').map(Number);

async function measure(path: PathDef, scale: number): Promise<{ samples: number[]; rssMb: number; heapMb: number }> {
  return withNode(path, scale, async (agent, pods) => {
    const samples: number[] = [];
    for (const p of pods) {
      const t0 = performance.now();
      await agent.dataplane.enroll(pod(p), { netnsPath: p.netnsPath });
      samples.push((performance.now() - t0) * 1000);
    }
    const mem = process.memoryUsage();
    return { samples, rssMb: Math.round(mem.rss / 1e5) / 10, heapMb: Math.round(mem.heapUsed / 1e5) / 10 };
  });
}

// Warm-up (not recorded): JIT, the engine's reference rule sets, the first sockets of each path.
for (const path of paths) await measure(path, 30);

const series: Series[] = [];
const ratios: Record<string, [string, string]> = {};
for (const scale of SCALES) {
  for (const path of paths) {
    const r = await measure(path, scale);
    const label = `${path.label} @${scale}`;
    series.push({ label, samples: r.samples, notes: { pods: scale, rssMb: r.rssMb, heapMb: r.heapMb } });
    console.log(`${label}: done (rss ${r.rssMb} MB, heap ${r.heapMb} MB)`);
  }
  ratios[`Istio-style / podwire iptables @${scale}`] = [`Istio-style iptables @${scale}`, `podwire iptables @${scale}`];
  ratios[`Istio-style / podwire nftables @${scale}`] = [`Istio-style iptables @${scale}`, `podwire nftables @${scale}`];
}
writeResults('enroll', 'Per-pod enrollment, dual stack: rules + routes + ZDS ack + probe set', series, ratios);
