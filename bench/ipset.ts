// Issue #3 benchmark: filling Istio's probe set (hash:ip with comment, pod-UID
// comments) through the library against the tools, in one run, inside a
// fresh pwt-bench-* netns made (and removed) here.
//   podwire batched (IPSET_ATTR_ADT lists) vs one message per element (what
//   Istio's netlink path does) vs `ipset restore` vs one `ipset add` process
//   per element; plus a sweep of elements per message (why the 60 KiB cap).
import { constants } from 'node:os';
import { encodeAdtList, IPSET_CMD, normalizeEntry } from '../lib/net/ipset/codec.js';
import type { IpsetEntry } from '../lib/net/ipset/ipset.js';
import { Netns } from '../lib/net/netns/netns.js';
import type { NlTransport } from '../lib/net/nl/transport.js';
import { nowUs, timeEach, writeResults, type Series } from './lib/report.js';

const N = Number(process.env.N_IPSET ?? 10000);
const N_EXEC = Number(process.env.N_EXEC ?? 500);
const RUNS = Number(process.env.RUNS ?? 15);
const SET = 'istio-inpod-probes-v4';
const name = `pwt-bench-ipset-${process.pid}`;

const ipOf = (i: number) => `10.${64 + ((i >> 16) & 63)}.${(i >> 8) & 255}.${i & 255}`;
const uidOf = (i: number) => `${(0x5eed0000 + i).toString(16)}-1c2d-4e5f-8a9b-${(i * 2654435761 % 0xffffffffffff).toString(16).padStart(12, '0')}`;

async function main(): Promise<void> {
  const ns = await Netns.create(name);
  const series: Series[] = [];
  try {
    const nl = await ns.netlink();
    const { ipset } = nl;
    await ipset.create(SET, { type: 'hash:ip', family: 4, comment: true, maxelem: 1 << 20 });
    const entries: IpsetEntry[] = Array.from({ length: N }, (_, i) => ({ address: ipOf(i), comment: uidOf(i) }));
    const check = async (what: string) => {
      const n = (await ipset.list(SET)).header.entries;
      if (n !== N) throw new Error(`${what}: expected ${N} entries, found ${n}`);
    };

    // podwire, batched: one add() call with all N elements (upsert, as Istio adds).
    await ipset.add(SET, entries, { exist: true });  // warm-up (JIT, hash growth)
    const batched: number[] = [];
    for (let r = 0; r < RUNS; r++) {
      await ipset.flush(SET);
      const t0 = nowUs();
      await ipset.add(SET, entries, { exist: true });
      batched.push((nowUs() - t0) / N);
    }
    await check('batched');
    series.push({ label: 'podwire ipset add, batched (per element)', samples: batched, notes: { n: N, runs: RUNS, perElementFromTotal: true } });

    // podwire, one message + ACK per element, each awaited.
    await ipset.flush(SET);
    const single = await timeEach(N, (i) => ipset.add(SET, entries[i]!, { exist: true }));
    await check('single');
    series.push({ label: 'podwire ipset add, one message per element', samples: single, notes: { n: N } });

    // Elements per message: the raw request cost (encode + kernel), no validation.
    const nf = (nl as unknown as { netfilter: NlTransport }).netfilter;
    const norm = entries.map(normalizeEntry);
    for (const per of [32, 128, 512, 900]) {
      const samples: number[] = [];
      for (let r = 0; r < Math.max(5, RUNS >> 1); r++) {
        await ipset.flush(SET);
        const t0 = nowUs();
        for (let s = 0; s < N; s += per) await nf.request(encodeAdtList(IPSET_CMD.ADD, SET, norm.slice(s, s + per), true), 'IPSET_CMD_ADD');
        samples.push((nowUs() - t0) / N);
      }
      series.push({ label: `raw ADT list, ${per} per message (per element)`, samples, notes: { n: N, perMessage: per, perElementFromTotal: true } });
    }

    // `ipset restore` of N add lines, spawned inside the netns.
    const restoreText = `${entries.map((e) => `add ${SET} ${e.address} comment "${e.comment}"`).join('\n')}\n`;
    const restore: number[] = [];
    for (let r = 0; r < 5; r++) {
      await ipset.flush(SET);
      const t0 = nowUs();
      const res = await ns.spawn(['ipset', 'restore', '-exist'], { stdin: restoreText });
      restore.push((nowUs() - t0) / N);
      if (res.code !== 0) throw new Error(`ipset restore failed: ${res.stderr}`);
    }
    await check('restore');
    series.push({ label: 'ipset restore (exec, per element)', samples: restore, notes: { n: N, runs: 5, perElementFromTotal: true } });

    // One `ipset add` process per element, born inside the netns.
    await ipset.flush(SET);
    const perProcess = await timeEach(N_EXEC, async (i) => {
      const res = await ns.spawn(['ipset', 'add', SET, entries[i]!.address, 'comment', entries[i]!.comment!, '-exist']);
      if (res.code !== 0) throw new Error(`ipset add failed: ${res.stderr}`);
    });
    series.push({ label: 'ipset add, one process per element', samples: perProcess, notes: { n: N_EXEC } });
  } finally {
    ns.close();
    try {
      await Netns.remove(name);
    } catch (err) {
      // A concurrent test run's sweep of pwt-* may have removed it already.
      if ((err as { errno?: number }).errno !== constants.errno.ENOENT) throw err;
    }
  }
  writeResults('ipset', `ipset: ${N} pod IPs with UID comments into hash:ip (per element)`, series, {
    'ipset add process / podwire batched': ['ipset add, one process per element', 'podwire ipset add, batched (per element)'],
    'ipset restore / podwire batched': ['ipset restore (exec, per element)', 'podwire ipset add, batched (per element)'],
    'podwire one message / podwire batched': ['podwire ipset add, one message per element', 'podwire ipset add, batched (per element)'],
  });
}

await main();
