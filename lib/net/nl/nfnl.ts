// nfnetlink framing and the ipset protocol's numbers, from the kernel UAPI
// headers linux/netfilter/nfnetlink.h, linux/netfilter.h (NFPROTO_*) and
// linux/netfilter/ipset/ip_set.h (protocol 7), and the nf_tables batch frame.
// The one home of these numbers: nf_tables' own (message types, expression
// numbers) are in lib/net/nft/ir.ts. The encoders live next to their users.
import { MsgWriter, NLM_F_REQUEST } from './codec.js';

export const NETLINK_NETFILTER = 12;
export const NFNETLINK_V0 = 0;
export const NFNL_SUBSYS_IPSET = 6;

/** Set on attributes whose payload is big-endian; ipset checks it on every number and address. */
export const NLA_F_NET_BYTEORDER = 0x4000;

export const NFPROTO_UNSPEC = 0;
/** nf_tables' `inet` family (both IPv4 and IPv6). */
export const NFPROTO_INET = 1;
export const NFPROTO_IPV4 = 2;
export const NFPROTO_IPV6 = 10;

/** nfnetlink message type: subsystem in the high byte, command in the low byte. */
export const nfnlType = (subsys: number, cmd: number): number => (subsys << 8) | cmd;

/** The 4-byte nfgenmsg header: family, version, res_id (big-endian). */
export function nfgenmsg(family: number, resId = 0): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt8(family, 0);
  b.writeUInt8(NFNETLINK_V0, 1);
  b.writeUInt16BE(resId, 2);
  return b;
}

export const NFGENMSG_LEN = 4;

export const NFNL_SUBSYS_NFTABLES = 10;
const NFNL_MSG_BATCH_BEGIN = 0x10;
const NFNL_MSG_BATCH_END = 0x11;

/**
 * Wraps nf_tables messages in BATCH_BEGIN/END: the kernel applies them as
 * one transaction (all or nothing). The whole buffer must go in one sendmsg.
 */
export function nftBatch(messages: Buffer[]): Buffer {
  const frame = (type: number) => new MsgWriter(type, NLM_F_REQUEST).raw(nfgenmsg(NFPROTO_UNSPEC, NFNL_SUBSYS_NFTABLES)).finish();
  return Buffer.concat([frame(NFNL_MSG_BATCH_BEGIN), ...messages, frame(NFNL_MSG_BATCH_END)]);
}

export const IPSET_PROTOCOL = 7;
export const IPSET_MAXNAMELEN = 32;
export const IPSET_MAX_COMMENT_SIZE = 255;

export const IPSET_CMD = {
  PROTOCOL: 1,
  CREATE: 2,
  DESTROY: 3,
  FLUSH: 4,
  RENAME: 5,
  SWAP: 6,
  LIST: 7,
  SAVE: 8,
  ADD: 9,
  DEL: 10,
  TEST: 11,
  HEADER: 12,
  TYPE: 13,
} as const;

/** `IPSET_CMD_ADD` etc.: the op names NetError carries. */
export const IPSET_CMD_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(IPSET_CMD).map(([k, v]) => [v, `IPSET_CMD_${k}`]),
);

/** Command-level attributes. */
export const IPSET_ATTR = {
  PROTOCOL: 1,
  SETNAME: 2,
  TYPENAME: 3,
  SETNAME2: 3,
  REVISION: 4,
  FAMILY: 5,
  FLAGS: 6,
  DATA: 7,
  ADT: 8,
  LINENO: 9,
  PROTOCOL_MIN: 10,
  REVISION_MIN: 10,
  INDEX: 11,
} as const;

/** Attributes inside IPSET_ATTR_DATA (create and add/del/test data). */
export const IPSET_DATA = {
  IP: 1,
  IP_TO: 2,
  CIDR: 3,
  PORT: 4,
  PORT_TO: 5,
  TIMEOUT: 6,
  PROTO: 7,
  CADT_FLAGS: 8,
  LINENO: 9,
  MARK: 10,
  MARKMASK: 11,
  // create-only
  INITVAL: 17,
  HASHSIZE: 18,
  MAXELEM: 19,
  NETMASK: 20,
  BUCKETSIZE: 21,
  RESIZE: 22,
  SIZE: 23,
  // kernel-only (list)
  ELEMENTS: 24,
  REFERENCES: 25,
  MEMSIZE: 26,
  // add/del/test only
  ETHER: 17,
  NAME: 18,
  NAMEREF: 19,
  IP2: 20,
  CIDR2: 21,
  IP2_TO: 22,
  IFACE: 23,
  BYTES: 24,
  PACKETS: 25,
  COMMENT: 26,
  SKBMARK: 27,
  SKBPRIO: 28,
  SKBQUEUE: 29,
  PAD: 30,
} as const;

/** Inside IPSET_DATA.IP. */
export const IPSET_ATTR_IPADDR_IPV4 = 1;
export const IPSET_ATTR_IPADDR_IPV6 = 2;

/** Command-level flags (IPSET_ATTR_FLAGS). */
export const IPSET_FLAG_LIST_SETNAME = 1 << 1;
export const IPSET_FLAG_LIST_HEADER = 1 << 2;

/** CADT flag (IPSET_DATA.CADT_FLAGS): the set keeps a comment per entry. */
export const IPSET_FLAG_WITH_COMMENT = 1 << 4;
