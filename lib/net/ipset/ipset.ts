// ipset over nfnetlink (NETLINK_NETFILTER), no CLI and no libipset: create,
// destroy, flush, rename, swap, list and batched add/del/test of elements in
// the netns the handle's socket lives in.
import { constants } from 'node:os';
import { NetError } from '../errors.js';
import {
  IPSET_CMD, decodeList, decodeNames, decodeTypeReply, encodeAdtList, encodeCreate, encodeEntry, encodeList,
  encodeNames, encodeTypeQuery, entryWireSize, familyName, normalizeEntry, validateCreate, validateSetName,
  type IpsetCreateOptions, type IpsetEntry, type IpsetFamily, type IpsetList, type IpsetType, type NormEntry,
} from './codec.js';
import { Attrs, splitMessages } from '../nl/codec.js';
import { IPSET_ATTR, IPSET_CMD_NAMES } from '../nl/nfnl.js';
import type { NlTransport } from '../nl/transport.js';

export type { IpsetCreateOptions, IpsetEntry, IpsetHeader, IpsetList, IpsetType, IpsetFamily, IpsetProto } from './codec.js';

/** A NetError from add/del that names the element the kernel refused. */
export type IpsetError = NetError & {
  /** Index of the failing element in the array given to add/del. */
  index?: number;
  /** The failing element, as given. */
  entry?: string | IpsetEntry;
  /**
   * When the element could not be pinned down: the range [start, end) of the
   * input the kernel stopped in (elements before the failing one were applied).
   */
  batch?: { start: number; end: number };
};

export interface IpsetWriteOptions {
  /** add: overwrite an existing element (comment, timeout); del: ignore a missing one. */
  exist?: boolean;
}

/**
 * Batch limits. An ADT list is one nested attribute, so it can never pass
 * 64 KiB; 60 KiB (about 900 pod IPs with UID comments) also keeps the
 * kernel's echo of a failing message far below the socket's receive buffer.
 * Measured (bench/ipset.ts): per-element cost falls until a few hundred per
 * message and is flat or slightly better up to the byte cap.
 */
export const ADT_BATCH_MAX = 1024;
export const ADT_BATCH_BYTES = 60 * 1024;

const op = (cmd: number) => IPSET_CMD_NAMES[cmd]!;

/** Codes that concern the set, not one element: nothing to pin on an element. */
const SET_LEVEL = new Set(['ENOENT']);

export class Ipset {
  /** Newest kernel revision per `type/family`, asked once per handle. */
  private readonly revisions = new Map<string, number>();

  constructor(private readonly nf: NlTransport) {}

  /** Creates a set. `exist: true` tolerates an identical existing set (EEXIST-free re-create). */
  async create(name: string, opts: IpsetCreateOptions, { exist = false }: IpsetWriteOptions = {}): Promise<void> {
    validateSetName(name);
    const o = validateCreate(opts);
    const revision = await this.revision(o.type, o.family);
    await this.call(IPSET_CMD.CREATE, name, encodeCreate(name, o, revision, exist));
  }

  /** Destroys a set (ENOENT when missing, unless `exist`). IPSET_ERR_BUSY while a rule references it. */
  async destroy(name: string, { exist = false }: IpsetWriteOptions = {}): Promise<void> {
    await this.call(IPSET_CMD.DESTROY, name, encodeNames(IPSET_CMD.DESTROY, name, undefined, exist));
  }

  async flush(name: string): Promise<void> {
    await this.call(IPSET_CMD.FLUSH, name, encodeNames(IPSET_CMD.FLUSH, name));
  }

  /** Renames `from` to `to` (IPSET_ERR_EXIST_SETNAME2 when `to` exists). */
  async rename(from: string, to: string): Promise<void> {
    await this.call(IPSET_CMD.RENAME, from, encodeNames(IPSET_CMD.RENAME, from, to));
  }

  /** Swaps the contents (and names) of two sets of the same type and family. */
  async swap(a: string, b: string): Promise<void> {
    await this.call(IPSET_CMD.SWAP, a, encodeNames(IPSET_CMD.SWAP, a, b));
  }

  /** Header and elements of one set. ENOENT when missing. */
  async list(name: string): Promise<IpsetList> {
    const sets = decodeList(await this.dump(name, encodeList(name)));
    const set = sets.find((s) => s.header.name === name);
    if (!set) throw new NetError(`IPSET_CMD_LIST: set ${name} not in the kernel's reply`, { errno: constants.errno.ENOENT, op: op(IPSET_CMD.LIST) });
    return set;
  }

  /** Every set with its elements. */
  async listAll(): Promise<IpsetList[]> {
    return decodeList(await this.dump(undefined, encodeList()));
  }

  /** Names of all sets in this netns. */
  async names(): Promise<string[]> {
    return decodeNames(await this.dump(undefined, encodeList(undefined, 'names')));
  }

  /** Adds one element or many (batched). On failure, `err.index`/`err.entry` name the element. */
  add(name: string, entries: string | IpsetEntry | ReadonlyArray<string | IpsetEntry>, opts: IpsetWriteOptions = {}): Promise<void> {
    return this.write(IPSET_CMD.ADD, name, entries, opts.exist ?? false);
  }

  /** Deletes one element or many; a missing one fails with IPSET_ERR_EXIST (`isNotFound`) unless `exist`. */
  del(name: string, entries: string | IpsetEntry | ReadonlyArray<string | IpsetEntry>, opts: IpsetWriteOptions = {}): Promise<void> {
    return this.write(IPSET_CMD.DEL, name, entries, opts.exist ?? false);
  }

  /** True when the element is in the set (for hash:net, a matching prefix). */
  async test(name: string, entry: string | IpsetEntry): Promise<boolean> {
    validateSetName(name);
    const e = normalizeEntry(entry);
    try {
      await this.nf.request(encodeEntry(IPSET_CMD.TEST, name, e, true), op(IPSET_CMD.TEST));
      return true;
    } catch (err) {
      // The kernel answers "not in set" with IPSET_ERR_EXIST.
      if (err instanceof NetError && err.code === 'IPSET_ERR_EXIST') return false;
      throw ipsetError(err, IPSET_CMD.TEST, name);
    }
  }

  private async call(cmd: number, name: string, msg: Buffer): Promise<void> {
    try {
      await this.nf.request(msg, op(cmd));
    } catch (err) {
      throw ipsetError(err, cmd, name);
    }
  }

  private async dump(name: string | undefined, msg: Buffer) {
    try {
      return await this.nf.dump(msg, op(IPSET_CMD.LIST));
    } catch (err) {
      throw ipsetError(err, IPSET_CMD.LIST, name);
    }
  }

  private async revision(type: IpsetType, family: IpsetFamily): Promise<number> {
    const key = `${type}/${family}`;
    let rev = this.revisions.get(key);
    if (rev === undefined) {
      let reply: Buffer | undefined;
      try {
        reply = await this.nf.request(encodeTypeQuery(type, family), op(IPSET_CMD.TYPE));
      } catch (err) {
        throw ipsetError(err, IPSET_CMD.TYPE, key);
      }
      const r = decodeTypeReply(splitMessages(reply));
      if (!r) throw new NetError(`IPSET_CMD_TYPE: no revision for ${key}`, { errno: constants.errno.EPROTO, op: op(IPSET_CMD.TYPE) });
      rev = r.revision;
      this.revisions.set(key, rev);
    }
    return rev;
  }

  private async write(cmd: number, name: string, input: string | IpsetEntry | ReadonlyArray<string | IpsetEntry>,
                      exist: boolean): Promise<void> {
    validateSetName(name);
    const list = Array.isArray(input) ? input as ReadonlyArray<string | IpsetEntry> : [input as string | IpsetEntry];
    const entries = list.map((e, i) => {
      try {
        return normalizeEntry(e);
      } catch (err) {
        if (err instanceof Error && list.length > 1) err.message = `entry ${i}: ${err.message}`;
        throw err;
      }
    });
    if (entries.length === 0) return;
    // One set has one family: refusing mixed input here means a family
    // mismatch with the set always fails at the first element.
    const fam = entries[0]!.family;
    const other = entries.findIndex((e) => e.family !== fam);
    if (other >= 0) throw new TypeError(`entry ${other}: ${familyName(entries[other]!.family)} element in a call that started with ${familyName(fam)}`);

    if (entries.length === 1) {
      try {
        await this.nf.request(encodeEntry(cmd, name, entries[0]!, exist), op(cmd));
      } catch (err) {
        throw ipsetError(err, cmd, name, { index: 0, entry: list[0]! });
      }
      return;
    }
    // Messages go one at a time so that, like `ipset restore`, nothing after
    // a failing element is applied.
    for (const [s, e] of batches(entries)) {
      try {
        await this.nf.request(encodeAdtList(cmd, name, entries.slice(s, e), exist), op(cmd));
      } catch (err) {
        throw ipsetError(err, cmd, name, await this.locate(cmd, name, entries, list, s, e, exist, err));
      }
    }
  }

  /**
   * Finds the element a failed ADT list stopped at. The kernel applied the
   * list in order up to the failing element and writes that element's line
   * number into its copy of the request (NetError.echo), which is exact.
   * Without that copy the batch is replayed one element at a time with
   * `exist` semantics (re-applying the applied prefix is a no-op), exact
   * unless the failure was IPSET_ERR_EXIST of a non-`exist` call: that case
   * is ambiguous after the fact and is reported with the batch range.
   */
  private async locate(cmd: number, name: string, entries: NormEntry[], input: ReadonlyArray<string | IpsetEntry>,
                       s: number, e: number, exist: boolean, err: unknown): Promise<Where> {
    if (!(err instanceof NetError) || SET_LEVEL.has(err.code)) return {};
    if (e - s === 1) return { index: s, entry: input[s]! };
    // The kernel's copy of the request carries the failing element's line number.
    const line = err.echo ? echoedLineno(err.echo) : undefined;
    if (line !== undefined && line >= 1 && line <= e - s) return { index: s + line - 1, entry: input[s + line - 1]! };
    if (!exist && err.code === 'IPSET_ERR_EXIST') return { batch: { start: s, end: e } };
    for (let i = s; i < e; i++) {
      try {
        await this.nf.request(encodeEntry(cmd, name, entries[i]!, true), op(cmd));
      } catch (again) {
        if (again instanceof NetError && again.code === err.code) return { index: i, entry: input[i]! };
        return { batch: { start: s, end: e } };  // the set changed under us
      }
    }
    return { batch: { start: s, end: e } };
  }
}

/** IPSET_ATTR_LINENO of an echoed ipset request (nlmsghdr, nfgenmsg, attributes). */
function echoedLineno(echo: Buffer): number | undefined {
  if (echo.length < 20) return undefined;
  // Written by us in network order; the kernel copies it back in the same order.
  return new Attrs(echo, 20).u32be(IPSET_ATTR.LINENO);
}

interface Where {
  index?: number;
  entry?: string | IpsetEntry;
  batch?: { start: number; end: number };
}

// Our own words for ipset's private codes (the kernel sends numbers only).
const IPSET_REASONS: Readonly<Record<string, string>> = {
  IPSET_ERR_PROTOCOL: 'the kernel rejected the request (e.g. an element of the wrong family or shape for this set)',
  IPSET_ERR_FIND_TYPE: 'set type/revision not supported by this kernel',
  IPSET_ERR_MAX_SETS: 'no room for more sets',
  IPSET_ERR_BUSY: 'set is in use by a rule',
  IPSET_ERR_EXIST_SETNAME2: 'the second set name is taken (rename) or missing (swap)',
  IPSET_ERR_TYPE_MISMATCH: 'the sets differ in type or family',
  IPSET_ERR_INVALID_CIDR: 'prefix length not valid for this set',
  IPSET_ERR_INVALID_NETMASK: 'netmask not valid for this set',
  IPSET_ERR_INVALID_FAMILY: 'family not supported by this set type',
  IPSET_ERR_TIMEOUT: 'set was created without timeout support',
  IPSET_ERR_REFERENCED: 'set is referenced by a rule',
  IPSET_ERR_COMMENT: 'set was created without comment support',
  IPSET_ERR_HASH_FULL: 'hash is full',
};

function reason(code: string, cmd: number): string | undefined {
  if (code === 'ENOENT') return 'no such set';
  if (code === 'IPSET_ERR_EXIST') {
    return cmd === IPSET_CMD.DEL ? 'element is not in the set' : cmd === IPSET_CMD.ADD ? 'element is already in the set' : 'already exists';
  }
  return IPSET_REASONS[code];
}

/**
 * A NetError in this module's terms: the socket's `index` counts messages,
 * ours counts input elements, so it is replaced (or dropped), and ipset's
 * numeric codes get a readable reason.
 */
function ipsetError(err: unknown, cmd: number, name: string | undefined, where: Where = {}): unknown {
  if (!(err instanceof NetError)) return err;
  const pinned = !SET_LEVEL.has(err.code) ? where : {};
  let msg = `${err.op}${name === undefined ? '' : ` ${name}`}: ${reason(err.code, cmd) ?? err.message.replace(/^[A-Z_]+: /, '')}`;
  if (pinned.index !== undefined) {
    const shown = typeof pinned.entry === 'string' ? pinned.entry : JSON.stringify(pinned.entry);
    msg += ` (entry ${pinned.index}: ${shown})`;
  } else if (pinned.batch) {
    msg += ` (at one of entries ${pinned.batch.start}-${pinned.batch.end - 1}; the ones before it were applied)`;
  }
  const out = new NetError(msg, {
    errno: err.errno, op: err.op, code: err.code, cause: err,
    ...(pinned.index !== undefined ? { index: pinned.index } : {}),
    ...(err.extack !== undefined ? { extack: err.extack } : {}),
  });
  if (pinned.entry !== undefined) Object.assign(out, { entry: pinned.entry });
  if (pinned.batch) Object.assign(out, { batch: pinned.batch });
  return out;
}

/** Splits entries into [start, end) batches under the count and size limits. */
function batches(entries: NormEntry[]): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let s = 0, bytes = 0;
  for (let i = 0; i < entries.length; i++) {
    const n = entryWireSize(entries[i]!);
    if (i > s && (i - s >= ADT_BATCH_MAX || bytes + n > ADT_BATCH_BYTES)) {
      out.push([s, i]);
      s = i;
      bytes = 0;
    }
    bytes += n;
  }
  out.push([s, entries.length]);
  return out;
}

export { entryOf, formatEntry, formatSave, normalizeEntry, parseEntryText } from './codec.js';
