// Copying nf_tables state from one netns to others over netlink: dump the
// tables, chains and rules of a reference netns once, turn the dump into one
// nfnetlink batch (handles and use counts dropped), and replay that batch
// into each target netns as a single atomic transaction. The objects are
// byte-for-byte what the reference holds, so a ruleset written there by any
// tool — `iptables-nft-restore`'s xt-compat rules included — lands in a pod
// at the cost of one sendmsg, and reads back identically with that tool.
import { Attrs, MsgWriter, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_DUMP, NLM_F_REQUEST } from '../nl/codec.js';
import { NFNL_SUBSYS_NFTABLES, NFPROTO_UNSPEC, nftBatch, nfgenmsg, nfnlType } from '../nl/nfnl.js';
import type { Netns } from '../netns/netns.js';
import { NFT_MSG as MSG } from './ir.js';

const SUBSYS = NFNL_SUBSYS_NFTABLES;

// Attributes a dump reports that a create request must not carry (they name
// existing objects or are kernel bookkeeping): by message, attribute numbers to keep.
const KEEP: Record<number, ReadonlySet<number>> = {
  [MSG.NEWTABLE]: new Set([1 /* NAME */, 2 /* FLAGS */, 6 /* USERDATA */]),
  [MSG.NEWCHAIN]: new Set([1 /* TABLE */, 3 /* NAME */, 4 /* HOOK */, 5 /* POLICY */, 7 /* TYPE */, 12 /* USERDATA */]),
  [MSG.NEWRULE]: new Set([1 /* TABLE */, 2 /* CHAIN */, 4 /* EXPRESSIONS */, 5 /* COMPAT */, 7 /* USERDATA */]),
};

/** One object of the batch, for naming the culprit of a failure. */
export interface CloneItem {
  kind: 'table' | 'chain' | 'rule';
  family: number;
  table: string;
  name?: string;
}

export interface NftClone {
  /** BEGIN, the create messages, END: ready to send (sequence numbers are rewritten per send). */
  batch: Buffer;
  /** items[i] describes message i + 1 of the batch. */
  items: CloneItem[];
}

export class NftCloneUnsupported extends Error {
  static {
    Object.defineProperty(this.prototype, 'name', { value: 'NftCloneUnsupported', enumerable: false });
  }
}

/**
 * The protocol an xt-compat rule was created with (`-p tcp` → 6). The kernel
 * keeps it only as the rule's own expressions (payload `ip protocol` or
 * `meta l4proto`, then `cmp`), but an xt match such as `tcp` needs it again
 * (NFTA_RULE_COMPAT) when the rule is created.
 */
function compatOf(exprs: Buffer): { proto: number; inv: boolean; xt: boolean } {
  let proto = 0;
  let inv = false;
  let xt = false;
  let l4Loaded = false;
  for (const [, elem] of new Attrs(exprs).all) {
    const e = new Attrs(elem);
    const name = e.str(1);
    const data = e.nested(2);
    if (name === 'match' || name === 'target') xt = true;
    if (!data) continue;
    if (name === 'meta') l4Loaded = data.u32be(2) === 16;  // NFT_META_L4PROTO
    else if (name === 'payload') l4Loaded = data.u32be(2) === 1 && data.u32be(3) === 9 && data.u32be(4) === 1;  // ip protocol
    else if (name === 'cmp' && l4Loaded && proto === 0) {
      const value = data.nested(3)?.raw(1);
      if (value?.length === 1) {
        proto = value[0]!;
        inv = data.u32be(2) === 1;  // NFT_CMP_NEQ
      }
      l4Loaded = false;
    } else {
      l4Loaded = false;
    }
  }
  return { proto, inv, xt };
}

/**
 * A copy of a rule's expression list with every `counter` expression's
 * packets and bytes zeroed: a replayed rule starts counting from zero, and
 * two captures of the same rules compare equal whatever traffic they saw.
 */
function zeroCounters(exprs: Buffer): Buffer {
  const copy = Buffer.from(exprs);
  for (const [, elem] of new Attrs(copy).all) {
    const e = new Attrs(elem);
    if (e.str(1) !== 'counter') continue;
    for (const [, value] of e.nested(2)?.all ?? []) value.fill(0);  // NFTA_COUNTER_BYTES, _PACKETS (and padding)
  }
  return copy;
}

function rebuild(type: number, family: number, body: Buffer, flags: number): Buffer {
  const cmd = type & 0xff;
  const keep = KEEP[cmd]!;
  const w = new MsgWriter(type, NLM_F_REQUEST | NLM_F_ACK | flags, body.length + 64).raw(nfgenmsg(family));
  const attrs = new Attrs(body, 4);
  for (const [attr, payload] of attrs.all) {
    if (!keep.has(attr)) continue;
    // Nested attributes keep their NLA_F_NESTED bit as the kernel sent them.
    const rawType = body.readUInt16LE(payload.byteOffset - body.byteOffset - 2);
    w.attr(rawType, cmd === MSG.NEWRULE && attr === 4 ? zeroCounters(payload) : payload);
  }
  const exprs = cmd === MSG.NEWRULE ? attrs.raw(4) : undefined;
  if (exprs && !attrs.has(5)) {
    const c = compatOf(exprs);
    if (c.xt && c.proto) {
      w.begin(5 /* NFTA_RULE_COMPAT */, true).u32be(1, c.proto).u32be(2, c.inv ? 2 : 0).end();
    }
  }
  return w.finish();
}

/**
 * Dumps the nf_tables state of `ns` selected by `tables` (family number and
 * name; default: everything) into a replayable batch. Two captures of the
 * same state are byte-identical (handles dropped, counters zeroed), which
 * also makes a capture a cheap exact comparison. Sets are not copied:
 * a ruleset that has any throws NftCloneUnsupported (their elements and any
 * set bindings need more than a replay).
 */
export async function captureNft(ns: Netns, tables?: (family: number, name: string) => boolean): Promise<NftClone> {
  const nf = (await ns.netlink()).nfnetlink;
  const dump = async (cmd: number, op: string) => {
    const msg = new MsgWriter(nfnlType(SUBSYS, cmd), NLM_F_REQUEST | NLM_F_DUMP).raw(nfgenmsg(NFPROTO_UNSPEC)).finish();
    return nf.dump(msg, op);
  };
  const [tMsgs, cMsgs, rMsgs, sMsgs] = await Promise.all([
    dump(MSG.GETTABLE, 'NFT_MSG_GETTABLE'), dump(MSG.GETCHAIN, 'NFT_MSG_GETCHAIN'),
    dump(MSG.GETRULE, 'NFT_MSG_GETRULE'), dump(MSG.GETSET, 'NFT_MSG_GETSET'),
  ]);
  const wanted = (family: number, table: string | undefined) => table !== undefined && (!tables || tables(family, table));
  if (sMsgs.some((m) => wanted(m.body.readUInt8(0), new Attrs(m.body, 4).str(1)))) throw new NftCloneUnsupported('the ruleset has sets');
  const msgs: Buffer[] = [];
  const items: CloneItem[] = [];
  const add = (list: typeof tMsgs, cmd: number, kind: CloneItem['kind'], flags: number) => {
    for (const m of list) {
      if ((m.type & 0xff) !== cmd) continue;
      const family = m.body.readUInt8(0);
      const a = new Attrs(m.body, 4);
      const table = a.str(1);  // NFTA_{TABLE_NAME,CHAIN_TABLE,RULE_TABLE} are all attribute 1
      if (!wanted(family, table)) continue;
      msgs.push(rebuild(m.type, family, m.body, flags));
      items.push({ kind, family, table: table!, ...(kind === 'chain' ? { name: a.str(3)! } : kind === 'rule' ? { name: a.str(2)! } : {}) });
    }
  };
  add(tMsgs, MSG.NEWTABLE, 'table', NLM_F_CREATE);
  add(cMsgs, MSG.NEWCHAIN, 'chain', NLM_F_CREATE);
  add(rMsgs, MSG.NEWRULE, 'rule', NLM_F_CREATE | NLM_F_APPEND);
  return { batch: nftBatch(msgs), items };
}

/**
 * Replays a captured batch into `ns` as one transaction (all or nothing).
 * A failure names the object: `err.index` is the message, `err.item` what it creates.
 */
export async function replayNft(ns: Netns, clone: NftClone): Promise<void> {
  const nf = (await ns.netlink()).nfnetlink;
  // The socket renumbers sequence numbers in place: send a private copy.
  const batch = Buffer.from(clone.batch);
  try {
    await nf.request(batch, 'NFT_BATCH', true);
  } catch (err) {
    const i = (err as { index?: number }).index;
    if (i !== undefined && clone.items[i - 1]) Object.assign(err as object, { item: clone.items[i - 1] });
    throw err;
  }
}
