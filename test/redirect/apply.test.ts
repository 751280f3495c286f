// The engine against real netns: apply programs routing + rules, a second
// apply executes nothing (counted through the seams), verify names drift
// injected by hand, apply repairs it, remove deletes only what is ours.
import { describe, expect, it } from 'vitest';
import { iptables } from '../../lib/net/xtables/iptables.js';
import type { Netns } from '../../lib/net/netns/netns.js';
import { nft } from '../../lib/net/nft/tool.js';
import {
  apply, execIptables, execNft, hostProbeRules, inpodRules, remove, sidecarRules, verify,
  type Backend, type IptablesRunner, type NftSender, type RuleModel,
} from '../../lib/redirect/index.js';
import { freshNetns, ipJson } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

/** Seams that count writes (restores, nft transactions). */
function counting() {
  const writes: string[] = [];
  const ipt: IptablesRunner = {
    restore: async (ns, text, o) => { writes.push(`restore v${o.family}`); await execIptables.restore(ns, text, o); },
    saveText: (ns, o) => execIptables.saveText(ns, o),
  };
  const nfts: NftSender = {
    applyScript: async (ns, s) => { writes.push('nft'); await execNft.applyScript(ns, s); },
    list: (ns) => execNft.list(ns),
    listText: (ns) => execNft.listText(ns),
  };
  return { writes, opts: (backend: Backend) => ({ backend, iptables: ipt, nft: nfts }) };
}

const BACKENDS: Backend[] = ['nftables', 'iptables'];

describe.skipIf(!privileged('nft', 'iptables-restore', 'ip6tables-restore'))('redirect engine', () => {
  for (const backend of BACKENDS) {
    describe(backend, () => {
      it('applies routing and rules once; a second apply executes nothing', async () => {
        const ns = await freshNetns();
        const model = inpodRules({ ipv6: true });
        const c = counting();
        const first = await apply(ns, model, c.opts(backend));
        expect(first.changed).toBe(true);
        expect(c.writes).toEqual(backend === 'nftables' ? ['nft'] : ['restore v4', 'restore v6']);
        expect(ipJson(ns.name, 'route', 'show', 'table', '100')).toEqual([expect.objectContaining({ type: 'local', dst: 'default', dev: 'lo', scope: 'host' })]);
        expect(ipJson(ns.name, '-6', 'route', 'show', 'table', '100')).toEqual([expect.objectContaining({ type: 'local', dst: 'default', dev: 'lo' })]);
        const rules = ipJson<Array<{ priority: number; fwmark?: string; fwmask?: string; table: string }>>(ns.name, 'rule', 'show');
        expect(rules).toContainEqual(expect.objectContaining({ priority: 32764, fwmark: '0x111', fwmask: '0xfff', table: '100' }));
        expect(await verify(ns, model, { backend })).toEqual({ ok: true, drift: [] });
        const before = backend === 'iptables' ? await iptables.saveText(ns) : await nft.listText(ns);

        c.writes.length = 0;
        const second = await apply(ns, model, c.opts(backend));
        expect(second).toEqual({ changed: false, actions: [] });
        expect(c.writes).toEqual([]);
        const after = backend === 'iptables' ? await iptables.saveText(ns) : await nft.listText(ns);
        const strip = (s: string) => s.replace(/^#.*$/gm, '');
        expect(strip(after)).toBe(strip(before));
        // verify without a backend finds the one in use.
        expect((await verify(ns, model)).ok).toBe(true);
      });

      it('reports a deleted rule, a foreign rule and a missing route; apply repairs all', async () => {
        const ns = await freshNetns();
        const model = inpodRules({});
        await apply(ns, model, { backend });
        if (backend === 'iptables') {
          await iptables.run(ns, ['-t', 'nat', '-D', 'ISTIO_OUTPUT', '-p', 'tcp', '-m', 'mark', '--mark', '0x111/0xfff', '-j', 'ACCEPT']);
          await iptables.run(ns, ['-t', 'nat', '-A', 'ISTIO_PRERT', '-p', 'udp', '-j', 'ACCEPT']);
        } else {
          const chain = (await nft.list(ns)).tables.find((t) => t.name === 'istio-ambient-nat')!.chains.find((x) => x.name === 'istio-output')!;
          const victim = chain.rules.find((r) => JSON.stringify(r.expr).includes('"accept"') && JSON.stringify(r.expr).includes('273'))!;
          await nft.apply(ns, `delete rule inet istio-ambient-nat istio-output handle ${victim.handle}\nadd rule inet istio-ambient-nat istio-prerouting meta l4proto udp accept\n`);
        }
        await (await ns.netlink()).routes.del({ family: 4, dst: 'default', table: 100, type: 'local', dev: 'lo' });
        const report = await verify(ns, model, { backend });
        expect(report.ok).toBe(false);
        expect(report.drift).toContainEqual('missing route: ipv4 local default dev lo table 100');
        if (backend === 'iptables') {
          expect(report.drift).toContainEqual('missing rule: ipv4 nat ISTIO_OUTPUT -p tcp -m mark --mark 0x111/0xfff -j ACCEPT');
          expect(report.drift).toContainEqual('foreign rule: ipv4 nat ISTIO_PRERT -p udp -j ACCEPT');
        } else {
          expect(report.drift).toContainEqual('missing rule: inet istio-ambient-nat istio-output meta l4proto tcp meta mark & 0x00000fff == 0x00000111 counter accept');
          expect(report.drift).toContainEqual(expect.stringMatching(/^foreign rule: inet istio-ambient-nat istio-prerouting meta l4proto udp accept$/));
        }
        expect(report.drift).toHaveLength(3);

        const fixed = await apply(ns, model, { backend });
        expect(fixed.changed).toBe(true);
        expect(await verify(ns, model, { backend })).toEqual({ ok: true, drift: [] });
        if (backend === 'iptables') {
          // The reconcile ran under guardrails and removed them again.
          expect(fixed.actions).toEqual(['route replace ipv4 local default dev lo table 100', 'guardrails up ipv4', 'iptables-restore ipv4 (reconcile)', 'guardrails down ipv4']);
          expect(await iptables.saveText(ns, { table: 'filter' })).not.toContain('podwire-guardrail');
        }
      });

      it('reconciles an older configuration (DNS capture on → off) and removes leftovers', async () => {
        const ns = await freshNetns();
        await apply(ns, inpodRules({ dnsCapture: true }), { backend });
        const off = inpodRules({ dnsCapture: false });
        const report = await verify(ns, off, { backend });
        expect(report.ok).toBe(false);
        expect(report.drift.join('\n')).toMatch(backend === 'iptables' ? /foreign chain: ipv4 raw ISTIO_PRERT/ : /foreign table: inet istio-ambient-raw/);
        await apply(ns, off, { backend });
        expect(await verify(ns, off, { backend })).toEqual({ ok: true, drift: [] });
      });

      it('remove deletes only ours, tolerates partial state and says what it removed', async () => {
        const ns = await freshNetns();
        const model = inpodRules({ ipv6: true });
        // Someone else's rules and routes stay.
        if (backend === 'iptables') await iptables.run(ns, ['-t', 'nat', '-A', 'OUTPUT', '-p', 'udp', '--dport', '9', '-j', 'ACCEPT']);
        else await nft.apply(ns, 'add table inet other\nadd chain inet other c\n');
        const nl = await ns.netlink();
        await nl.routes.add({ family: 4, dst: '10.9.0.0/16', dev: 'lo', table: 7 });
        await apply(ns, model, { backend });
        const { removed } = await remove(ns, model, { backend });
        expect(removed).toContain('route ipv4 local default dev lo table 100');
        expect(removed).toContain('policy rule ipv6 fwmark 0x111/0xfff lookup 100 pref 32764');
        expect(removed.join('\n')).toMatch(backend === 'iptables' ? /chain ipv4 nat ISTIO_OUTPUT/ : /table inet istio-ambient-nat/);
        const v = await verify(ns, model, { backend });
        expect(v.drift).toContainEqual('missing route: ipv4 local default dev lo table 100');
        expect(await nl.routes.list({ table: 7 })).toHaveLength(1);
        if (backend === 'iptables') {
          const nat = await iptables.saveText(ns, { table: 'nat' });
          expect(nat).toContain('-A OUTPUT -p udp -m udp --dport 9 -j ACCEPT');
          expect(nat).not.toContain('ISTIO');
        } else {
          expect((await nft.list(ns)).tables.map((t) => t.name)).toEqual(['other']);
        }
        // Nothing left of ours: a second remove removes nothing.
        expect(await remove(ns, model, { backend })).toEqual({ removed: [] });
      });
    });
  }

  it('host probe rules (both backends) keep the probe set', async () => {
    const ns = await freshNetns();
    const nl = await ns.netlink();
    await nl.ipset.create('istio-inpod-probes-v4', { type: 'hash:ip', family: 4, comment: true });
    const ipt = hostProbeRules({});
    await apply(ns, ipt, { backend: 'iptables' });
    expect(await verify(ns, ipt, { backend: 'iptables' })).toEqual({ ok: true, drift: [] });
    expect(await iptables.saveText(ns, { table: 'nat' })).toMatch(/-A POSTROUTING -j ISTIO_POSTRT/);
    expect((await remove(ns, ipt, { backend: 'iptables' })).removed.length).toBeGreaterThan(0);

    const nfm = hostProbeRules({ kubeletUid: 0 });
    await apply(ns, nfm, { backend: 'nftables' });
    await nft.apply(ns, 'add element inet istio-ambient-nat istio-inpod-probes-v4 { 10.1.2.3 }\n');
    expect(await verify(ns, nfm, { backend: 'nftables' })).toEqual({ ok: true, drift: [] });
    // A foreign chain in our table is drift; apply removes it without touching the set.
    await nft.apply(ns, 'add chain inet istio-ambient-nat old-postrouting { type nat hook postrouting priority 50 ; }\n');
    expect((await verify(ns, nfm, { backend: 'nftables' })).drift).toEqual(['foreign chain: inet istio-ambient-nat old-postrouting (0 rules)']);
    await apply(ns, nfm, { backend: 'nftables' });
    expect((await verify(ns, nfm, { backend: 'nftables' })).ok).toBe(true);
    await remove(ns, nfm, { backend: 'nftables' });
    const t = (await nft.list(ns)).tables.find((x) => x.name === 'istio-ambient-nat')!;
    expect(t.chains).toEqual([]);
    expect(t.sets.find((s) => s.name === 'istio-inpod-probes-v4')!.elements.map((e) => e.key)).toEqual(['10.1.2.3']);
  });

  it('sidecar TPROXY: table 133, fwmark rule without mask, ::6 on lo', async () => {
    const ns = await freshNetns();
    const model = sidecarRules({ mode: 'TPROXY', ipv6: true });
    for (const backend of BACKENDS) {
      await apply(ns, model, { backend });
      expect(await verify(ns, model, { backend })).toEqual({ ok: true, drift: [] });
      expect(ipJson(ns.name, 'route', 'show', 'table', '133')).toHaveLength(1);
      expect(ipJson<Array<{ addr_info: Array<{ local: string }> }>>(ns.name, 'addr', 'show', 'dev', 'lo')[0]!.addr_info.map((a) => a.local)).toContain('::6');
      const { removed } = await remove(ns, model, { backend });
      expect(removed).toContain('address ipv6 ::6/128 dev lo');
      expect(ipJson(ns.name, 'route', 'show', 'table', '133')).toEqual([]);
    }
  });

  // The runtime may bring a new pod's lo up while the chain runs (containerd's CNI library sets up
  // loopback concurrently): a local route through a down lo failed the ADD with ENETDOWN.
  it('brings a down lo up for its local routes, as the runtime would', async () => {
    const ns = await freshNetns({ loUp: false });
    const r = await apply(ns, inpodRules({ ipv6: true }), { backend: 'nftables' });
    expect(r.actions[0]).toBe('link set lo up');
    expect(ipJson<Array<{ flags: string[] }>>(ns.name, 'link', 'show', 'lo')[0]!.flags).toContain('UP');
    expect(ipJson(ns.name, 'route', 'show', 'table', '100')).toEqual([expect.objectContaining({ type: 'local', dst: 'default', dev: 'lo' })]);
    expect(await verify(ns, inpodRules({ ipv6: true }), { backend: 'nftables' })).toEqual({ ok: true, drift: [] });
  });

  it('skips IPv6 routing when the pod has IPv6 disabled', async () => {
    const ns = await freshNetns();
    await ns.sysctl.set('net.ipv6.conf.all.disable_ipv6', 1);
    const model = inpodRules({ ipv6: true });
    const r = await apply(ns, model, { backend: 'nftables' });
    expect(r.actions.filter((a) => a.includes('ipv6'))).toEqual([]);
    expect((await verify(ns, model)).ok).toBe(true);
  });

  it('rejects bad arguments before touching the netns', async () => {
    const ns = await freshNetns();
    expect(() => apply(ns, inpodRules(), { backend: 'ebpf' as never })).toThrow(TypeError);
    expect(() => apply(ns, {} as RuleModel, { backend: 'nftables' })).toThrow(TypeError);
    expect(() => verify({} as Netns, inpodRules())).toThrow(TypeError);
    expect(() => apply(ns, inpodRules(), { backend: 'iptables', iptablesMode: 'xt' as never })).toThrow(TypeError);
  });
});
