// The nf_tables batch as data, exactly as native/nft/nft_ir.h reads it: the
// commands of one transaction and the kernel expressions inside rules.
// Numbers are the kernel's (linux/netfilter/nf_tables.h, linux/netfilter.h).

import { NFPROTO_INET, NFPROTO_IPV4, NFPROTO_IPV6 } from '../nl/nfnl.js';

/** nft's family names → NFPROTO_* (lib/net/nl/nfnl.ts). */
export const NFPROTO = { inet: NFPROTO_INET, ip: NFPROTO_IPV4, ip6: NFPROTO_IPV6 } as const;
export type NftIrFamily = keyof typeof NFPROTO;

export interface NftExpr {
  type: 'meta' | 'ct' | 'payload' | 'cmp' | 'bitwise' | 'range' | 'immediate' | 'lookup' | 'counter' | 'nat' | 'redir' | 'tproxy';
  /** meta/ct key, cmp/range op, immediate verdict, nat type. */
  key?: string;
  dreg?: number;
  sreg?: number;
  base?: 'll' | 'nh' | 'th';
  offset?: number;
  len?: number;
  data?: Buffer;
  data2?: Buffer;
  mask?: Buffer;
  xor?: Buffer;
  chain?: string;
  set?: string;
  setId?: number;
  flags?: number;
  family?: number;
  regAddr?: number;
  regPort?: number;
}

export interface NftElem {
  key: Buffer;
  comment?: string;
  timeoutMs?: number;
}

export type NftOp =
  | 'newtable' | 'deltable' | 'flushtable'
  | 'newchain' | 'delchain' | 'flushchain'
  | 'newrule'
  | 'newset' | 'delset' | 'flushset'
  | 'newelem' | 'delelem';

export interface NftCommand {
  op: NftOp;
  family: number;
  table: string;
  /** Chain or set. */
  name?: string;
  excl?: boolean;
  comment?: string;
  tableFlags?: number;
  base?: boolean;
  chainType?: string;
  hook?: number;
  priority?: number;
  policy?: number;
  device?: string;
  exprs?: NftExpr[];
  append?: boolean;
  position?: number;
  ruleId?: number;
  positionId?: number;
  setFlags?: number;
  keyType?: number;
  keyLen?: number;
  setId?: number;
  size?: number;
  timeoutMs?: number;
  elems?: NftElem[];
}

/** A table/chain/rule/set/element message decoded by the addon (batch or dump). */
export interface NftObject {
  kind: 'table' | 'chain' | 'rule' | 'set' | 'elem' | 'deltable' | 'delchain' | 'delrule' | 'delset' | 'delelem';
  nlFlags: number;
  family: number;
  table: string;
  name: string;
  handle: bigint;
  comment?: string;
  flags: number;
  base?: boolean;
  chainType?: string;
  hook?: number;
  priority?: number;
  device?: string;
  policy?: number;
  /** Rules: one canonical line per expression. */
  exprs?: string[];
  position?: bigint;
  ruleId?: number;
  positionId?: number;
  keyType?: number;
  keyLen?: number;
  size?: number;
  setId: number;
  elems?: Array<{ key: Buffer; comment?: string }>;
}

// nf_tables message types (enum nf_tables_msg_types).
export const NFT_MSG = {
  NEWTABLE: 0, GETTABLE: 1, DELTABLE: 2, NEWCHAIN: 3, GETCHAIN: 4, DELCHAIN: 5,
  NEWRULE: 6, GETRULE: 7, DELRULE: 8, NEWSET: 9, GETSET: 10, DELSET: 11,
  NEWSETELEM: 12, GETSETELEM: 13, DELSETELEM: 14, NEWGEN: 15, GETGEN: 16,
} as const;

/** NFTA_GEN_* (the NEWGEN reply): the netns's ruleset generation, a big-endian u32. */
export const NFTA_GEN_ID = 1;
