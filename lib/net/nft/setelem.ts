// nf_tables set elements over netlink, encoded directly: the node agent adds
// and removes one pod's IPs in the probe sets on every enrollment, and going
// through the script compiler for two elements costs more than the kernel
// work. One batch per call, atomic; comments use libnftnl's udata layout so
// `nft list` shows them.
import { Attrs, MsgWriter, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST, type RawMsg } from '../nl/codec.js';
import { NFNL_SUBSYS_NFTABLES, nftBatch, nfgenmsg, nfnlType } from '../nl/nfnl.js';
import type { NlTransport } from '../nl/transport.js';
import { NFT_MSG } from './ir.js';

const SUBSYS = NFNL_SUBSYS_NFTABLES;
const { NEWSETELEM, GETSETELEM, DELSETELEM } = NFT_MSG;
const LIST = { TABLE: 1, SET: 2, ELEMENTS: 3 } as const;
const ELEM = { KEY: 1, USERDATA: 6 } as const;
const NFTA_LIST_ELEM = 1;
const NFTA_DATA_VALUE = 1;
const UDATA_COMMENT = 0;  // NFTNL_UDATA_SET_ELEM_COMMENT
const MAX_COMMENT = 127;

export interface SetElemOp {
  op: 'add' | 'delete';
  set: string;
  /** The key in network byte order (an IPv4/IPv6 address for ipv4_addr/ipv6_addr sets). */
  key: Buffer;
  comment?: string;
  /** add only: fail with EEXIST (aborting the batch) if the element is there. */
  exclusive?: boolean;
}

export interface SetElem {
  key: Buffer;
  comment?: string;
}

function udata(comment: string): Buffer {
  const text = Buffer.from(`${comment}\0`);
  if (text.length - 1 > MAX_COMMENT || comment.includes('\0')) throw new RangeError(`set element comment longer than ${MAX_COMMENT} bytes`);
  return Buffer.concat([Buffer.from([UDATA_COMMENT, text.length]), text]);
}

/**
 * Bytes of elements per message: the element list is one attribute, whose
 * length is 16 bits (an element with a pod-UID comment takes about 80 bytes,
 * one with the longest comment about 170).
 */
const MAX_LIST_BYTES = 60_000;
const align4 = (n: number) => (n + 3) & ~3;
/** An element's bytes in the list: its nest, the key's nest and value, the comment's udata. */
const elemBytes = (o: SetElemOp) =>
  8 + 4 + align4(o.key.length) + (o.op === 'add' && o.comment !== undefined ? 4 + align4(3 + Buffer.byteLength(o.comment)) : 0);

/**
 * One atomic batch of element additions/deletions in one table, applied in
 * order. Consecutive ops of one kind on one set share a message (as nft
 * sends them), so a refill of thousands of IPs is a few messages, not one
 * per element; only the last message asks for an ACK.
 */
export function setElemBatch(family: number, table: string, ops: SetElemOp[]): Buffer {
  if (ops.length === 0) throw new RangeError('setElemBatch: no operations');
  const sameKind = (a: SetElemOp, b: SetElemOp) => a.op === b.op && a.set === b.set && !!a.exclusive === !!b.exclusive;
  const groups: Array<{ ops: SetElemOp[]; bytes: number }> = [];
  for (const o of ops) {
    const last = groups[groups.length - 1];
    const n = elemBytes(o);
    if (last && last.bytes + n <= MAX_LIST_BYTES && sameKind(last.ops[0]!, o)) {
      last.ops.push(o);
      last.bytes += n;
    } else {
      groups.push({ ops: [o], bytes: n });
    }
  }
  // A pod's IPs share its UID: each comment's udata is built once per batch.
  const udatas = new Map<string, Buffer>();
  const msgs = groups.map((group, i) => {
    const o = group.ops[0]!;
    const type = nfnlType(SUBSYS, o.op === 'add' ? NEWSETELEM : DELSETELEM);
    const flags = NLM_F_REQUEST | (o.op === 'add' ? NLM_F_CREATE : 0) | (o.op === 'add' && o.exclusive ? NLM_F_EXCL : 0) |
      (i === groups.length - 1 ? NLM_F_ACK : 0);
    // Sized for the whole list up front (headers, names, elements): no regrowth while writing.
    const w = new MsgWriter(type, flags, 128 + table.length + o.set.length + group.bytes).raw(nfgenmsg(family))
      .str(LIST.TABLE, table).str(LIST.SET, o.set);
    w.begin(LIST.ELEMENTS, true);
    for (const e of group.ops) {
      w.begin(NFTA_LIST_ELEM, true);
      w.begin(ELEM.KEY, true).attr(NFTA_DATA_VALUE, e.key).end();
      if (e.op === 'add' && e.comment !== undefined) {
        let u = udatas.get(e.comment);
        if (!u) udatas.set(e.comment, (u = udata(e.comment)));
        w.attr(ELEM.USERDATA, u);
      }
      w.end();
    }
    w.end();
    return w.finish();
  });
  return nftBatch(msgs);
}

export async function sendSetElems(nf: NlTransport, family: number, table: string, ops: SetElemOp[]): Promise<void> {
  if (ops.length) await nf.request(setElemBatch(family, table, ops), 'NFT_MSG_NEWSETELEM', true);
}

function parseElems(msgs: RawMsg[]): SetElem[] {
  const out: SetElem[] = [];
  for (const m of msgs) {
    if ((m.type & 0xff) !== NEWSETELEM) continue;
    const list = new Attrs(m.body, 4).nested(LIST.ELEMENTS);
    for (const [, elem] of list?.all ?? []) {
      const e = new Attrs(elem);
      const key = e.nested(ELEM.KEY)?.raw(NFTA_DATA_VALUE);
      if (!key) continue;
      const el: SetElem = { key: Buffer.from(key) };
      const u = e.raw(ELEM.USERDATA);
      // udata TLVs: type, length, value; the comment is NUL-terminated.
      for (let off = 0; u && off + 2 <= u.length; off += 2 + u[off + 1]!) {
        if (u[off] === UDATA_COMMENT) el.comment = u.toString('utf8', off + 2, off + 2 + u[off + 1]!).replace(/\0.*$/s, '');
      }
      out.push(el);
    }
  }
  return out;
}

/** The elements of a set (ENOENT when the table or set is missing). */
export async function listSetElems(nf: NlTransport, family: number, table: string, set: string): Promise<SetElem[]> {
  const msg = new MsgWriter(nfnlType(SUBSYS, GETSETELEM), NLM_F_REQUEST | NLM_F_DUMP).raw(nfgenmsg(family))
    .str(LIST.TABLE, table).str(LIST.SET, set).finish();
  return parseElems(await nf.dump(msg, 'NFT_MSG_GETSETELEM'));
}

