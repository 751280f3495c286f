// The rule model: what podwire programs into a netns, as data. One model
// feeds both renderers (iptables-restore text, nft script) and the
// apply/verify/remove engine. Matches and targets are structured; the few fields
// named `nft`/`module`/`toPortFlag`/`hex` only choose between spellings that
// the kernel treats identically, so the rendered text is byte-identical to
// what Istio writes for the same configuration.

import type { Family } from '../net/ip.js';

export type { Family };
/** `any` = the rule has no address of either family and exists in both. */
export type RuleFamily = Family | 'any';
export type TableName = 'filter' | 'mangle' | 'nat' | 'raw';
export type Proto = 'tcp' | 'udp';
export type Dir = 'src' | 'dst';

/**
 * How the nft text spells a masked mark match (all mean the same):
 * `mark` → `mark and M != V`, `wide` → `mark and M  != V` (Istio's v4 inbound
 * rule has the double space), `meta` → `meta mark and M == V`,
 * `meta-amp` → `meta mark & M == V`.
 */
export type NftMarkSpelling = 'mark' | 'wide' | 'meta' | 'meta-amp';

export type Match =
  /** `-s`/`-d`; nft `ip saddr`/`ip6 daddr`. `cidr` is written as given (an address or a prefix). */
  | { kind: 'addr'; dir: Dir; cidr: string; not?: boolean }
  /** `-i`/`-o`; nft `iifname`/`oifname`. */
  | { kind: 'iface'; dir: 'in' | 'out'; name: string; not?: boolean }
  /** `-p tcp` (`module`: followed by `-m tcp`); nft `meta l4proto tcp`, left out when a port match says it. */
  | { kind: 'proto'; proto: Proto; module?: boolean }
  /**
   * `--dport N` (`module`: `-m udp --dport N`; several ports: `-m multiport --dports a,b`);
   * nft `tcp dport N` / `tcp dport != { a, b }`.
   */
  | { kind: 'port'; dir: Dir; proto: Proto; ports: number[]; not?: boolean; module?: boolean }
  /** `-m mark --mark V[/M]`; nft `mark V` or a masked form (see NftMarkSpelling). */
  | { kind: 'mark'; value: number; mask?: number; not?: boolean; hex?: boolean; nft?: NftMarkSpelling }
  /** `-m connmark --mark V[/M]`; nft `ct mark ...`. */
  | { kind: 'connmark'; value: number; mask?: number; not?: boolean; hex?: boolean }
  /** `-m owner --uid-owner X`; nft `skuid X` (gid: `skgid`). X may be a name (groups). */
  | { kind: 'owner'; by: 'uid' | 'gid'; id: string; not?: boolean }
  /**
   * The packet comes from a local socket: `-m owner --socket-exists`. nft has no
   * such match; Istio uses the kubelet's UID there (`skuid`), so `nftUid` is needed for nft.
   */
  | { kind: 'local-socket'; nftUid?: number }
  /** `-m set --match-set NAME dst`; nft `ip daddr @NAME`. */
  | { kind: 'set'; dir: Dir; name: string }
  /** `-m conntrack --ctstate A,B`; nft `ct state a,b`. */
  | { kind: 'ctstate'; states: Array<'INVALID' | 'NEW' | 'RELATED' | 'ESTABLISHED'> };

export type Target =
  | { kind: 'jump'; chain: string }
  | { kind: 'accept' }
  | { kind: 'return' }
  | { kind: 'drop' }
  /** `REDIRECT --to-ports N` (`toPortFlag` writes `--to-port`); nft `redirect to :N`. */
  | { kind: 'redirect'; port: number; toPortFlag?: boolean }
  /** `TPROXY --tproxy-mark M/MASK --on-port N`; nft `tproxy ip to :N meta mark set M accept`. */
  | { kind: 'tproxy'; port: number; mark: number; mask: number }
  /** `MARK --set-mark V`; nft `meta mark set V`. */
  | { kind: 'mark-set'; value: number; hex?: boolean }
  /** `CONNMARK --set-xmark V/M`; nft `ct mark set ct mark & ~M | V`. */
  | { kind: 'connmark-set'; value: number; mask: number; hex?: boolean }
  /** `CONNMARK --save-mark`; nft `ct mark set mark`. */
  | { kind: 'connmark-save' }
  /** `CONNMARK --restore-mark [--nfmask M --ctmask M]`; nft `meta mark set ct mark`. */
  | { kind: 'connmark-restore'; nfmask?: number; ctmask?: number }
  /** `CT --zone N`; nft `ct zone set N`. */
  | { kind: 'ct-zone'; zone: number }
  /** `SNAT --to-source A`; nft `snat to A`. */
  | { kind: 'snat'; to: string };

export interface Rule {
  table: TableName;
  /** iptables chain name (`ISTIO_OUTPUT`, `PREROUTING`); the table maps it to nft. */
  chain: string;
  family: RuleFamily;
  /** 1-based insert position (`-I CHAIN N`); absent = append. */
  insert?: number;
  matches: Match[];
  target: Target;
  nft?: {
    /** Order of `matches` in the nft text when it differs (indices into matches). */
    order?: number[];
    /** false: no `counter` statement (Istio's ambient jump rules have none). */
    counter?: boolean;
  };
}

export interface BaseChain {
  type: 'filter' | 'nat' | 'route';
  hook: 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';
  priority: number;
}

export interface ChainDef {
  /** iptables name. */
  name: string;
  /** nft name, or null when the chain only exists as iptables glue (a jump nft does not need). */
  nft: string | null;
  /** nft base chain (hooked); iptables uses its builtin chain of the same hook. */
  base?: BaseChain;
}

export interface TableDef {
  name: TableName;
  /** nft table (family inet). */
  nft: string;
  /** Every chain the table may use, in the order nft declares them. */
  chains: ChainDef[];
}

/** `ip route replace local <dst> dev lo table N scope host`. */
export interface RouteSpec {
  family: Family;
  type: 'local';
  dst: string;
  dev: string;
  table: number;
  scope: 'host';
}

/** `ip rule add fwmark V[/M] lookup N [pref P]`. */
export interface PolicyRuleSpec {
  family: Family;
  fwmark: number;
  /** Absent = the kernel's default (all bits). */
  fwmask?: number;
  table: number;
  /** Absent = the kernel picks one. */
  priority?: number;
}

/** `ip addr add <address> dev <dev>` (EEXIST tolerated). */
export interface AddressSpec {
  family: Family;
  address: string;
  dev: string;
}

export type RuleSetKind = 'inpod' | 'hostprobe' | 'sidecar';

export interface RuleModel {
  kind: RuleSetKind;
  /** 4 always; 6 when the configuration enables it. */
  families: Family[];
  /** nft emission order (Istio: nat, mangle, raw). */
  tables: TableDef[];
  /** Insertion order. */
  rules: Rule[];
  routes: RouteSpec[];
  policyRules: PolicyRuleSpec[];
  addresses: AddressSpec[];
}

// Constants shared with ztunnel and Istio (spec §6.1).
export const INPOD_MARK = 0x539;
export const INPOD_MASK = 0xfff;
export const INPOD_TPROXY_MARK = 0x111;
export const INPOD_TPROXY_MASK = 0xfff;
export const INPOD_RESTORE_MASK = 0xffffffff;
export const ROUTE_TABLE_INBOUND = 100;
export const INPOD_RULE_PRIORITY = 32764;
export const ZTUNNEL_OUTBOUND_PORT = 15001;
export const ZTUNNEL_INBOUND_PLAINTEXT_PORT = 15006;
export const ZTUNNEL_INBOUND_PORT = 15008;
export const DNS_CAPTURE_PORT = 15053;
export const PROBE_IPSET = 'istio-inpod-probes';
export const DEFAULT_HOST_PROBE_SNAT_IP = '169.254.7.127';
export const DEFAULT_HOST_PROBE_SNAT_IPV6 = 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff';

// Sidecar mode (spec §2.6–2.7).
export const SIDECAR_PROXY_PORT = 15001;
export const SIDECAR_INBOUND_CAPTURE_PORT = 15006;
export const SIDECAR_TUNNEL_PORT = 15008;
export const SIDECAR_TPROXY_MARK = 1337;
export const SIDECAR_OUTBOUND_MARK = 1338;
export const SIDECAR_TPROXY_ROUTE_TABLE = 133;
export const SIDECAR_DNS_PORT = 15053;
export const DEFAULT_PROXY_UID = 1337;
export const DEFAULT_PROXY_GID = 1337;

/** iptables builtin chains and targets (never declared with -N). */
export const IPTABLES_BUILTINS: ReadonlySet<string> = new Set([
  'INPUT', 'OUTPUT', 'FORWARD', 'PREROUTING', 'POSTROUTING', 'ACCEPT', 'RETURN', 'DROP',
]);

/** Rules of one family as iptables sees them (`any` rules belong to both). */
export function rulesOf(model: RuleModel, family: Family): Rule[] {
  if (!model.families.includes(family)) return [];
  return model.rules.filter((r) => r.family === 'any' || r.family === family);
}
