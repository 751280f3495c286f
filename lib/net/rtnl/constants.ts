// rtnetlink numbers from linux/rtnetlink.h, linux/if_link.h, linux/if_addr.h,
// linux/fib_rules.h (UAPI; stable ABI).
export const NETLINK_ROUTE = 0;

export const RTM = {
  NEWLINK: 16, DELLINK: 17, GETLINK: 18,
  NEWADDR: 20, DELADDR: 21, GETADDR: 22,
  NEWROUTE: 24, DELROUTE: 25, GETROUTE: 26,
  NEWRULE: 32, DELRULE: 33, GETRULE: 34,
} as const;

export const IFLA = {
  ADDRESS: 1, BROADCAST: 2, IFNAME: 3, MTU: 4, LINK: 5, MASTER: 10, TXQLEN: 13, OPERSTATE: 16,
  LINKINFO: 18, AF_SPEC: 26, NET_NS_FD: 28, EXT_MASK: 29, GROUP: 27, LINK_NETNSID: 37,
} as const;
/** IFLA_AF_SPEC → AF_INET6 → IFLA_INET6_CONF: the link's IPv6 devconf as s32s (linux/ipv6.h). */
export const IFLA_INET6_CONF = 2;
export const DEVCONF_DISABLE_IPV6 = 26;
export const IFLA_INFO = { KIND: 1, DATA: 2, SLAVE_KIND: 4 } as const;
export const VETH_INFO_PEER = 1;

export const IFF: Record<string, number> = {
  UP: 0x1, BROADCAST: 0x2, DEBUG: 0x4, LOOPBACK: 0x8, POINTOPOINT: 0x10, NOTRAILERS: 0x20,
  RUNNING: 0x40, NOARP: 0x80, PROMISC: 0x100, ALLMULTI: 0x200, MASTER: 0x400, SLAVE: 0x800,
  MULTICAST: 0x1000, PORTSEL: 0x2000, AUTOMEDIA: 0x4000, DYNAMIC: 0x8000, LOWER_UP: 0x10000,
  DORMANT: 0x20000, ECHO: 0x40000,
};
export const OPERSTATES = ['UNKNOWN', 'NOTPRESENT', 'DOWN', 'LOWERLAYERDOWN', 'TESTING', 'DORMANT', 'UP'] as const;

export const IFA = { ADDRESS: 1, LOCAL: 2, LABEL: 3, BROADCAST: 4, CACHEINFO: 6, FLAGS: 8 } as const;
export const IFA_F: Record<string, number> = {
  secondary: 0x01, nodad: 0x02, optimistic: 0x04, dadfailed: 0x08, homeaddress: 0x10,
  deprecated: 0x20, tentative: 0x40, permanent: 0x80, managetempaddr: 0x100, noprefixroute: 0x200,
  mcautojoin: 0x400, stableprivacy: 0x800,
};

export const RTA = { DST: 1, SRC: 2, IIF: 3, OIF: 4, GATEWAY: 5, PRIORITY: 6, PREFSRC: 7, TABLE: 15, PREF: 20 } as const;

export const ROUTE_TYPES = ['unspec', 'unicast', 'local', 'broadcast', 'anycast', 'multicast', 'blackhole',
  'unreachable', 'prohibit', 'throw', 'nat', 'xresolve'] as const;
export type RouteType = (typeof ROUTE_TYPES)[number];

export const SCOPES: Record<string, number> = { universe: 0, site: 200, link: 253, host: 254, nowhere: 255 };
export const PROTOCOLS: Record<number, string> = {
  0: 'unspec', 1: 'redirect', 2: 'kernel', 3: 'boot', 4: 'static', 8: 'gated', 9: 'ra', 10: 'mrt', 11: 'zebra',
  12: 'bird', 13: 'dnrouted', 14: 'xorp', 15: 'ntk', 16: 'dhcp', 42: 'babel', 186: 'bgp', 187: 'isis',
  188: 'ospf', 189: 'rip', 192: 'eigrp',
};
export const TABLES: Record<string, number> = { unspec: 0, default: 253, main: 254, local: 255 };

export const FRA = {
  DST: 1, SRC: 2, IIFNAME: 3, GOTO: 4, PRIORITY: 6, FWMARK: 10, FLOW: 11, SUPPRESS_IFGROUP: 13,
  SUPPRESS_PREFIXLEN: 14, TABLE: 15, FWMASK: 16, OIFNAME: 17, L3MDEV: 19, PROTOCOL: 21,
} as const;
export const FR_ACT = { TO_TBL: 1, GOTO: 2, NOP: 3, BLACKHOLE: 6, UNREACHABLE: 7, PROHIBIT: 8 } as const;
export const FIB_RULE_INVERT = 0x2;
export const RULE_ACTIONS: Record<number, string> = {
  1: 'lookup', 2: 'goto', 3: 'nop', 6: 'blackhole', 7: 'unreachable', 8: 'prohibit',
};

const SCOPE_NAMES = new Map(Object.entries(SCOPES).map(([k, v]) => [v, k]));

/** iproute2's name of a scope number (the number itself when it has none). */
export function scopeName(n: number): string {
  return SCOPE_NAMES.get(n) ?? String(n);
}

/** The names of the bits set in `bits`, from a name → bit table's entries (allocates only the result). */
export function flagNames(table: ReadonlyArray<readonly [string, number]>, bits: number): string[] {
  const out: string[] = [];
  for (const [name, bit] of table) if (bits & bit) out.push(name);
  return out;
}
