// The kernel accepts what the renderers write (combinations without a
// golden, sidecar nft included): each script is loaded into a fresh netns.
import { describe, expect, it } from 'vitest';
import { hostProbeRules, inpodRules, sidecarRules, toIptablesRestore, toNft, type RuleModel } from '../../lib/redirect/index.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const MODELS: Record<string, () => RuleModel> = {
  'inpod dns off + ingress + v6 + virt': () => inpodRules({ ipv6: true, dnsCapture: false, ingressBypass: true, virtualInterfaces: ['kv0'] }),
  'inpod default v6': () => inpodRules({ ipv6: true }),
  'sidecar TPROXY everything': () => sidecarRules({
    ipv6: true, mode: 'TPROXY', dnsCapture: true, invalidDrop: true, excludeInterfaces: ['eth9'], rerouteVirtualInterfaces: ['kv0'],
    includeOutboundCidrs: ['10.0.0.0/8', 'fd00::/8'], excludeOutboundCidrs: ['10.1.0.0/16'], includeInboundPorts: [80, 443],
    ownerGroupsInclude: ['10', '20'],
  }),
  'sidecar REDIRECT dns v6': () => sidecarRules({ ipv6: true, dnsCapture: true, excludeOutboundPorts: '*', includeOutboundPorts: [8080] }),
};

describe.skipIf(!privileged('nft', 'iptables-restore', 'ip6tables-restore'))('rendered rules load into a netns', () => {
  for (const [name, make] of Object.entries(MODELS)) {
    it(`nft: ${name}`, async () => {
      const ns = await freshNetns();
      const script = toNft(make());
      const r = await ns.spawn(['nft', '-f', '-'], { stdin: script, timeoutMs: 10_000 });
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      // Applying again is a clean rewrite (add + flush table).
      expect((await ns.spawn(['nft', '-f', '-'], { stdin: script, timeoutMs: 10_000 })).code).toBe(0);
      const listed = await ns.spawn(['nft', '-j', 'list', 'ruleset'], { timeoutMs: 10_000 });
      const objs = (JSON.parse(listed.stdout) as { nftables: Array<Record<string, unknown>> }).nftables;
      expect(objs.filter((o) => 'rule' in o)).toHaveLength(make().rules.length);
    });
    it(`iptables: ${name}`, async () => {
      const ns = await freshNetns();
      const m = make();
      for (const fam of m.families) {
        const bin = fam === 4 ? 'iptables-restore' : 'ip6tables-restore';
        const r = await ns.spawn([bin, '--noflush'], { stdin: toIptablesRestore(m, fam), timeoutMs: 10_000 });
        expect(r.code, r.stderr).toBe(0);
      }
    });
  }

  it('host probe nft loads next to its sets', async () => {
    const ns = await freshNetns();
    const sets = 'add table inet istio-ambient-nat\n'
      + 'add set inet istio-ambient-nat istio-inpod-probes-v4 { type ipv4_addr ; }\n'
      + 'add set inet istio-ambient-nat istio-inpod-probes-v6 { type ipv6_addr ; }\n';
    const r = await ns.spawn(['nft', '-f', '-'], { stdin: sets + toNft(hostProbeRules({ ipv6: true, kubeletUid: 1000 })), timeoutMs: 10_000 });
    expect(r.code, r.stderr).toBe(0);
    const listed = await ns.spawn(['nft', 'list', 'chain', 'inet', 'istio-ambient-nat', 'postrouting'], { timeoutMs: 10_000 });
    expect(listed.stdout).toContain('ip6 daddr @istio-inpod-probes-v6');
  });
});
