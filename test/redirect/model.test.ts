// Combinations beyond the goldens: the model follows the specification
// (§6.2, §2.6–2.7) for every flag, and bad values fail with typed errors.
import { describe, expect, it } from 'vitest';
import {
  ANNOTATIONS, hostProbeRules, inpodConfigFromPod, inpodRules, iptablesRuleText, sidecarConfigFromPod, sidecarRules,
  toIptablesRestore, toNft, type Family, type RuleModel,
} from '../../lib/redirect/index.js';

const lines = (model: RuleModel, fam: Family) => toIptablesRestore(model, fam).split('\n');
const tables = (text: string) => text.split('\n').filter((l) => l.startsWith('* ')).map((l) => l.slice(2));

describe('in-pod combinations', () => {
  it('dns off + ingress bypass + IPv6: no raw table, no inbound redirect, outbound kept in both families', () => {
    const m = inpodRules({ ipv6: true, dnsCapture: false, ingressBypass: true, snatIpv6: 'fd00::7' });
    for (const fam of [4, 6] as const) {
      const text = toIptablesRestore(m, fam);
      expect(tables(text)).toEqual(['mangle', 'nat']);
      expect(text).not.toContain('--to-ports 15006');
      expect(text).not.toContain('15053');
      expect(text).not.toMatch(/-A ISTIO_PRERT .*-s /);
      expect(text).toContain('-j REDIRECT --to-ports 15001');
      // HBONE still needs the connmark (spec: ingress keeps rule 8).
      expect(text).toContain('-A ISTIO_PRERT -m mark --mark 0x539/0xfff -j CONNMARK --set-xmark 0x111/0xfff');
    }
    expect(toIptablesRestore(m, 6)).toContain('-A ISTIO_OUTPUT -d fd00::7 -p tcp -m tcp -j ACCEPT');
    const nft = toNft(m);
    expect(nft).not.toContain('istio-ambient-raw');
    expect(nft).toContain('add rule inet istio-ambient-nat istio-output meta l4proto tcp ip6 daddr != ::1/128 mark and 0xfff != 0x539 counter redirect to :15001');
    expect(nft).not.toContain('redirect to :15006');
  });

  it('ingress bypass + virtual interfaces keeps the interface reroute and the prerouting chain', () => {
    const m = inpodRules({ dnsCapture: false, ingressBypass: true, virtualInterfaces: ['kv0'] });
    const all = lines(m, 4);
    const nat = all.slice(all.indexOf('* nat'));
    expect(nat).toContain('-A ISTIO_PRERT -i kv0 -p tcp -j REDIRECT --to-ports 15001');
    expect(nat).toContain('-A ISTIO_PRERT -i kv0 -p tcp -j RETURN');
    expect(nat.filter((l) => l.startsWith('-A ISTIO_PRERT'))).toHaveLength(2);
    // Now ISTIO_PRERT has nat rules before ISTIO_OUTPUT does: declared first.
    const decl = nat.filter((l) => l.startsWith('-N'));
    expect(decl.slice(decl.length - 2)).toEqual(['-N ISTIO_PRERT', '-N ISTIO_OUTPUT']);
  });

  it('dns on, IPv4 only: UDP DNS rule has no family and conntrack zones sit in raw', () => {
    const m = inpodRules({ dnsCapture: true });
    expect(m.rules.filter((r) => r.table === 'raw').map((r) => r.chain)).toEqual(['PREROUTING', 'OUTPUT', 'ISTIO_OUTPUT', 'ISTIO_PRERT']);
    const udp = m.rules.find((r) => r.target.kind === 'redirect' && r.matches.some((x) => x.kind === 'proto' && x.proto === 'udp'))!;
    expect(udp.family).toBe('any');
    expect(iptablesRuleText(udp)).toBe('-A ISTIO_OUTPUT ! -o lo -p udp -m mark ! --mark 0x539/0xfff -m udp --dport 53 -j REDIRECT --to-port 15053');
  });

  it('carries the routes and policy rules per family', () => {
    expect(inpodRules({}).routes).toEqual([{ family: 4, type: 'local', dst: '0.0.0.0/0', dev: 'lo', table: 100, scope: 'host' }]);
    const m = inpodRules({ ipv6: true });
    expect(m.routes.map((r) => r.dst)).toEqual(['0.0.0.0/0', '::/0']);
    expect(m.policyRules).toEqual([
      { family: 4, fwmark: 0x111, fwmask: 0xfff, table: 100, priority: 32764 },
      { family: 6, fwmark: 0x111, fwmask: 0xfff, table: 100, priority: 32764 },
    ]);
  });

  it('rejects bad configuration before rendering', () => {
    expect(() => inpodRules({ snatIp: 'fd00::1' })).toThrow(TypeError);
    expect(() => inpodRules({ snatIpv6: '10.0.0.1' })).toThrow(TypeError);
    expect(() => inpodRules({ snatIp: '300.1.1.1' })).toThrow(TypeError);
    expect(() => inpodRules({ virtualInterfaces: ['bad name'] })).toThrow(TypeError);
    expect(() => inpodRules({ virtualInterfaces: ['abcdefghijklmnop'] })).toThrow(RangeError);
    expect(() => inpodRules({ ipv6: 'yes' as never })).toThrow(TypeError);
  });
});

describe('host probe', () => {
  it('nft needs the kubelet UID; iptables uses --socket-exists', () => {
    expect(() => toNft(hostProbeRules({}))).toThrow(TypeError);
    expect(toIptablesRestore(hostProbeRules({ snatIp: '169.254.9.9', ipsetName: 'probes' }), 4))
      .toContain('-m owner --socket-exists -p tcp -m set --match-set probes-v4 dst -j SNAT --to-source 169.254.9.9');
    expect(() => hostProbeRules({ kubeletUid: -1 })).toThrow(RangeError);
  });
});

describe('sidecar combinations', () => {
  it('IPv6 splits exclusions by family and uses ::6 / ::1', () => {
    const m = sidecarRules({ ipv6: true, excludeOutboundCidrs: ['10.0.0.0/8', 'fd00::/8'], includeOutboundCidrs: ['192.168.0.0/16'] });
    const v4 = lines(m, 4);
    const v6 = lines(m, 6);
    expect(v4).toContain('-A ISTIO_OUTPUT -d 10.0.0.0/8 -j RETURN');
    expect(v4).not.toContain('-A ISTIO_OUTPUT -d fd00::/8 -j RETURN');
    expect(v6).toContain('-A ISTIO_OUTPUT -d fd00::/8 -j RETURN');
    expect(v6).toContain('-A ISTIO_OUTPUT -o lo -s ::6/128 -j RETURN');
    expect(v6).toContain('-A ISTIO_OUTPUT -d ::1/128 -j RETURN');
    // Only an IPv4 CIDR is included: IPv6 outbound is not redirected at all.
    expect(v4).toContain('-A ISTIO_OUTPUT -d 192.168.0.0/16 -j ISTIO_REDIRECT');
    expect(v6.some((l) => l.startsWith('-A ISTIO_OUTPUT') && l.endsWith('-j ISTIO_REDIRECT'))).toBe(false);
    expect(m.addresses).toEqual([{ family: 6, address: '::6/128', dev: 'lo' }]);
  });

  it('TPROXY programs mangle, the 133 table and fwmark rule; REDIRECT does not', () => {
    const t = sidecarRules({ mode: 'TPROXY', ipv6: true });
    expect(t.policyRules).toEqual([
      { family: 4, fwmark: 1337, table: 133 }, { family: 6, fwmark: 1337, table: 133 },
    ]);
    expect(t.routes.map((r) => `${r.dst}@${r.table}`)).toEqual(['0.0.0.0/0@133', '::/0@133']);
    expect(lines(t, 6)).toContain('-I ISTIO_INBOUND 2 -p tcp -s ::6/128 -i lo -j RETURN');
    const r = sidecarRules({});
    expect(r.routes).toEqual([]);
    expect(r.policyRules).toEqual([]);
    expect(tables(toIptablesRestore(r, 4))).toEqual(['nat']);
  });

  it('excluded interfaces, virtual interfaces, invalid drop, custom owner and port lists', () => {
    const m = sidecarRules({
      excludeInterfaces: ['eth9'], rerouteVirtualInterfaces: ['kv0'], invalidDrop: true, proxyUid: 1000, proxyGid: 2000,
      includeOutboundPorts: [8080], excludeInboundPorts: [22], ownerGroupsExclude: ['99'],
    });
    const l = lines(m, 4);
    expect(l).toContain('-A PREROUTING -i eth9 -j RETURN');
    expect(l).toContain('-A OUTPUT -o eth9 -j RETURN');
    expect(l).toContain('-I PREROUTING 1 -i kv0 -j RETURN');
    expect(l).toContain('-I PREROUTING 1 -i kv0 -j ISTIO_REDIRECT');
    expect(l).toContain('-A PREROUTING -m conntrack --ctstate INVALID -j ISTIO_DROP');
    expect(l).toContain('-A ISTIO_DROP -j DROP');
    expect(l).toContain('-A ISTIO_OUTPUT -m owner --uid-owner 1000 -j RETURN');
    expect(l).toContain('-A ISTIO_OUTPUT -m owner --gid-owner 2000 -j RETURN');
    expect(l).toContain('-A ISTIO_OUTPUT -m owner --gid-owner 99 -j RETURN');
    expect(l).toContain('-A ISTIO_OUTPUT -p tcp --dport 8080 -j ISTIO_REDIRECT');
    expect(l).toContain('-A ISTIO_INBOUND -p tcp --dport 22 -j RETURN');
    // An invalid-drop jump lands in mangle, whose chain is declared.
    expect(toIptablesRestore(m, 4)).toMatch(/\* mangle\n-N ISTIO_DROP\n/);
    // nft: the interface inserts become `insert … index 0` once the chain has rules.
    expect(toNft(m)).toContain('insert rule inet istio-proxy-nat prerouting index 0 iifname kv0 counter jump istio-redirect');
  });

  it('owner-group include list becomes one rule of negated matches', () => {
    const l = lines(sidecarRules({ ownerGroupsInclude: ['10', 'app'] }), 4);
    expect(l).toContain('-A ISTIO_OUTPUT -m owner ! --gid-owner 10 -m owner ! --gid-owner app -j RETURN');
    expect(() => sidecarRules({ ownerGroupsInclude: Array.from({ length: 65 }, (_, i) => String(i)) })).toThrow(RangeError);
  });

  it('"*" exclusions mean all ports (Istio would write --dport *)', () => {
    const m = sidecarRules({ excludeInboundPorts: '*', excludeOutboundPorts: '*' });
    const text = toIptablesRestore(m, 4);
    expect(text).not.toContain('*,');
    expect(text).not.toContain('--dport *');
    expect(text).not.toContain('-j ISTIO_INBOUND');
    expect(text).toContain('-A ISTIO_OUTPUT -p tcp -j RETURN');
  });

  it('rejects bad values with typed errors', () => {
    expect(() => sidecarRules({ excludeOutboundPorts: [70000] })).toThrow(RangeError);
    expect(() => sidecarRules({ includeInboundPorts: '80,http' })).toThrow(TypeError);
    expect(() => sidecarRules({ includeOutboundCidrs: ['10.0.0.0/33'] })).toThrow(RangeError);
    expect(() => sidecarRules({ includeOutboundCidrs: ['10.0.0/8'] })).toThrow(TypeError);
    expect(() => sidecarRules({ excludeOutboundCidrs: '*' })).toThrow(TypeError);
    expect(() => sidecarRules({ mode: 'DNAT' as never })).toThrow(TypeError);
    expect(() => sidecarRules({ hostIpv4LoopbackCidr: '10.0.0.1/32' })).toThrow(TypeError);
    expect(() => sidecarRules({ proxyUid: -5 })).toThrow(RangeError);
    expect(() => sidecarRules({ proxyUid: 'root' })).toThrow(TypeError);
  });
});

describe('configuration from the pod', () => {
  it('ambient overrides: annotations win, unparsable booleans are ignored', () => {
    expect(inpodConfigFromPod({ dnsCaptureGlobal: true, annotations: { [ANNOTATIONS.dnsCapture]: 'false' } }).dnsCapture).toBe(false);
    expect(inpodConfigFromPod({ dnsCaptureGlobal: false, annotations: { [ANNOTATIONS.dnsCapture]: 'maybe' } }).dnsCapture).toBe(false);
    expect(inpodConfigFromPod({ annotations: { [ANNOTATIONS.bypassInboundCapture]: 'T' } }).ingressBypass).toBe(true);
    expect(inpodConfigFromPod({ annotations: { [ANNOTATIONS.rerouteVirtualInterfaces]: ' a0 , ,b1,' } }).virtualInterfaces).toEqual(['a0', 'b1']);
    // global on, pod off: no raw table (upstream's dns_pod_disabled_and_on_globally case)
    const off = inpodRules(inpodConfigFromPod({ dnsCaptureGlobal: true, annotations: { [ANNOTATIONS.dnsCapture]: 'false' } }));
    expect(tables(toIptablesRestore(off, 4))).toEqual(['mangle', 'nat']);
  });

  it('sidecar: annotations, proxy ids and env as the CNI plugin reads them', () => {
    const cfg = sidecarConfigFromPod({
      annotations: {
        [ANNOTATIONS.excludeInboundPorts]: '9000, 15021',
        [ANNOTATIONS.kubevirtInterfaces]: 'old0',
        [ANNOTATIONS.excludeOutboundIPRanges]: '10.0.0.0/8,fd00::/8',
      },
      proxyUid: 0, proxyGid: 4000,
      proxyEnv: { ISTIO_META_DNS_CAPTURE: 'true', INVALID_DROP: '1', ISTIO_DUAL_STACK: 'true' },
      podIps: ['10.1.1.1', 'fd00::1'],
    });
    expect(cfg.excludeInboundPorts).toEqual([9000, 15021, 15020, 15090]);
    expect(cfg.rerouteVirtualInterfaces).toEqual(['old0']);
    expect(cfg.proxyUid).toBe(1337);
    expect(cfg.proxyGid).toBe(4000);
    expect(cfg.dnsCapture).toBe(true);
    expect(cfg.invalidDrop).toBe(true);
    expect(cfg.ipv6).toBe(true); // dual stack: an IPv6 address anywhere
    expect(sidecarConfigFromPod({ podIps: ['10.1.1.1', 'fd00::1'] }).ipv6).toBe(false);
    // The newer annotation wins over the deprecated one.
    expect(sidecarConfigFromPod({ annotations: { [ANNOTATIONS.rerouteVirtualInterfaces]: 'new0', [ANNOTATIONS.kubevirtInterfaces]: 'old0' } })
      .rerouteVirtualInterfaces).toEqual(['new0']);
  });

  it('sidecar: bad annotations name the annotation and keep the error type', () => {
    const bad = (k: string, v: string) => () => sidecarConfigFromPod({ annotations: { [k]: v } });
    expect(bad(ANNOTATIONS.excludeOutboundPorts, '70000')).toThrow(RangeError);
    expect(bad(ANNOTATIONS.excludeOutboundPorts, '70000')).toThrow(/excludeOutboundPorts/);
    expect(bad(ANNOTATIONS.includeOutboundIPRanges, '10.0.0.0/8, 11.0.0.0/8')).toThrow(TypeError);
    expect(bad(ANNOTATIONS.interceptionMode, 'tproxy')).toThrow(TypeError);
    expect(bad(ANNOTATIONS.excludeInterfaces, 'eth0,,eth1')).toThrow(TypeError);
  });
});
