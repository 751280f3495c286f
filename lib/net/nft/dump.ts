// nf_tables dumps over a netlink transport, decoded by the addon into the
// same objects a compiled batch decodes to (so verify compares like with like).
import { native } from '../binding.js';
import type { Netns } from '../netns/netns.js';
import { NFPROTO_UNSPEC } from '../nl/nfnl.js';
import { retryInterruptedDump, type NlTransport } from '../nl/transport.js';
import { NFT_MSG, type NftObject } from './ir.js';
import { decodeRecords, type NftRecord } from './records.js';

const GET_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(NFT_MSG).filter(([k]) => k.startsWith('GET')).map(([k, v]) => [v, `NFT_MSG_${k}`]),
);

/**
 * Runs one NFT_MSG_GET* dump (family 0 = every family; `table` narrows rule
 * and set dumps; GETSETELEM needs table and set) and decodes the replies.
 * An interrupted dump is re-run a bounded number of times (retryInterruptedDump).
 */
export function dumpObjects(nf: NlTransport, msg: number, family: number, table?: string, set?: string): Promise<NftObject[]> {
  const op = GET_NAMES[msg] ?? `NFT_MSG_${msg}`;
  return retryInterruptedDump(async () => {
    const data = await nf.request(native().nftDumpRequest(msg, family, table, set), op);
    return data ? native().nftDecode(data) as NftObject[] : [];  // the decoder builds this IR
  });
}

/** The same dump as dumpObjects, decoded only into what verify compares (records.ts). */
export function dumpRecords(nf: NlTransport, msg: number, family: number, table?: string): Promise<NftRecord[]> {
  const op = GET_NAMES[msg] ?? `NFT_MSG_${msg}`;
  return retryInterruptedDump(async () => {
    const data = await nf.request(native().nftDumpRequest(msg, family, table), op);
    return data ? decodeRecords(data) : [];
  });
}

/** One nf_tables table: its NFPROTO_* family number and name. */
export interface NftTableId {
  family: number;
  name: string;
}

/**
 * The nf_tables tables of a netns, every family (iptables-nft's `ip`/`ip6`
 * tables included), from one NFT_MSG_GETTABLE dump over the netns's cached
 * netfilter socket: no `nft` process.
 */
export async function listTables(ns: Netns): Promise<NftTableId[]> {
  const nf = (await ns.netlink()).nfnetlink;
  const objs = await dumpObjects(nf, NFT_MSG.GETTABLE, NFPROTO_UNSPEC);
  return objs.filter((o) => o.kind === 'table').map((o) => ({ family: o.family, name: o.table }));
}
