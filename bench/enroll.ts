// Issue #6 benchmark: per-pod enrollment (in-pod rules + routes + ZDS add/ack
// + probe-set upsert, dual stack) at 100, 500 and 1,000 pods, for podwire's
// nftables and iptables paths and for the Istio-style path — per family
// `iptables-save` then `iptables-restore --noflush`, exec'd inside the pod
// netns by a thread that entered it, as upstream does — all in one run.
//   npm run bench -- enroll [SCALES=100,500,1000]
import { Dataplane } from '../lib/dataplane/dataplane.js';
import { IpsetProbeSet } from '../lib/dataplane/probe-set-ipset.js';
import { NodeDataplane } from '../lib/dataplane/node.js';
import type { PodInfo } from '../lib/dataplane/types.js';
import { ZdsZtunnel } from '../lib/dataplane/ztunnel-zds.js';
import { buildNode, type DemoPod } from '../lib/demo/topology.js';
import type { Netns } from '../lib/net/netns/netns.js';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { IstioStyleRules } from './lib/istio-style.js';
import { writeResults, type Series } from './lib/report.js';

const SCALES = (process.argv[2] ?? process.env.SCALES ?? '100,500,1000').split(',').map(Number);

interface Agent {
  dataplane: Dataplane;
  zds: ZdsZtunnel;
  close(): Promise<void>;
}

interface PathDef {
  label: string;
  start: (host: Netns, sock: string) => Promise<Agent>;
}

const podwire = (backend: 'nftables' | 'iptables') => async (host: Netns, sock: string): Promise<Agent> => {
  const node = await NodeDataplane.start({ host, backend, zdsPath: sock });
  return { dataplane: node.dataplane, zds: node.zds!, close: () => node.close() };
};

// Istio's way for the same node: the ipset probe set, ZDS, and IstioStyleRules per pod.
const istio = async (host: Netns, sock: string): Promise<Agent> => {
  let dp: Dataplane | undefined;
  const zds = new ZdsZtunnel({ path: sock }, () => dp?.snapshot() ?? []).listen();
  dp = new Dataplane({ rules: new IstioStyleRules(), ztunnel: zds, probes: new IpsetProbeSet(await host.netlink(), true) });
  await dp.start();
  const dataplane = dp;
  return { dataplane, zds, close: async () => { await dataplane.close(); await zds.close(); } };
};

const paths: PathDef[] = [
  { label: 'podwire nftables', start: podwire('nftables') },
  { label: 'podwire iptables', start: podwire('iptables') },
  { label: 'Istio-style iptables', start: istio },
];

const pod = (p: DemoPod): PodInfo => ({ uid: p.uid, name: p.name, namespace: 'bench', ips: [p.ip4, p.ip6] });

/** Waits until the CPUs are idle again (namespace teardown runs on in kernel workers), at most 30 s. */
async function settle(): Promise<void> {
  const busy = () => {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3]! + f[4]!;
    return { idle, total: f.reduce((a, b) => a + b, 0) };
  };
  for (let i = 0; i < 150; i++) {
    const a = busy();
    await new Promise((r) => setTimeout(r, 200));
    const b = busy();
    if ((b.idle - a.idle) / Math.max(1, b.total - a.total) > 0.95) return;
  }
}

async function measure(path: PathDef, scale: number): Promise<{ samples: number[]; rssMb: number; heapMb: number }> {
  const prefix = `pwt-bench-${process.pid}-`;
  const node = await buildNode({ prefix, pods: scale, concurrency: 8 });
  const sock = `/tmp/pwt-bench-${process.pid}.sock`;
  let agent: Agent | undefined;
  // ztunnel is its own process on a real node: the peer runs in a child, protocol only.
  const cli = fileURLToPath(new URL('../../bin/podwire.js', import.meta.url));
  let peer: ReturnType<typeof spawn> | undefined;
  try {
    await settle();
    agent = await path.start(node.node, sock);
    peer = spawn(process.execPath, [cli, 'ztunnel-sim', '--socket', sock, '--no-listeners'], { stdio: 'ignore' });
    for (let t = 0; agent.zds.server.connections().every((c) => c.state !== 'ready'); t++) {
      if (t > 1000) throw new Error('ztunnel-sim did not connect');
      await new Promise((r) => setTimeout(r, 10));
    }
    global.gc?.();
    const samples: number[] = [];
    for (const p of node.pods) {
      const t0 = performance.now();
      await agent.dataplane.enroll(pod(p), { netnsPath: p.netnsPath });
      samples.push((performance.now() - t0) * 1000);
    }
    const mem = process.memoryUsage();
    return { samples, rssMb: Math.round(mem.rss / 1e5) / 10, heapMb: Math.round(mem.heapUsed / 1e5) / 10 };
  } finally {
    peer?.kill();
    await agent?.close();
    await node.teardown();
  }
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
