// The in-pod (ambient) rule set, spec §6.2 / §7: everything a pod needs so
// its traffic goes through ztunnel. Rules are built in Istio's order; the
// v6 twin of an address rule follows its v4 rule (nft lists them that way,
// iptables splits them per family).
import {
  DEFAULT_HOST_PROBE_SNAT_IP, DEFAULT_HOST_PROBE_SNAT_IPV6, DNS_CAPTURE_PORT, INPOD_MARK, INPOD_MASK,
  INPOD_RESTORE_MASK, INPOD_RULE_PRIORITY, INPOD_TPROXY_MARK, INPOD_TPROXY_MASK, ROUTE_TABLE_INBOUND,
  ZTUNNEL_INBOUND_PLAINTEXT_PORT, ZTUNNEL_INBOUND_PORT, ZTUNNEL_OUTBOUND_PORT,
  type Family, type Match, type Rule, type RuleModel, type TableName, type Target,
} from './model.js';
import { inpodTables } from './tables.js';
import { checkAddress, checkBool, checkInterfaces } from './validate.js';

export interface InpodConfig {
  /** Program the IPv6 family too (AMBIENT_IPV6). Default false. */
  ipv6?: boolean;
  /** Effective DNS capture (global AMBIENT_DNS_CAPTURE or the pod's override). Default true. */
  dnsCapture?: boolean;
  /** `ambient.istio.io/bypass-inbound-capture`: no inbound redirection. Default false. */
  ingressBypass?: boolean;
  /** `istio.io/reroute-virtual-interfaces`: inbound TCP on these goes to ztunnel's outbound port. */
  virtualInterfaces?: string[];
  /** HOST_PROBE_SNAT_IP. */
  snatIp?: string;
  /** HOST_PROBE_SNAT_IPV6. */
  snatIpv6?: string;
}

export interface ResolvedInpodConfig {
  ipv6: boolean;
  dnsCapture: boolean;
  ingressBypass: boolean;
  virtualInterfaces: string[];
  snatIp: string;
  snatIpv6: string;
}

export function resolveInpodConfig(cfg: InpodConfig = {}): ResolvedInpodConfig {
  if (cfg === null || typeof cfg !== 'object') throw new TypeError('inpod config must be an object');
  return {
    ipv6: checkBool(cfg.ipv6, 'ipv6') ?? false,
    dnsCapture: checkBool(cfg.dnsCapture, 'dnsCapture') ?? true,
    ingressBypass: checkBool(cfg.ingressBypass, 'ingressBypass') ?? false,
    virtualInterfaces: checkInterfaces(cfg.virtualInterfaces, 'virtualInterfaces'),
    snatIp: checkAddress(cfg.snatIp ?? DEFAULT_HOST_PROBE_SNAT_IP, 4, 'snatIp'),
    snatIpv6: checkAddress(cfg.snatIpv6 ?? DEFAULT_HOST_PROBE_SNAT_IPV6, 6, 'snatIpv6'),
  };
}

const LOOPBACK = { 4: '127.0.0.1/32', 6: '::1/128' } as const;

export function inpodRules(config: InpodConfig = {}): RuleModel {
  const cfg = resolveInpodConfig(config);
  const families: Family[] = cfg.ipv6 ? [4, 6] : [4];
  const rules: Rule[] = [];
  const add = (table: TableName, chain: string, matches: Match[], target: Target, extra: Partial<Rule> = {}) => {
    rules.push({ table, chain, family: 'any', matches, target, ...extra });
  };
  // One rule per enabled family; `build` gets the family's address.
  const perFamily = (addrs: Record<Family, string>, build: (addr: string, fam: Family) => Omit<Rule, 'family'>) => {
    for (const fam of families) rules.push({ ...build(addrs[fam], fam), family: fam });
  };
  const jump = (chain: string): Target => ({ kind: 'jump', chain });
  const noCounter = { nft: { counter: false } };
  const notZtunnel: Match = { kind: 'mark', value: INPOD_MARK, mask: INPOD_MASK, not: true, hex: true };
  const snat = { 4: cfg.snatIp, 6: cfg.snatIpv6 };

  // Hooks into our chains.
  add('mangle', 'PREROUTING', [], jump('ISTIO_PRERT'), noCounter);
  add('mangle', 'OUTPUT', [], jump('ISTIO_OUTPUT'), noCounter);
  add('nat', 'OUTPUT', [], jump('ISTIO_OUTPUT'), noCounter);
  if (cfg.dnsCapture) {
    add('raw', 'PREROUTING', [], jump('ISTIO_PRERT'), noCounter);
    add('raw', 'OUTPUT', [], jump('ISTIO_OUTPUT'), noCounter);
  }
  add('nat', 'PREROUTING', [], jump('ISTIO_PRERT'), noCounter);

  // Traffic arriving on a virtual interface (e.g. KubeVirt) is the pod's own outbound.
  for (const name of cfg.virtualInterfaces) {
    const m: Match[] = [{ kind: 'iface', dir: 'in', name }, { kind: 'proto', proto: 'tcp' }];
    add('nat', 'ISTIO_PRERT', m, { kind: 'redirect', port: ZTUNNEL_OUTBOUND_PORT });
    add('nat', 'ISTIO_PRERT', m, { kind: 'return' });
  }

  // Packets ztunnel sends to the app (mark 0x539) tag their connection 0x111,
  // kept even with ingress bypass: HBONE inbound still needs it.
  add('mangle', 'ISTIO_PRERT', [{ kind: 'mark', value: INPOD_MARK, mask: INPOD_MASK, hex: true, nft: 'meta-amp' }],
    { kind: 'connmark-set', value: INPOD_TPROXY_MARK, mask: INPOD_TPROXY_MASK, hex: true });

  // Probes SNATed to the host probe address bypass ztunnel both ways.
  if (!cfg.ingressBypass) {
    perFamily(snat, (a) => ({
      table: 'nat', chain: 'ISTIO_PRERT', target: { kind: 'accept' },
      matches: [{ kind: 'addr', dir: 'src', cidr: a }, { kind: 'proto', proto: 'tcp', module: true }], nft: { order: [1, 0] },
    }));
  }
  perFamily(snat, (a) => ({
    table: 'nat', chain: 'ISTIO_OUTPUT', target: { kind: 'accept' },
    matches: [{ kind: 'addr', dir: 'dst', cidr: a }, { kind: 'proto', proto: 'tcp', module: true }], nft: { order: [1, 0] },
  }));

  // Inbound TCP (except HBONE on 15008 and ztunnel's own) → ztunnel 15006.
  if (!cfg.ingressBypass) {
    perFamily(LOOPBACK, (a, fam) => ({
      table: 'nat', chain: 'ISTIO_PRERT', target: { kind: 'redirect', port: ZTUNNEL_INBOUND_PLAINTEXT_PORT },
      matches: [
        { kind: 'addr', dir: 'dst', cidr: a, not: true }, { kind: 'proto', proto: 'tcp' },
        { kind: 'port', dir: 'dst', proto: 'tcp', ports: [ZTUNNEL_INBOUND_PORT], not: true },
        // Istio's v4 text has a double space here; its v6 twin does not.
        { ...notZtunnel, nft: fam === 4 ? 'wide' : 'mark' },
      ],
    }));
  }

  // Replies of ztunnel's transparent connections get 0x111 back, so table 100 delivers them locally.
  add('mangle', 'ISTIO_OUTPUT', [{ kind: 'connmark', value: INPOD_TPROXY_MARK, mask: INPOD_TPROXY_MASK, hex: true }],
    { kind: 'connmark-restore', nfmask: INPOD_RESTORE_MASK, ctmask: INPOD_RESTORE_MASK });

  if (cfg.dnsCapture) {
    add('nat', 'ISTIO_OUTPUT', [
      { kind: 'iface', dir: 'out', name: 'lo', not: true }, { kind: 'proto', proto: 'udp' }, notZtunnel,
      { kind: 'port', dir: 'dst', proto: 'udp', ports: [53], module: true },
    ], { kind: 'redirect', port: DNS_CAPTURE_PORT, toPortFlag: true });
    perFamily(LOOPBACK, (a) => ({
      table: 'nat', chain: 'ISTIO_OUTPUT', target: { kind: 'redirect', port: DNS_CAPTURE_PORT },
      matches: [
        { kind: 'addr', dir: 'dst', cidr: a, not: true }, { kind: 'proto', proto: 'tcp' },
        { kind: 'port', dir: 'dst', proto: 'tcp', ports: [53] }, notZtunnel,
      ],
    }));
    // Separate conntrack zones for ztunnel's upstream DNS and the app's queries (UDP conntrack races).
    add('raw', 'ISTIO_OUTPUT', [
      { kind: 'proto', proto: 'udp' }, { kind: 'mark', value: INPOD_MARK, mask: INPOD_MASK, hex: true, nft: 'meta' },
      { kind: 'port', dir: 'dst', proto: 'udp', ports: [53], module: true },
    ], { kind: 'ct-zone', zone: 1 }, { nft: { order: [0, 2, 1] } });
    add('raw', 'ISTIO_PRERT', [
      { kind: 'proto', proto: 'udp' }, { ...notZtunnel, nft: 'meta' },
      { kind: 'port', dir: 'src', proto: 'udp', ports: [53], module: true },
    ], { kind: 'ct-zone', zone: 1 }, { nft: { order: [0, 2, 1] } });
  }

  add('nat', 'ISTIO_OUTPUT', [{ kind: 'proto', proto: 'tcp' }, { kind: 'mark', value: INPOD_TPROXY_MARK, mask: INPOD_TPROXY_MASK, hex: true }],
    { kind: 'accept' });
  perFamily(LOOPBACK, (a) => ({
    table: 'nat', chain: 'ISTIO_OUTPUT', target: { kind: 'accept' },
    matches: [{ kind: 'addr', dir: 'dst', cidr: a, not: true }, { kind: 'iface', dir: 'out', name: 'lo' }], nft: { order: [1, 0] },
  }));
  // Outbound TCP not from ztunnel → ztunnel 15001.
  perFamily(LOOPBACK, (a) => ({
    table: 'nat', chain: 'ISTIO_OUTPUT', target: { kind: 'redirect', port: ZTUNNEL_OUTBOUND_PORT },
    matches: [{ kind: 'addr', dir: 'dst', cidr: a, not: true }, { kind: 'proto', proto: 'tcp' }, notZtunnel], nft: { order: [1, 0, 2] },
  }));

  return {
    kind: 'inpod',
    families,
    tables: inpodTables(),
    rules,
    routes: families.map((family) => ({
      family, type: 'local', dst: family === 4 ? '0.0.0.0/0' : '::/0', dev: 'lo', table: ROUTE_TABLE_INBOUND, scope: 'host',
    })),
    policyRules: families.map((family) => ({
      family, fwmark: INPOD_TPROXY_MARK, fwmask: INPOD_TPROXY_MASK, table: ROUTE_TABLE_INBOUND, priority: INPOD_RULE_PRIORITY,
    })),
    addresses: [],
  };
}
