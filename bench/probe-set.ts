// Issue #16: filling the host probe set — 1,000 dual-stack pods, 2,000 IPs with their pod UIDs as
// comments — into a fresh (empty) set, as after a node reboot, per backend, in one run, inside a
// fresh pwt-bench-* netns made (and removed) here:
//   podwire refill: ProbeIndex.upsertMany, what the agent's restart reconcile does (one backend call);
//   podwire per pod: ProbeIndex.upsert per pod, what each enrollment does;
//   Istio's way: ipset — one netlink message + ACK per IP (upstream's netlink IpsetAdd per IP);
//   nftables — one `nft -f` transaction per pod (knftables), on fewer pods (it is slow).
// Every figure is µs per entry, from the total of one fill; each fill is checked against the kernel.
//   npm run bench -- probe-set [PODS=1000] [RUNS=9]
import { IpsetProbeSet, PROBE_SET_V4, PROBE_SET_V6 } from '../lib/dataplane/probe-set-ipset.js';
import { NFT_PROBE_TABLE, NftProbeSet } from '../lib/dataplane/probe-set-nft.js';
import { ProbeIndex } from '../lib/dataplane/probe-index.js';
import type { ProbeSet } from '../lib/dataplane/types.js';
import { Netns } from '../lib/net/netns/netns.js';
import { nft, Transaction } from '../lib/net/nft/tool.js';
import { nowUs, writeResults, type Series } from './lib/report.js';

const PODS = Number(process.argv[2] ?? 1000);
const RUNS = Number(process.argv[3] ?? 9);
const EXEC_PODS = Math.min(PODS, 200);

interface Pod { uid: string; ips: string[] }
const pods: Pod[] = Array.from({ length: PODS }, (_, i) => ({
  uid: `${(0x5eed0000 + i).toString(16)}-1c2d-4e5f-8a9b-${(i * 2654435761 % 0xffffffffffff).toString(16).padStart(12, '0')}`,
  ips: [`10.${64 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`, `fd00:64::${i.toString(16)}`],
}));
const entries = (n: number) => 2 * n;

/** Runs `fill` RUNS times on an emptied set; returns µs per entry of each run, checked against the kernel. */
async function perEntry(backend: ProbeSet, n: number, fill: (index: ProbeIndex) => Promise<void>, runs = RUNS): Promise<number[]> {
  const out: number[] = [];
  for (let r = 0; r < runs + 1; r++) {
    await backend.flush();
    const index = new ProbeIndex(backend);  // what a new agent has: an index loaded from an empty set
    await index.load();
    const t0 = nowUs();
    await fill(index);
    const us = (nowUs() - t0) / entries(n);
    const listed = await backend.list();
    if (listed.length !== entries(n)) throw new Error(`expected ${entries(n)} entries, found ${listed.length}`);
    if (r > 0) out.push(us);  // the first run warms up (JIT, hash growth)
  }
  return out;
}

async function main(): Promise<void> {
  const name = `pwt-bench-probe-${process.pid}`;
  const ns = await Netns.create(name);
  const series: Series[] = [];
  try {
    const nl = await ns.netlink();
    const backends: Array<[string, ProbeSet]> = [['nftables', new NftProbeSet(ns, true)], ['ipset', new IpsetProbeSet(nl, true)]];
    for (const [name, backend] of backends) {
      await backend.ensure();
      series.push({ label: `podwire ${name}: refill, upsertMany (per entry)`, samples: await perEntry(backend, PODS, (ix) => ix.upsertMany(pods, () => true)), notes: { entries: entries(PODS), runs: RUNS } });
      series.push({
        label: `podwire ${name}: per pod, upsert (per entry)`, notes: { entries: entries(PODS), runs: 3 },
        samples: await perEntry(backend, PODS, async (ix) => { for (const p of pods) await ix.upsert(p.ips, p.uid); }, 3),
      });
    }
    // Istio's ipset path: one message + ACK per IP, each awaited.
    const ipset = backends[1]![1];
    series.push({
      label: 'Istio-style ipset: one message per IP (per entry)', notes: { entries: entries(PODS), runs: 3 },
      samples: await perEntry(ipset, PODS, async () => {
        for (const p of pods) for (const ip of p.ips) await nl.ipset.add(ip.includes(':') ? PROBE_SET_V6 : PROBE_SET_V4, { address: ip, comment: p.uid }, { exist: true });
      }, 3),
    });
    // Istio's nftables path: knftables runs one `nft -f -` transaction per pod.
    const nftSet = backends[0]![1];
    series.push({
      label: 'Istio-style nftables: one nft -f per pod (per entry)', notes: { entries: entries(EXEC_PODS), pods: EXEC_PODS, runs: 2 },
      samples: await perEntry(nftSet, EXEC_PODS, async () => {
        for (const p of pods.slice(0, EXEC_PODS)) {
          const tx = new Transaction()
            .addElement(NFT_PROBE_TABLE, PROBE_SET_V4, { key: p.ips[0]!, comment: p.uid })
            .addElement(NFT_PROBE_TABLE, PROBE_SET_V6, { key: p.ips[1]!, comment: p.uid });
          await nft.apply(ns, tx);
        }
      }, 2),
    });
  } finally {
    ns.close();
    await Netns.remove(name);
  }
  writeResults('probe-set', `Host probe set: ${entries(PODS)} IPs with pod-UID comments into a fresh set (µs per entry)`, series, {
    'Istio-style ipset / podwire ipset refill': ['Istio-style ipset: one message per IP (per entry)', 'podwire ipset: refill, upsertMany (per entry)'],
    'Istio-style nftables / podwire nftables refill': ['Istio-style nftables: one nft -f per pod (per entry)', 'podwire nftables: refill, upsertMany (per entry)'],
    'podwire nftables: per pod / refill': ['podwire nftables: per pod, upsert (per entry)', 'podwire nftables: refill, upsertMany (per entry)'],
  });
}

await main();
