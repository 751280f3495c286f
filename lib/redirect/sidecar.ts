// The sidecar-mode rule set the CNI plugin programs into a pod (spec §2.6,
// §2.7; the same rules istio-init writes): REDIRECT or TPROXY inbound
// capture, outbound capture with include/exclude CIDRs and ports, excluded
// and virtual interfaces, proxy UID/GID exemptions, DNS, invalid-drop.
import {
  DEFAULT_PROXY_GID, DEFAULT_PROXY_UID, SIDECAR_DNS_PORT, SIDECAR_INBOUND_CAPTURE_PORT, SIDECAR_OUTBOUND_MARK,
  SIDECAR_PROXY_PORT, SIDECAR_TPROXY_MARK, SIDECAR_TPROXY_ROUTE_TABLE, SIDECAR_TUNNEL_PORT,
  type Family, type Match, type Rule, type RuleModel, type TableName, type Target,
} from './model.js';
import { sidecarTables } from './tables.js';
import {
  checkBool, checkCidr, checkCidrSpec, checkId, checkInterfaces, checkPortSpec, cidrFamily, isLoopbackCidr,
  type CidrSpec, type PortSpec,
} from './validate.js';

export type InterceptionMode = 'REDIRECT' | 'TPROXY';

export interface SidecarConfig {
  /** The pod has IPv6 (Istio: its first non-loopback, non-link-local address is v6). Default false. */
  ipv6?: boolean;
  /** `sidecar.istio.io/interceptionMode`. Default REDIRECT. */
  mode?: InterceptionMode;
  /** Proxy UID/GID (comma lists allowed, as istio-iptables). Default 1337. */
  proxyUid?: number | string;
  proxyGid?: number | string;
  /** Default `*`. */
  includeOutboundCidrs?: CidrSpec | string;
  excludeOutboundCidrs?: string[] | string;
  /** Default `*`; empty = no inbound capture. */
  includeInboundPorts?: PortSpec | string;
  /** Effective list (the plugin appends 15020,15021,15090). Default 15020,15021,15090. */
  excludeInboundPorts?: PortSpec | string;
  includeOutboundPorts?: PortSpec | string;
  /** Default 15020. */
  excludeOutboundPorts?: PortSpec | string;
  excludeInterfaces?: string[] | string;
  rerouteVirtualInterfaces?: string[] | string;
  /** ISTIO_META_DNS_CAPTURE: redirect (and capture all) DNS. Default false. */
  dnsCapture?: boolean;
  /** INVALID_DROP. Default false. */
  invalidDrop?: boolean;
  /** ISTIO_OUTBOUND_OWNER_GROUPS (default `*`) / ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE. */
  ownerGroupsInclude?: '*' | string[] | string;
  ownerGroupsExclude?: string[] | string;
  /** ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR. Default 127.0.0.1/32. */
  hostIpv4LoopbackCidr?: string;
}

export interface ResolvedSidecarConfig {
  ipv6: boolean;
  mode: InterceptionMode;
  proxyUids: string[];
  proxyGids: string[];
  includeOutboundCidrs: CidrSpec;
  excludeOutboundCidrs: string[];
  includeInboundPorts: PortSpec;
  excludeInboundPorts: PortSpec;
  includeOutboundPorts: PortSpec;
  excludeOutboundPorts: PortSpec;
  excludeInterfaces: string[];
  rerouteVirtualInterfaces: string[];
  dnsCapture: boolean;
  invalidDrop: boolean;
  ownerGroups: { except: boolean; values: string[] };
  hostIpv4LoopbackCidr: string;
}

const MAX_OWNER_GROUPS_INCLUDE = 64;

const idList = (v: unknown, what: string, names = false): string[] => {
  const items = typeof v === 'string' ? v.split(',').filter((s) => s !== '') : Array.isArray(v) ? v : [v];
  return items.map((x) => checkId(typeof x === 'string' ? x.trim() : x, what, names));
};

export function resolveSidecarConfig(cfg: SidecarConfig = {}): ResolvedSidecarConfig {
  if (cfg === null || typeof cfg !== 'object') throw new TypeError('sidecar config must be an object');
  const mode = cfg.mode ?? 'REDIRECT';
  if (mode !== 'REDIRECT' && mode !== 'TPROXY') throw new TypeError(`mode must be REDIRECT or TPROXY, got ${JSON.stringify(mode)}`);
  const excludeCidrs = checkCidrSpec(cfg.excludeOutboundCidrs ?? [], 'excludeOutboundCidrs', false) as string[];
  const include = cfg.ownerGroupsInclude ?? '*';
  const ownerGroups = include === '*'
    ? { except: true, values: cfg.ownerGroupsExclude === undefined ? [] : idList(cfg.ownerGroupsExclude, 'ownerGroupsExclude', true) }
    : { except: false, values: include === '' || (Array.isArray(include) && include.length === 0) ? [] : idList(include, 'ownerGroupsInclude', true) };
  if (!ownerGroups.except && ownerGroups.values.length > MAX_OWNER_GROUPS_INCLUDE) {
    throw new RangeError(`ownerGroupsInclude: at most ${MAX_OWNER_GROUPS_INCLUDE} groups, got ${ownerGroups.values.length}`);
  }
  const lb = checkCidr(cfg.hostIpv4LoopbackCidr ?? '127.0.0.1/32', 'hostIpv4LoopbackCidr');
  const [lbAddr, lbLen] = lb.split('/');
  if (cidrFamily(lb) !== 4 || !isLoopbackCidr(lb)) throw new TypeError(`hostIpv4LoopbackCidr: ${lb} is not an IPv4 loopback CIDR`);
  if (Number(lbLen) < 8) throw new RangeError(`hostIpv4LoopbackCidr: mask of ${lb} must be 8-32`);
  return {
    ipv6: checkBool(cfg.ipv6, 'ipv6') ?? false,
    mode,
    proxyUids: idList(cfg.proxyUid ?? DEFAULT_PROXY_UID, 'proxyUid'),
    proxyGids: idList(cfg.proxyGid ?? DEFAULT_PROXY_GID, 'proxyGid'),
    includeOutboundCidrs: checkCidrSpec(cfg.includeOutboundCidrs ?? '*', 'includeOutboundCidrs', true),
    excludeOutboundCidrs: excludeCidrs,
    includeInboundPorts: checkPortSpec(cfg.includeInboundPorts ?? '*', 'includeInboundPorts'),
    excludeInboundPorts: checkPortSpec(cfg.excludeInboundPorts ?? [15020, 15021, 15090], 'excludeInboundPorts'),
    includeOutboundPorts: checkPortSpec(cfg.includeOutboundPorts ?? [], 'includeOutboundPorts'),
    excludeOutboundPorts: checkPortSpec(cfg.excludeOutboundPorts ?? [15020], 'excludeOutboundPorts'),
    excludeInterfaces: checkInterfaces(cfg.excludeInterfaces, 'excludeInterfaces'),
    rerouteVirtualInterfaces: checkInterfaces(cfg.rerouteVirtualInterfaces, 'rerouteVirtualInterfaces'),
    dnsCapture: checkBool(cfg.dnsCapture, 'dnsCapture') ?? false,
    invalidDrop: checkBool(cfg.invalidDrop, 'invalidDrop') ?? false,
    ownerGroups,
    hostIpv4LoopbackCidr: `${lbAddr}/${lbLen}`,
  };
}

export function sidecarRules(config: SidecarConfig = {}): RuleModel {
  const c = resolveSidecarConfig(config);
  const tproxy = c.mode === 'TPROXY';
  const families: Family[] = c.ipv6 ? [4, 6] : [4];
  const rules: Rule[] = [];
  const push = (family: Rule['family'], table: TableName, chain: string, matches: Match[], target: Target, insert?: number) => {
    if (family !== 'any' && !families.includes(family)) return;
    rules.push(insert === undefined ? { table, chain, family, matches, target } : { table, chain, family, matches, target, insert });
  };
  const add = (table: TableName, chain: string, matches: Match[], target: Target) => push('any', table, chain, matches, target);
  const perFamily = (v4: string, v6: string, build: (addr: string) => [TableName, string, Match[], Target]) => {
    push(4, ...build(v4));
    push(6, ...build(v6));
  };
  const jump = (chain: string): Target => ({ kind: 'jump', chain });
  const RETURN: Target = { kind: 'return' };
  const tcp: Match = { kind: 'proto', proto: 'tcp' };
  const udp: Match = { kind: 'proto', proto: 'udp' };
  const dport = (proto: 'tcp' | 'udp', ports: number[], not = false): Match => ({ kind: 'port', dir: 'dst', proto, ports, ...(not ? { not } : {}) });
  const sport = (proto: 'tcp' | 'udp', port: number): Match => ({ kind: 'port', dir: 'src', proto, ports: [port] });
  const iif = (name: string): Match => ({ kind: 'iface', dir: 'in', name });
  const oif = (name: string): Match => ({ kind: 'iface', dir: 'out', name });
  const dst = (cidr: string, not = false): Match => ({ kind: 'addr', dir: 'dst', cidr, ...(not ? { not } : {}) });
  const src = (cidr: string): Match => ({ kind: 'addr', dir: 'src', cidr });
  const owner = (by: 'uid' | 'gid', id: string, not = false): Match => ({ kind: 'owner', by, id, ...(not ? { not } : {}) });
  const mark = (value: number, not = false): Match => ({ kind: 'mark', value, ...(not ? { not } : {}) });
  const LB4 = c.hostIpv4LoopbackCidr;
  const LB6 = '::1/128';

  const include = c.includeOutboundCidrs;
  const includeCidrs = include === '*' ? [] : include;
  const includesLoopback = includeCidrs.some(isLoopbackCidr);

  // Excluded interfaces skip capture entirely.
  for (const name of c.excludeInterfaces) {
    add('nat', 'PREROUTING', [iif(name)], RETURN);
    add('nat', 'OUTPUT', [oif(name)], RETURN);
  }
  if (tproxy) {
    for (const name of c.excludeInterfaces) {
      add('mangle', 'PREROUTING', [iif(name)], RETURN);
      add('mangle', 'OUTPUT', [oif(name)], RETURN);
    }
  }
  // Virtual interfaces are not inbound (their traffic is redirected as outbound below).
  for (const name of c.rerouteVirtualInterfaces) push('any', 'nat', 'PREROUTING', [iif(name)], RETURN, 1);

  if (c.invalidDrop) {
    add('mangle', 'PREROUTING', [{ kind: 'ctstate', states: ['INVALID'] }], jump('ISTIO_DROP'));
    add('mangle', 'ISTIO_DROP', [], { kind: 'drop' });
  }

  add('nat', 'ISTIO_INBOUND', [tcp, dport('tcp', [SIDECAR_TUNNEL_PORT])], RETURN);
  add('nat', 'ISTIO_REDIRECT', [tcp], { kind: 'redirect', port: SIDECAR_PROXY_PORT });
  add('nat', 'ISTIO_IN_REDIRECT', [tcp], { kind: 'redirect', port: SIDECAR_INBOUND_CAPTURE_PORT });

  // Inbound. Istio turns an exclude list of `*` into `--dport *` (rejected by
  // iptables); the intent, excluding every port, means no inbound capture.
  const inbound = c.excludeInboundPorts === '*' ? [] : c.includeInboundPorts;
  if (inbound === '*' || inbound.length > 0) {
    const table: TableName = tproxy ? 'mangle' : 'nat';
    if (tproxy) {
      add('mangle', 'ISTIO_DIVERT', [], { kind: 'mark-set', value: SIDECAR_TPROXY_MARK });
      add('mangle', 'ISTIO_DIVERT', [], { kind: 'accept' });
      perFamily(LB4, LB6, (lb) => ['mangle', 'ISTIO_TPROXY', [dst(lb, true), tcp],
        { kind: 'tproxy', port: SIDECAR_INBOUND_CAPTURE_PORT, mark: SIDECAR_TPROXY_MARK, mask: 0xffffffff }]);
    }
    add(table, 'PREROUTING', [tcp], jump('ISTIO_INBOUND'));
    const established: Match = { kind: 'ctstate', states: ['RELATED', 'ESTABLISHED'] };
    if (inbound === '*') {
      for (const p of c.excludeInboundPorts as number[]) add(table, 'ISTIO_INBOUND', [tcp, dport('tcp', [p])], RETURN);
      if (tproxy) {
        add('mangle', 'ISTIO_INBOUND', [tcp, established], jump('ISTIO_DIVERT'));
        add('mangle', 'ISTIO_INBOUND', [tcp], jump('ISTIO_TPROXY'));
      } else {
        add('nat', 'ISTIO_INBOUND', [tcp], jump('ISTIO_IN_REDIRECT'));
      }
    } else {
      for (const p of inbound) {
        if (tproxy) {
          add('mangle', 'ISTIO_INBOUND', [tcp, dport('tcp', [p]), established], jump('ISTIO_DIVERT'));
          add('mangle', 'ISTIO_INBOUND', [tcp, dport('tcp', [p])], jump('ISTIO_TPROXY'));
        } else {
          add('nat', 'ISTIO_INBOUND', [tcp, dport('tcp', [p])], jump('ISTIO_IN_REDIRECT'));
        }
      }
    }
  }

  // Outbound.
  add('nat', 'OUTPUT', [], jump('ISTIO_OUTPUT'));
  if (c.excludeOutboundPorts === '*') {
    // Istio would write `--dport *`; excluding every port means returning all TCP and UDP.
    add('nat', 'ISTIO_OUTPUT', [tcp], RETURN);
    add('nat', 'ISTIO_OUTPUT', [udp], RETURN);
  } else {
    for (const p of c.excludeOutboundPorts) {
      add('nat', 'ISTIO_OUTPUT', [tcp, dport('tcp', [p])], RETURN);
      add('nat', 'ISTIO_OUTPUT', [udp, dport('udp', [p])], RETURN);
    }
  }
  // Envoy's inbound passthrough binds 127.0.0.6 / ::6.
  perFamily('127.0.0.6/32', '::6/128', (a) => ['nat', 'ISTIO_OUTPUT', [oif('lo'), src(a)], RETURN]);

  for (const by of ['uid', 'gid'] as const) {
    for (const id of by === 'uid' ? c.proxyUids : c.proxyGids) {
      // The proxy calling the app through a service VIP goes back through the proxy's inbound.
      const skip: Match = c.dnsCapture && by === 'uid'
        ? dport('tcp', [53, SIDECAR_TUNNEL_PORT], true)
        : dport('tcp', [SIDECAR_TUNNEL_PORT], true);
      perFamily(LB4, LB6, (lb) => ['nat', 'ISTIO_OUTPUT', [oif('lo'), dst(lb, true), tcp, skip, owner(by, id)], jump('ISTIO_IN_REDIRECT')]);
      // The app calling itself over lo is not captured, unless loopback is explicitly included.
      if (!includesLoopback) {
        add('nat', 'ISTIO_OUTPUT', c.dnsCapture
          ? [oif('lo'), tcp, dport('tcp', [53], true), owner(by, id, true)]
          : [oif('lo'), owner(by, id, true)], RETURN);
      }
      // Never capture the proxy's own traffic (any protocol).
      add('nat', 'ISTIO_OUTPUT', [owner(by, id)], RETURN);
    }
  }

  if (c.ownerGroups.except) {
    for (const g of c.ownerGroups.values) add('nat', 'ISTIO_OUTPUT', [owner('gid', g)], RETURN);
  } else {
    add('nat', 'ISTIO_OUTPUT', c.ownerGroups.values.map((g) => owner('gid', g, true)), RETURN);
  }

  if (c.dnsCapture) {
    // The plugin always captures all DNS (CaptureAllDNS = RedirectDNS).
    add('raw', 'OUTPUT', [], jump('ISTIO_OUTPUT_DNS'));
    add('nat', 'ISTIO_OUTPUT', [], jump('ISTIO_OUTPUT_DNS'));
    add('nat', 'ISTIO_OUTPUT_DNS', [tcp, dport('tcp', [53])], { kind: 'redirect', port: SIDECAR_DNS_PORT });
    add('nat', 'ISTIO_OUTPUT_DNS', [udp, dport('udp', [53])], { kind: 'redirect', port: SIDECAR_DNS_PORT, toPortFlag: true });
    // Conntrack zones: proxy ↔ upstream resolvers in 1, app ↔ proxy in 2.
    for (const by of ['uid', 'gid'] as const) {
      for (const id of by === 'uid' ? c.proxyUids : c.proxyGids) {
        add('raw', 'ISTIO_OUTPUT_DNS', [udp, dport('udp', [53]), owner(by, id)], { kind: 'ct-zone', zone: 1 });
        add('raw', 'ISTIO_OUTPUT_DNS', [udp, sport('udp', SIDECAR_DNS_PORT), owner(by, id)], { kind: 'ct-zone', zone: 2 });
      }
    }
    add('raw', 'PREROUTING', [], jump('ISTIO_INBOUND'));
    add('raw', 'ISTIO_OUTPUT_DNS', [udp, dport('udp', [53])], { kind: 'ct-zone', zone: 2 });
    add('raw', 'ISTIO_INBOUND', [udp, sport('udp', 53)], { kind: 'ct-zone', zone: 1 });
  }

  // Localhost (Envoy-aware apps, container to container) is never captured.
  perFamily(LB4, LB6, (lb) => ['nat', 'ISTIO_OUTPUT', [dst(lb)], RETURN]);
  for (const cidr of c.excludeOutboundCidrs) push(cidrFamily(cidr), 'nat', 'ISTIO_OUTPUT', [dst(cidr)], RETURN);

  if (c.includeOutboundPorts === '*') {
    // Istio would write `--dport *`; including every port means redirecting all TCP.
    add('nat', 'ISTIO_OUTPUT', [tcp], jump('ISTIO_REDIRECT'));
  } else {
    for (const p of c.includeOutboundPorts) add('nat', 'ISTIO_OUTPUT', [tcp, dport('tcp', [p])], jump('ISTIO_REDIRECT'));
  }

  if (include === '*') {
    add('nat', 'ISTIO_OUTPUT', [], jump('ISTIO_REDIRECT'));
    for (const name of c.rerouteVirtualInterfaces) push('any', 'nat', 'PREROUTING', [iif(name)], jump('ISTIO_REDIRECT'), 1);
  } else {
    for (const fam of [4, 6] as const) {
      for (const cidr of includeCidrs.filter((x) => cidrFamily(x) === fam)) {
        for (const name of c.rerouteVirtualInterfaces) push(fam, 'nat', 'PREROUTING', [iif(name), dst(cidr)], jump('ISTIO_REDIRECT'), 1);
        push(fam, 'nat', 'ISTIO_OUTPUT', [dst(cidr)], jump('ISTIO_REDIRECT'));
      }
    }
  }

  if (tproxy) {
    // Keep the mark Envoy's original_src listener filter set, across the connection.
    add('mangle', 'PREROUTING', [tcp, mark(SIDECAR_TPROXY_MARK)], { kind: 'connmark-save' });
    add('mangle', 'OUTPUT', [tcp, oif('lo'), mark(SIDECAR_TPROXY_MARK)], RETURN);
    for (const by of ['uid', 'gid'] as const) {
      for (const id of by === 'uid' ? c.proxyUids : c.proxyGids) {
        // Envoy outbound → Envoy inbound over lo gets 1338, so ISTIO_INBOUND captures it.
        perFamily(LB4, LB6, (lb) => ['mangle', 'OUTPUT', [dst(lb, true), tcp, oif('lo'), owner(by, id)],
          { kind: 'mark-set', value: SIDECAR_OUTBOUND_MARK }]);
      }
    }
    add('mangle', 'OUTPUT', [tcp, { kind: 'connmark', value: SIDECAR_TPROXY_MARK }], { kind: 'connmark-restore' });
    push('any', 'mangle', 'ISTIO_INBOUND', [tcp, mark(SIDECAR_TPROXY_MARK)], RETURN, 1);
    push(4, 'mangle', 'ISTIO_INBOUND', [tcp, src('127.0.0.6/32'), iif('lo')], RETURN, 2);
    push(6, 'mangle', 'ISTIO_INBOUND', [tcp, src('::6/128'), iif('lo')], RETURN, 2);
    push('any', 'mangle', 'ISTIO_INBOUND', [tcp, iif('lo'), mark(SIDECAR_OUTBOUND_MARK, true)], RETURN, 3);
  }

  return {
    kind: 'sidecar',
    families,
    tables: sidecarTables(),
    rules,
    routes: tproxy
      ? families.map((family) => ({
        family, type: 'local', dst: family === 4 ? '0.0.0.0/0' : '::/0', dev: 'lo', table: SIDECAR_TPROXY_ROUTE_TABLE, scope: 'host',
      }))
      : [],
    policyRules: tproxy ? families.map((family) => ({ family, fwmark: SIDECAR_TPROXY_MARK, table: SIDECAR_TPROXY_ROUTE_TABLE })) : [],
    // Source address of inbound passthrough on IPv6 (v4 has all of 127/8 on lo).
    addresses: c.ipv6 ? [{ family: 6, address: '::6/128', dev: 'lo' }] : [],
  };
}
