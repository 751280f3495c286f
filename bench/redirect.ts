// Applying the in-pod ruleset (dual stack: routes, policy rules, rules) to a
// fresh pod netns through the engine — podwire's iptables path (a new pod gets
// the iptables-nft objects as one replayed batch), its native nft path and its
// `nft -f -` path — against the Istio-style path: the same
// routing over netlink, then per family `iptables-save` (Istio's state check)
// and `iptables-restore --noflush`, each exec'd into the netns. Plus the
// engine's re-apply of an unchanged netns (reads only, nothing written), and
// verify of an unchanged netns as the drift check runs it every interval: the
// first one compares in full, later ones find the ruleset generation unchanged
// (beside them Istio's state read: iptables-save per family).
//   npm run bench -- redirect [N=200]
// Netns are named pwt-bench-<pid>-redirect-<i> (BENCH_NETNS_PREFIX overrides
// pwt-bench); the vitest sweep leaves names of a live pid alone.
import { iptables } from '../lib/net/xtables/iptables.js';
import { Netns } from '../lib/net/netns/netns.js';
import { apply, execNft, inpodRules, toIptablesRestore, verify, type Backend } from '../lib/redirect/index.js';
import { nowUs, writeResults, type Series } from './lib/report.js';

const N = Number(process.argv[2] ?? 200);
if (!Number.isInteger(N) || N < 1) throw new RangeError(`N must be a positive integer, not ${process.argv[2]}`);

const prefix = `${process.env.BENCH_NETNS_PREFIX ?? 'pwt-bench'}-${process.pid}-redirect`;
if (!/^[a-z][a-z0-9-]*$/.test(prefix)) throw new TypeError(`bad BENCH_NETNS_PREFIX ${prefix}`);

const model = inpodRules({ ipv6: true });
const TEXT = { 4: toIptablesRestore(model, 4), 6: toIptablesRestore(model, 6) } as const;

const L = {
  ipt: 'podwire apply, iptables (dual stack)',
  nft: 'podwire apply, nftables native (dual stack)',
  nftExec: 'podwire apply, nftables via nft -f (dual stack)',
  istio: 'Istio-style: netlink routes + save/restore per family (exec)',
  iptNoop: 'podwire re-apply unchanged, iptables (reads only)',
  nftNoop: 'podwire re-apply unchanged, nftables (reads only)',
  nftVerifyFirst: 'podwire verify unchanged, nftables (first check: full compare)',
  nftVerify: 'podwire verify unchanged, nftables (drift check, steady state)',
  iptVerify: 'podwire verify unchanged, iptables (drift check)',
  istioRead: 'Istio-style state read: iptables-save per family (exec)',
};
const samples: Record<string, number[]> = Object.fromEntries(Object.values(L).map((l) => [l, []]));

/** Istio's order (spec §6.2, §6.5): routes and rules first, the state check, then one restore per family. */
async function istioStyle(ns: Netns): Promise<void> {
  const nl = await ns.netlink();
  for (const family of [4, 6] as const) {
    await nl.routes.replace({ family, dst: 'default', type: 'local', dev: 'lo', table: 100, scope: 'host' });
    await nl.rules.add({ family, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 });
  }
  await iptables.saveText(ns, { family: 4 });
  await iptables.saveText(ns, { family: 6 });
  await iptables.restore(ns, TEXT[4], { family: 4 });
  await iptables.restore(ns, TEXT[6], { family: 6 });
}

/** verify as the drift check runs it; any drift is a bench error. */
async function timedVerify(ns: Netns, backend: Backend, label: string): Promise<void> {
  const t0 = nowUs();
  const r = await verify(ns, model, { backend });
  samples[label]!.push(nowUs() - t0);
  if (!r.ok) throw new Error(`verify of an unchanged netns found drift: ${r.drift.join('; ')}`);
}

let seq = 0;
async function inFreshNetns(fn: (ns: Netns) => Promise<unknown>, label?: string, noop?: string, after?: (ns: Netns) => Promise<void>): Promise<void> {
  const name = `${prefix}-${++seq}`;
  const ns = await Netns.create(name);
  try {
    await (await ns.netlink()).links.set('lo', { up: true });
    const t0 = nowUs();
    await fn(ns);
    if (label) samples[label]!.push(nowUs() - t0);
    if (noop) {
      const t1 = nowUs();
      const r = await fn(ns) as { changed?: boolean };
      samples[noop]!.push(nowUs() - t1);
      if (r?.changed !== false) throw new Error('re-apply of an unchanged netns wrote something');
    }
    await after?.(ns);
  } finally {
    ns.close();
    await Netns.remove(name);
  }
}

const paths: Array<() => Promise<void>> = [
  () => inFreshNetns((ns) => apply(ns, model, { backend: 'iptables' }), L.ipt, L.iptNoop, async (ns) => {
    await verify(ns, model, { backend: 'iptables' });
    await timedVerify(ns, 'iptables', L.iptVerify);
    const t0 = nowUs();
    await iptables.saveText(ns, { family: 4 });
    await iptables.saveText(ns, { family: 6 });
    samples[L.istioRead]!.push(nowUs() - t0);
  }),
  () => inFreshNetns((ns) => apply(ns, model, { backend: 'nftables' }), L.nft, L.nftNoop, async (ns) => {
    await timedVerify(ns, 'nftables', L.nftVerifyFirst);
    await timedVerify(ns, 'nftables', L.nftVerify);
  }),
  () => inFreshNetns((ns) => apply(ns, model, { backend: 'nftables', nft: execNft }), L.nftExec),
  () => inFreshNetns(istioStyle, L.istio),
];

// Warm-up: the engine builds its reference rule sets once per process.
for (const p of [0, 1]) await inFreshNetns((ns) => apply(ns, model, { backend: p === 0 ? 'iptables' : 'nftables' }));
for (let i = 0; i < N; i++) {
  // Rotate the order so drift and caches hit every path alike.
  for (let k = 0; k < paths.length; k++) await paths[(i + k) % paths.length]!();
}

const notes = { N, freshNetnsPerOp: true, ruleset: 'inpod, DNS capture, IPv4 + IPv6', iptables: 'system default (iptables-nft)' };
const series: Series[] = Object.values(L).map((label) => ({ label, samples: samples[label]!, notes }));
writeResults('redirect', `In-pod ruleset applied to a fresh pod netns, dual stack (N=${N})`, series, {
  'Istio-style / podwire iptables': [L.istio, L.ipt],
  'Istio-style / podwire nftables': [L.istio, L.nft],
  'Istio-style / podwire nftables via nft -f': [L.istio, L.nftExec],
  'podwire nft -f / podwire native': [L.nftExec, L.nft],
  'Istio-style / podwire re-apply unchanged (iptables)': [L.istio, L.iptNoop],
  'Istio-style / podwire re-apply unchanged (nftables)': [L.istio, L.nftNoop],
  'podwire apply / verify unchanged (nftables, drift check)': [L.nft, L.nftVerify],
  'podwire apply / verify unchanged (iptables, drift check)': [L.ipt, L.iptVerify],
  'Istio-style state read / podwire verify (nftables)': [L.istioRead, L.nftVerify],
  'Istio-style state read / podwire verify (iptables)': [L.istioRead, L.iptVerify],
});
