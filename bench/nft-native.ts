// Issue #7 benchmark: per-pod in-pod redirection setup, dual stack, in a
// fresh netns each time (created and removed outside the timer):
//   podwire native : open the netns handle (rtnetlink + netfilter sockets), routes and policy
//                    rules (local default dev lo table 100, fwmark 0x111/0xfff lookup 100 pref
//                    32764, v4 and v6), then one precompiled nf_tables batch
//   podwire nft -f : same handle and netlink work, then `nft -f -` spawned in the netns
//   Istio-style    : same netlink work, then per family `iptables-save` and
//                    `iptables-restore --noflush` of Istio's golden, spawned in the netns
// plus a breakdown of the native path (handle open, netlink, batch send), a
// variant with the four route/rule messages in one rtnetlink request, and the
// previous handle open (one job per socket) for comparison.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { native } from '../lib/net/binding.js';
import { Netns } from '../lib/net/netns/netns.js';
import { compile, send, sendOn } from '../lib/net/nft/batch.js';
import { NetHandle } from '../lib/net/netns/handle.js';
import { NLM_F_CREATE, NLM_F_EXCL } from '../lib/net/nl/codec.js';
import { RTM } from '../lib/net/rtnl/constants.js';
import { SocketTransport } from '../lib/net/nl/transport.js';
import { nowUs, writeResults, type Series } from './lib/report.js';

const N = Number(process.env.N ?? 300);
const ROOT = new URL('../../', import.meta.url);  // dist-bench/bench → repo root
const NFT = readFileSync(new URL('test/fixtures/istio/nftables/default_ipv6.golden', ROOT), 'utf8');
const V4 = readFileSync(new URL('test/fixtures/istio-iptables-default.restore', ROOT), 'utf8');
const V6 = readFileSync(new URL('test/fixtures/istio-iptables-default-v6.restore', ROOT), 'utf8');
const prefix = `pwt-nftb-${process.pid}`;
let seq = 0;

async function netlinkWork(nl: NetHandle): Promise<void> {
  const lo = 1;  // lo is ifindex 1 in every netns
  await Promise.all([
    nl.routes.add({ dst: 'default', family: 4, type: 'local', dev: lo, table: 100, scope: 'host' }),
    nl.routes.add({ dst: 'default', family: 6, type: 'local', dev: lo, table: 100, scope: 'host' }),
    nl.rules.add({ family: 4, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 }),
    nl.rules.add({ family: 6, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 }),
  ]);
}

async function spawnOk(ns: Netns, argv: string[], stdin?: string): Promise<void> {
  const r = await ns.spawn(argv, stdin === undefined ? {} : { stdin });
  if (r.code !== 0) throw new Error(`${argv.join(' ')}: exit ${r.code}: ${r.stderr}`);
}

/** Runs `fn` in N fresh netns (each created and removed outside the timer); returns µs per run. */
async function perPod(n: number, fn: (ns: Netns, lap: (label: string) => void) => Promise<void>, laps?: Map<string, number[]>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const name = `${prefix}-${seq++}`;
    const ns = await Netns.create(name);
    try {
      // A pod's lo is already up when the CNI agent gets it (outside the timer, without opening the handle).
      execFileSync('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
      let last = nowUs();
      const t0 = last;
      await fn(ns, (label) => {
        const now = nowUs();
        if (laps) {
          if (!laps.has(label)) laps.set(label, []);
          laps.get(label)!.push(now - last);
        }
        last = now;
      });
      out.push(nowUs() - t0);
    } finally {
      ns.close();
      await Netns.remove(name);
    }
  }
  return out;
}

async function main(): Promise<void> {
  const compiled = compile(NFT);
  if (compiled.path !== 'netlink') throw new Error(`golden did not compile: ${compiled.fallback?.reason}`);
  const series: Series[] = [];
  const laps = new Map<string, number[]>();

  // Warm up every path (module loads, first spawn, JIT).
  await perPod(20, async (ns) => { await netlinkWork(await ns.netlink()); await send(ns, compiled); });
  await perPod(5, async (ns) => { await spawnOk(ns, ['nft', '-f', '-'], NFT); });
  await perPod(5, async (ns) => { await spawnOk(ns, ['iptables-save']); await spawnOk(ns, ['iptables-restore', '--noflush'], V4); });

  const nativeRuns = await perPod(N, async (ns, lap) => {
    const nl = await ns.netlink();
    lap('handle open (1 job, 2 sockets)');
    await netlinkWork(nl);
    lap('routes + rules');
    await send(ns, compiled);
    lap('nft batch send');
  }, laps);
  series.push({ label: 'podwire native (handle + netlink + batch)', samples: nativeRuns, notes: { n: N, batchBytes: compiled.size } });
  for (const [label, samples] of laps) series.push({ label: `  native: ${label}`, samples, notes: { n: N } });

  // The same, with the four route/rule messages in one rtnetlink request (one sendmsg).
  const batchedLaps = new Map<string, number[]>();
  const batched = await perPod(N, async (ns, lap) => {
    const [route, nf] = await native().nlOpen(ns.fd, [0, 12]);
    const rt = new SocketTransport(route!);
    const nl = new NetHandle(ns.key, rt, new SocketTransport(nf!));
    lap('handle open');
    try {
      const add = NLM_F_CREATE | NLM_F_EXCL;
      const msgs = await Promise.all([
        nl.routes.encode(RTM.NEWROUTE, add, { dst: 'default', family: 4, type: 'local', dev: 1, table: 100, scope: 'host' }),
        nl.routes.encode(RTM.NEWROUTE, add, { dst: 'default', family: 6, type: 'local', dev: 1, table: 100, scope: 'host' }),
      ]);
      msgs.push(nl.rules.encode(RTM.NEWRULE, add, { family: 4, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 }),
        nl.rules.encode(RTM.NEWRULE, add, { family: 6, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 }));
      await rt.request(Buffer.concat(msgs), 'RTM_BATCH');
      lap('routes + rules, one request');
      await sendOn(nl.nfnetlink, compiled);
      lap('nft batch send');
    } finally {
      nl.close();
    }
  }, batchedLaps);
  series.push({ label: 'podwire native, one rtnetlink request', samples: batched, notes: { n: N } });
  for (const [label, samples] of batchedLaps) series.push({ label: `  batched: ${label}`, samples, notes: { n: N } });

  // Handle open as it was before: one job (thread) per socket, in parallel.
  const twoJobs = await perPod(N, async (ns) => {
    const socks = (await Promise.all([native().nlOpen(ns.fd, [0]), native().nlOpen(ns.fd, [12])])).flat();
    for (const s of socks) s.close();
  });
  series.push({ label: '  handle open, 2 parallel jobs (previous)', samples: twoJobs, notes: { n: N } });

  const nftExec = await perPod(N, async (ns) => {
    await netlinkWork(await ns.netlink());
    await spawnOk(ns, ['nft', '-f', '-'], NFT);
  });
  series.push({ label: 'podwire nft -f (handle + netlink + spawn nft)', samples: nftExec, notes: { n: N } });

  const istio = await perPod(N, async (ns) => {
    await netlinkWork(await ns.netlink());
    await spawnOk(ns, ['iptables-save']);
    await spawnOk(ns, ['iptables-restore', '--noflush'], V4);
    await spawnOk(ns, ['ip6tables-save']);
    await spawnOk(ns, ['ip6tables-restore', '--noflush'], V6);
  });
  series.push({ label: 'Istio-style dual stack (netlink + save/restore x2)', samples: istio, notes: { n: N } });

  writeResults('nft-native', 'Per pod, dual stack: in-pod rules + routes + policy rules (fresh netns each)', series, {
    'Istio-style / podwire native': ['Istio-style dual stack (netlink + save/restore x2)', 'podwire native (handle + netlink + batch)'],
    'nft -f / podwire native': ['podwire nft -f (handle + netlink + spawn nft)', 'podwire native (handle + netlink + batch)'],
    'Istio-style / podwire native (one rtnetlink request)': ['Istio-style dual stack (netlink + save/restore x2)', 'podwire native, one rtnetlink request'],
    'nft -f / podwire native (one rtnetlink request)': ['podwire nft -f (handle + netlink + spawn nft)', 'podwire native, one rtnetlink request'],
  });
}

await main();
