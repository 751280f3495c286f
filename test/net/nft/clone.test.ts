import { describe, expect, it } from 'vitest';
import { connectTcp } from '../../../lib/net/sock/connect.js';
import { iptables } from '../../../lib/net/xtables/iptables.js';
import { captureNft, NftCloneUnsupported, replayNft } from '../../../lib/net/nft/clone.js';
import { inpodRules } from '../../../lib/redirect/inpod.js';
import { toIptablesRestore } from '../../../lib/redirect/render-iptables.js';
import { nftTableCount } from '../../../lib/redirect/pristine.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

const save = async (ns: Awaited<ReturnType<typeof freshNetns>>, tool: string) =>
  (await ns.spawn([tool])).stdout.replace(/^#.*\n/gm, '');

describe.skipIf(!privileged('iptables-nft-restore', 'nft'))('nf_tables clone (capture + replay)', () => {
  it('replays iptables-nft rules of both families so that iptables-save reads back the same', async () => {
    const model = inpodRules({ ipv6: true, dnsCapture: true });
    const ref = await freshNetns();
    for (const f of [4, 6] as const) {
      await iptables.restore(ref, toIptablesRestore(model, f), { family: f, noflush: true, mode: 'nft' });
    }
    const clone = await captureNft(ref);
    expect(clone.items.filter((i) => i.kind === 'table').map((i) => `${i.family}:${i.table}`).sort())
      .toEqual(['10:mangle', '10:nat', '10:raw', '2:mangle', '2:nat', '2:raw']);
    const pod = await freshNetns();
    await replayNft(pod, clone);
    expect(await save(pod, 'iptables-nft-save')).toBe(await save(ref, 'iptables-nft-save'));
    expect(await save(pod, 'ip6tables-nft-save')).toBe(await save(ref, 'ip6tables-nft-save'));
    expect(await save(pod, 'iptables-nft-save')).toContain('-A ISTIO_OUTPUT -p tcp -m mark --mark 0x111/0xfff -j ACCEPT');
  });

  it('captures the same state identically, whatever its counters saw (an exact cheap comparison)', async () => {
    const model = inpodRules({ ipv6: false, dnsCapture: true });
    const ns = await freshNetns();
    await iptables.restore(ns, toIptablesRestore(model, 4), { family: 4, noflush: true, mode: 'nft' });
    const before = await captureNft(ns);
    const counters = async () => (await ns.spawn(['iptables-nft-save', '-c'])).stdout.replace(/^#.*\n/gm, '');
    const c0 = await counters();
    // Traffic through the rules: connections to a closed local port.
    for (let i = 0; i < 3; i++) await connectTcp(ns, '127.0.0.1', 9, { timeoutMs: 1000 }).catch(() => undefined);
    expect(await counters()).not.toBe(c0);  // the kernel's counters moved...
    expect((await captureNft(ns)).batch.equals(before.batch)).toBe(true);  // ...the capture did not
    await iptables.run(ns, ['-t', 'nat', '-A', 'ISTIO_OUTPUT', '-p', 'udp', '-j', 'ACCEPT'], { family: 4, mode: 'nft' });
    expect((await captureNft(ns)).batch.equals(before.batch)).toBe(false);  // a foreign rule is a difference
  });

  it('is one transaction: a conflicting object rejects the whole batch and names it', async () => {
    const ref = await freshNetns();
    await iptables.restore(ref, '*nat\n:ISTIO_OUTPUT - [0:0]\n-A OUTPUT -j ISTIO_OUTPUT\n-A ISTIO_OUTPUT -p tcp -j REDIRECT --to-ports 15001\nCOMMIT\n', { family: 4, mode: 'nft' });
    const clone = await captureNft(ref);
    const pod = await freshNetns();
    // Someone made `ip nat ISTIO_OUTPUT` a filter base chain on the input hook.
    expect((await pod.spawn(['nft', 'add table ip nat; add chain ip nat ISTIO_OUTPUT { type filter hook input priority 0; }'])).code).toBe(0);
    const err = await replayNft(pod, clone).catch((e: unknown) => e);
    // The chain "create" is a no-op on the existing one; the REDIRECT rule cannot live in a filter/input chain.
    expect(err).toMatchObject({ op: 'NFT_BATCH', code: 'EINVAL', item: { kind: 'rule', table: 'nat', name: 'ISTIO_OUTPUT' } });
    // Nothing of the batch landed (the OUTPUT base chain would have been created first).
    expect((await pod.spawn(['nft', 'list', 'table', 'ip', 'nat'])).stdout).not.toContain('chain OUTPUT');
    expect(await nftTableCount(pod)).toBe(1);
  });

  it('refuses rulesets with sets rather than copying them half', async () => {
    const ref = await freshNetns();
    expect((await ref.spawn(['nft', 'add table inet t; add set inet t s { type ipv4_addr; }'])).code).toBe(0);
    await expect(captureNft(ref)).rejects.toBeInstanceOf(NftCloneUnsupported);
    await expect(captureNft(ref, (_f, name) => name !== 't')).resolves.toMatchObject({ items: [] });
  });
});
