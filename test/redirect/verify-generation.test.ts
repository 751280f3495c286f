// verify's nf_tables shortcut: the kernel's ruleset generation (NFT_MSG_GETGEN) moves with every
// nf_tables commit in a netns, nft's and iptables-nft's alike, and only there; while it equals the
// generation of the last clean verify of the same model in the same Netns, verify skips the dumps
// (counted on the netns's netfilter socket), and any commit since — drift or not — brings the full
// comparison back, so drift is still found.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { Netns } from '../../lib/net/netns/netns.js';
import { rulesetGeneration } from '../../lib/net/nft/generation.js';
import { apply, inpodRules, verify } from '../../lib/redirect/index.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const inNs = (name: string, ...argv: string[]) => execFileSync('ip', ['netns', 'exec', name, ...argv], { stdio: 'ignore' });

/** The nf_tables reads (dumps, requests) other than NFT_MSG_GETGEN made on the netns's netfilter socket while `fn` runs. */
async function reads<T>(ns: Netns, fn: () => Promise<T>): Promise<{ result: T; reads: number; generations: number }> {
  const nf = (await ns.netlink()).nfnetlink as { request: (m: Buffer, op: string, atomic?: boolean) => Promise<unknown>; dump: (m: Buffer, op: string) => Promise<unknown> };
  const { request, dump } = nf;
  let n = 0;
  let g = 0;
  nf.request = (m, op, atomic) => { if (op !== 'NFT_MSG_GETGEN') n++; else g++; return request.call(nf, m, op, atomic); };
  nf.dump = (m, op) => { n++; return dump.call(nf, m, op); };
  try {
    return { result: await fn(), reads: n, generations: g };
  } finally {
    nf.request = request;
    nf.dump = dump;
  }
}

describe.skipIf(!privileged('nft', 'iptables-nft'))('nf_tables ruleset generation', () => {
  it('moves with every nf_tables commit in its netns (nft and iptables-nft), and only there', async () => {
    const a = await freshNetns();
    const b = await freshNetns();
    const g0 = await rulesetGeneration(a);
    expect(await rulesetGeneration(a)).toBe(g0);
    inNs(a.name, 'nft', 'add', 'table', 'inet', 'pwt-x');
    const g1 = await rulesetGeneration(a);
    expect(g1).not.toBe(g0);
    const gb = await rulesetGeneration(b);
    inNs(b.name, 'nft', 'add', 'table', 'inet', 'pwt-y');
    expect(await rulesetGeneration(a)).toBe(g1);  // another netns's commit
    expect(await rulesetGeneration(b)).not.toBe(gb);
    inNs(a.name, 'iptables-nft', '-t', 'nat', '-A', 'OUTPUT', '-j', 'ACCEPT');
    expect(await rulesetGeneration(a)).not.toBe(g1);
  });

  it('nftables: verify skips the dumps while nothing was committed, and finds drift made after a clean verify', async () => {
    const ns = await freshNetns();
    const model = inpodRules({ ipv6: true });
    await apply(ns, model, { backend: 'nftables' });
    const first = await reads(ns, () => verify(ns, model, { backend: 'nftables' }));
    expect(first.result).toEqual({ ok: true, drift: [] });
    expect(first.reads).toBeGreaterThan(0);
    const again = await reads(ns, () => verify(ns, model, { backend: 'nftables' }));
    expect(again.result).toEqual({ ok: true, drift: [] });
    expect(again.reads).toBe(0);

    // A commit that is no drift (someone else's table): compared in full again, still clean.
    inNs(ns.name, 'nft', 'add', 'table', 'inet', 'pwt-foreign');
    const foreign = await reads(ns, () => verify(ns, model, { backend: 'nftables' }));
    expect(foreign.result.ok).toBe(true);
    expect(foreign.reads).toBeGreaterThan(0);

    // Drift after a clean verify is found, and stays found until repaired.
    inNs(ns.name, 'nft', 'flush', 'table', 'inet', 'istio-ambient-nat');
    const drifted = await verify(ns, model, { backend: 'nftables' });
    expect(drifted.ok).toBe(false);
    expect((await verify(ns, model, { backend: 'nftables' })).ok).toBe(false);
    await apply(ns, model, { backend: 'nftables' });
    expect((await verify(ns, model, { backend: 'nftables' })).ok).toBe(true);
    expect((await reads(ns, () => verify(ns, model, { backend: 'nftables' }))).reads).toBe(0);

    // Another model (another configuration) is never answered from this netns's last verify.
    const other = inpodRules({ ipv6: true, dnsCapture: false });
    const o = await reads(ns, () => verify(ns, other, { backend: 'nftables' }));
    expect(o.result.ok).toBe(false);
    expect(o.reads).toBeGreaterThan(0);
  });

  it('iptables-nft: verify (and apply\'s state check) skip the capture while nothing was committed; drift after is found', async () => {
    const ns = await freshNetns();
    const model = inpodRules({ ipv6: true });
    // A new pod's apply asks nothing of the generation (nothing on record for this Netns).
    expect((await reads(ns, () => apply(ns, model, { backend: 'iptables', iptablesMode: 'nft' }))).generations).toBe(0);
    expect((await verify(ns, model, { backend: 'iptables', iptablesMode: 'nft' })).ok).toBe(true);
    const again = await reads(ns, () => verify(ns, model, { backend: 'iptables', iptablesMode: 'nft' }));
    expect(again.result).toEqual({ ok: true, drift: [] });
    expect(again.reads).toBe(0);
    const reapply = await reads(ns, () => apply(ns, model, { backend: 'iptables', iptablesMode: 'nft' }));
    expect(reapply.result.changed).toBe(false);
    expect(reapply.reads).toBe(0);
    inNs(ns.name, 'iptables-nft', '-t', 'nat', '-F', 'ISTIO_OUTPUT');
    const drifted = await reads(ns, () => verify(ns, model, { backend: 'iptables', iptablesMode: 'nft' }));
    expect(drifted.result.ok).toBe(false);
    expect(drifted.reads).toBeGreaterThan(0);
    await apply(ns, model, { backend: 'iptables', iptablesMode: 'nft' });
    expect((await verify(ns, model, { backend: 'iptables', iptablesMode: 'nft' })).ok).toBe(true);
  });
});
