// ipset over nfnetlink: entry syntax, request encoding and list decoding.
// Pure and synchronous (unit-tested without root); lib/net/ipset/ipset.ts drives
// the socket. Layout of every message: nlmsghdr, nfgenmsg, IPSET_ATTR_*.
import { formatIp, parseIp, type Family } from '../ip.js';
import { Attrs, MsgWriter, NLA_F_NESTED, NLM_F_ACK, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST, type RawMsg } from '../nl/codec.js';
import {
  IPSET_ATTR, IPSET_ATTR_IPADDR_IPV4, IPSET_ATTR_IPADDR_IPV6, IPSET_CMD, IPSET_DATA, IPSET_FLAG_LIST_HEADER,
  IPSET_FLAG_LIST_SETNAME, IPSET_FLAG_WITH_COMMENT, IPSET_MAXNAMELEN, IPSET_MAX_COMMENT_SIZE, IPSET_PROTOCOL,
  NFGENMSG_LEN, NFNL_SUBSYS_IPSET, NFPROTO_IPV4, NFPROTO_IPV6, NLA_F_NET_BYTEORDER, nfgenmsg, nfnlType,
} from '../nl/nfnl.js';

export type IpsetType = 'hash:ip' | 'hash:net' | 'hash:ip,port';
/** The IP family of a set: 4 (ipset's `inet`) or 6 (`inet6`). */
export type IpsetFamily = Family;
export type IpsetProto = 'tcp' | 'udp' | 'sctp' | 'udplite';

/** One element, as `list` returns it and as `add`/`del`/`test` accept it. */
export interface IpsetEntry {
  address: string;
  /** Prefix length (hash:net; a range of addresses for hash:ip). Absent for a host. */
  cidr?: number;
  port?: number;
  /** Defaults to `tcp` when a port is given. */
  proto?: IpsetProto;
  comment?: string;
  /** Seconds. */
  timeout?: number;
}

export interface IpsetCreateOptions {
  type: IpsetType;
  family?: IpsetFamily;
  /** Enables the comment extension. */
  comment?: boolean;
  /** Default entry timeout in seconds (enables the timeout extension; 0 = entries never expire). */
  timeout?: number;
  maxelem?: number;
  hashsize?: number;
}

export interface IpsetHeader {
  name: string;
  type: string;
  family: IpsetFamily;
  revision: number;
  hashsize?: number;
  maxelem?: number;
  /** Default timeout when the set has the timeout extension. */
  timeout?: number;
  comment: boolean;
  references: number;
  /** Number of entries the kernel reports. */
  entries: number;
  /** Memory used, bytes. */
  memory: number;
}

export interface IpsetList {
  header: IpsetHeader;
  entries: IpsetEntry[];
}

export const IPSET_TYPES: readonly IpsetType[] = ['hash:ip', 'hash:net', 'hash:ip,port'];
const PROTOS: Readonly<Record<IpsetProto, number>> = { tcp: 6, udp: 17, sctp: 132, udplite: 136 };
const PROTO_NAMES: Readonly<Record<number, IpsetProto>> = { 6: 'tcp', 17: 'udp', 132: 'sctp', 136: 'udplite' };
/** The kernel keeps timeouts in jiffies from msecs: at most UINT_MAX / 1000 seconds. */
export const IPSET_MAX_TIMEOUT = 4294967;

/** A validated entry, ready to encode. */
export interface NormEntry {
  family: Family;
  /** Network-order address bytes (4 or 16). */
  addr: Buffer;
  cidr?: number;
  port?: number;
  proto?: number;
  comment?: string;
  /** UTF-8 length of the comment (without the NUL). */
  commentBytes?: number;
  timeout?: number;
}

/** ipset's own name of a family (`ipset save` prints `family inet`). */
export const familyName = (f: Family): 'inet' | 'inet6' => (f === 4 ? 'inet' : 'inet6');
const nfproto = (f: IpsetFamily): number => (f === 4 ? NFPROTO_IPV4 : NFPROTO_IPV6);

/** Set names are 1-31 bytes (the kernel's buffer is 32 with the NUL). */
export function validateSetName(name: unknown, what = 'set name'): string {
  if (typeof name !== 'string') throw new TypeError(`${what} must be a string, got ${typeof name}`);
  const bytes = Buffer.byteLength(name);
  if (bytes === 0 || bytes >= IPSET_MAXNAMELEN) throw new RangeError(`${what} ${JSON.stringify(name)} must be 1-${IPSET_MAXNAMELEN - 1} bytes`);
  if (name.includes('\0')) throw new TypeError(`${what} must not contain NUL`);
  return name;
}

function uint(v: unknown, what: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new TypeError(`${what} must be an integer, got ${String(v)}`);
  if (v < min || v > max) throw new RangeError(`${what} ${v} is out of range ${min}-${max}`);
  return v;
}

const BAD_COMMENT = /["\0\n\r]/;

/** Returns the comment's UTF-8 length. */
function validateComment(c: unknown): number {
  if (typeof c !== 'string') throw new TypeError(`comment must be a string, got ${typeof c}`);
  // `ipset save` quotes comments, so a quote or a line break could not round-trip.
  if (BAD_COMMENT.test(c)) throw new TypeError(`comment ${JSON.stringify(c)} must not contain quotes, NUL or line breaks`);
  const n = Buffer.byteLength(c);
  if (n > IPSET_MAX_COMMENT_SIZE) throw new RangeError(`comment is longer than ${IPSET_MAX_COMMENT_SIZE} bytes`);
  return n;
}

/**
 * Dotted-quad IPv4 straight into 4 bytes, or undefined (then parseIp decides
 * and throws). Same grammar as node's isIP: no leading zeros, 0-255.
 */
function fastIpv4(t: string): Buffer | undefined {
  if (t.length < 7 || t.length > 15) return undefined;
  const out = Buffer.allocUnsafe(4);
  let part = 0, val = 0, digits = 0;
  for (let i = 0; i <= t.length; i++) {
    const c = i === t.length ? 46 : t.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || part > 3) return undefined;
      out[part++] = val;
      val = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && val === 0) return undefined;  // leading zero
      val = val * 10 + (c - 48);
      if (val > 255) return undefined;
      digits++;
    } else {
      return undefined;
    }
  }
  return part === 4 ? out : undefined;
}

/**
 * Parses `ipset` element syntax: `ADDR`, `ADDR/CIDR`, `ADDR,PORT` (tcp),
 * `ADDR,PROTO:PORT`, `ADDR/CIDR,PROTO:PORT`.
 */
export function parseEntryText(text: string): IpsetEntry {
  if (typeof text !== 'string') throw new TypeError(`ipset entry must be a string or object, got ${typeof text}`);
  if (!text.includes(',') && !text.includes('/')) return { address: text };
  const m = /^([^,/\s]+)(?:\/(\d{1,3}))?(?:,(?:([a-z]+):)?(\d{1,5}))?$/.exec(text);
  if (!m) throw new TypeError(`invalid ipset entry ${JSON.stringify(text)} (expected ADDR[/CIDR][,[PROTO:]PORT])`);
  const out: IpsetEntry = { address: m[1]! };
  if (m[2] !== undefined) out.cidr = Number(m[2]);
  if (m[4] !== undefined) {
    out.port = Number(m[4]);
    out.proto = (m[3] ?? 'tcp') as IpsetProto;
  }
  return out;
}

const ENTRY_FIELDS = new Set(['address', 'cidr', 'port', 'proto', 'comment', 'timeout']);

/** Validates one entry (string or object) into its wire form. Throws TypeError/RangeError. */
export function normalizeEntry(input: string | IpsetEntry): NormEntry {
  const e = typeof input === 'string' ? parseEntryText(input) : input;
  if (typeof e !== 'object' || e === null) throw new TypeError(`ipset entry must be a string or object, got ${e === null ? 'null' : typeof e}`);
  for (const k in e) if (!ENTRY_FIELDS.has(k)) throw new TypeError(`unknown ipset entry field "${k}"`);
  const v4 = typeof e.address === 'string' ? fastIpv4(e.address) : undefined;
  const ip = v4 ? { family: 4 as const, bytes: v4 } : parseIp(e.address);
  const max = ip.family === 4 ? 32 : 128;
  // Every field set up front: one object shape for all entries keeps the encoder monomorphic.
  const out: NormEntry = {
    family: ip.family, addr: ip.bytes, cidr: undefined, port: undefined, proto: undefined,
    comment: undefined, commentBytes: undefined, timeout: undefined,
  };
  if (e.cidr !== undefined) {
    const cidr = uint(e.cidr, 'cidr', 1, max);
    if (cidr !== max) {
      out.cidr = cidr;
      out.addr = maskBytes(ip.bytes, cidr);  // the kernel stores the network; so do we, to compare equal
    }
  }
  if (e.port !== undefined) {
    out.port = uint(e.port, 'port', 0, 65535);
    const proto = e.proto ?? 'tcp';
    if (!Object.hasOwn(PROTOS, proto)) throw new TypeError(`proto must be one of ${Object.keys(PROTOS).join(', ')}, got ${String(proto)}`);
    out.proto = PROTOS[proto];
  } else if (e.proto !== undefined) {
    throw new TypeError('proto needs a port');
  }
  if (e.comment !== undefined) {
    out.commentBytes = validateComment(e.comment);
    out.comment = e.comment;
  }
  if (e.timeout !== undefined) out.timeout = uint(e.timeout, 'timeout', 0, IPSET_MAX_TIMEOUT);
  return out;
}

function maskBytes(bytes: Buffer, len: number): Buffer {
  const out = Buffer.from(bytes);
  for (let i = 0; i < out.length; i++) {
    const bits = Math.max(0, Math.min(8, len - i * 8));
    out[i]! &= (0xff << (8 - bits)) & 0xff;
  }
  return out;
}

/** The public shape of a wire entry. */
export function entryOf(n: NormEntry): IpsetEntry {
  const out: IpsetEntry = { address: formatIp(n.addr) };
  if (n.cidr !== undefined) out.cidr = n.cidr;
  if (n.port !== undefined) {
    out.port = n.port;
    out.proto = PROTO_NAMES[n.proto ?? 6] ?? 'tcp';
  }
  if (n.comment !== undefined) out.comment = n.comment;
  if (n.timeout !== undefined) out.timeout = n.timeout;
  return out;
}

/** `10.0.0.1`, `10.0.0.0/24`, `10.0.0.1,tcp:80` — the element as `ipset` prints it. */
export function formatEntry(e: IpsetEntry): string {
  let s = e.address;
  if (e.cidr !== undefined) s += `/${e.cidr}`;
  if (e.port !== undefined) s += `,${e.proto ?? 'tcp'}:${e.port}`;
  return s;
}

// --- encoding ---------------------------------------------------------------

const ipsetType = (cmd: number) => nfnlType(NFNL_SUBSYS_IPSET, cmd);
const NET = NLA_F_NET_BYTEORDER;

function start(cmd: number, flags: number, capacity = 128): MsgWriter {
  // libipset sends AF_INET in nfgenmsg for every command; the kernel ignores it.
  return new MsgWriter(ipsetType(cmd), flags, capacity).raw(nfgenmsg(NFPROTO_IPV4)).u8(IPSET_ATTR.PROTOCOL, IPSET_PROTOCOL);
}

const ackFlags = (exist: boolean) => NLM_F_REQUEST | NLM_F_ACK | (exist ? 0 : NLM_F_EXCL);

/** IPSET_CMD_TYPE: asks for the revisions the kernel supports for a type/family. */
export function encodeTypeQuery(type: IpsetType, family: IpsetFamily): Buffer {
  return start(IPSET_CMD.TYPE, NLM_F_REQUEST | NLM_F_ACK)
    .str(IPSET_ATTR.TYPENAME, type).u8(IPSET_ATTR.FAMILY, nfproto(family)).finish();
}

/** The newest revision in an IPSET_CMD_TYPE reply. */
export function decodeTypeReply(msgs: RawMsg[]): { revision: number; revisionMin: number } | undefined {
  for (const m of msgs) {
    if (m.type !== ipsetType(IPSET_CMD.TYPE)) continue;
    const a = new Attrs(m.body, NFGENMSG_LEN);
    const revision = a.u8(IPSET_ATTR.REVISION);
    if (revision !== undefined) return { revision, revisionMin: a.u8(IPSET_ATTR.REVISION_MIN) ?? revision };
  }
  return undefined;
}

/** Validates create options; returns them with the family filled in. */
export function validateCreate(opts: IpsetCreateOptions): Required<Pick<IpsetCreateOptions, 'type' | 'family'>> & IpsetCreateOptions {
  if (typeof opts !== 'object' || opts === null) throw new TypeError('create options must be an object');
  for (const k of Object.keys(opts)) {
    if (!['type', 'family', 'comment', 'timeout', 'maxelem', 'hashsize'].includes(k)) throw new TypeError(`unknown create option "${k}"`);
  }
  if (!IPSET_TYPES.includes(opts.type)) throw new TypeError(`type must be one of ${IPSET_TYPES.join(', ')}, got ${String(opts.type)}`);
  const family = opts.family ?? 4;
  if (family !== 4 && family !== 6) throw new TypeError(`family must be 4 or 6, got ${String(family)}`);
  if (opts.comment !== undefined && typeof opts.comment !== 'boolean') throw new TypeError('comment must be a boolean');
  if (opts.timeout !== undefined) uint(opts.timeout, 'timeout', 0, IPSET_MAX_TIMEOUT);
  if (opts.maxelem !== undefined) uint(opts.maxelem, 'maxelem', 1, 0xffffffff);
  if (opts.hashsize !== undefined) uint(opts.hashsize, 'hashsize', 1, 0x80000000);
  return { ...opts, family };
}

/** IPSET_CMD_CREATE. Without `exist`, NLM_F_EXCL makes a clash an error. */
export function encodeCreate(name: string, opts: IpsetCreateOptions, revision: number, exist: boolean): Buffer {
  const o = validateCreate(opts);
  const w = start(IPSET_CMD.CREATE, ackFlags(exist))
    .str(IPSET_ATTR.SETNAME, validateSetName(name)).str(IPSET_ATTR.TYPENAME, o.type)
    .u8(IPSET_ATTR.REVISION, revision).u8(IPSET_ATTR.FAMILY, nfproto(o.family))
    .begin(IPSET_ATTR.DATA, true);
  if (o.hashsize !== undefined) w.u32be(IPSET_DATA.HASHSIZE | NET, o.hashsize);
  if (o.maxelem !== undefined) w.u32be(IPSET_DATA.MAXELEM | NET, o.maxelem);
  if (o.timeout !== undefined) w.u32be(IPSET_DATA.TIMEOUT | NET, o.timeout);
  if (o.comment) w.u32be(IPSET_DATA.CADT_FLAGS | NET, IPSET_FLAG_WITH_COMMENT);
  return w.end().finish();
}

/** DESTROY / FLUSH (one name) and RENAME / SWAP (two names). */
export function encodeNames(cmd: number, name: string, name2?: string, exist = false): Buffer {
  const w = start(cmd, ackFlags(exist)).str(IPSET_ATTR.SETNAME, validateSetName(name));
  if (name2 !== undefined) w.str(IPSET_ATTR.SETNAME2, validateSetName(name2, 'second set name'));
  return w.finish();
}

/** Bytes one entry takes inside an ADT list (for batch sizing). */
export function entryWireSize(e: NormEntry, withLine = true): number {
  let n = 4 + 4 + 4 + e.addr.length + (withLine ? 8 : 0);  // DATA, IP, address, LINENO
  if (e.cidr !== undefined) n += 8;
  if (e.port !== undefined) n += 16;
  if (e.timeout !== undefined) n += 8;
  if (e.comment !== undefined) n += 4 + ((((e.commentBytes ?? Buffer.byteLength(e.comment)) + 1) + 3) & ~3);
  return n;
}

/** ADD / DEL / TEST of one entry (IPSET_ATTR_DATA). Without `exist`, NLM_F_EXCL. */
export function encodeEntry(cmd: number, name: string, e: NormEntry, exist: boolean): Buffer {
  const { b, o } = head(cmd, name, exist, entryWireSize(e, false), false);
  putData(b, o, e, 0);
  return b;
}

/**
 * ADD / DEL of many entries in one message: an IPSET_ATTR_ADT list of
 * IPSET_ATTR_DATA. The kernel applies them in order and stops at the first
 * failure; each element carries its 1-based line number so the kernel can
 * name it (protocol 7 requires the command-level LINENO with an ADT list).
 * Written straight into one exactly sized buffer: this is the hot path of
 * bulk adds, and the bytes are identical to what MsgWriter would produce.
 */
export function encodeAdtList(cmd: number, name: string, entries: readonly NormEntry[], exist: boolean): Buffer {
  let body = 0;
  for (const e of entries) body += entryWireSize(e);
  const adtLen = 4 + body;
  if (adtLen > 0xffff) throw new RangeError(`an ADT list holds at most 65535 bytes, these ${entries.length} elements need ${adtLen}`);
  const { b, o: at } = head(cmd, name, exist, adtLen, true);
  let o = putHdr(b, at, adtLen, IPSET_ATTR.ADT | NLA_F_NESTED);
  for (let i = 0; i < entries.length; i++) o = putData(b, o, entries[i]!, i + 1);
  return b;
}

/**
 * Allocates an ADD/DEL/TEST message with `payload` bytes after the common
 * attributes (PROTOCOL, SETNAME and, for ADT lists, the command LINENO),
 * fills the headers, and returns where the payload starts.
 */
function head(cmd: number, name: string, exist: boolean, payload: number, lineno: boolean): { b: Buffer; o: number } {
  const nameLen = Buffer.byteLength(name);
  const nameAttr = 4 + ((nameLen + 1 + 3) & ~3);
  const total = 16 + 4 + 8 + nameAttr + (lineno ? 8 : 0) + payload;
  const b = Buffer.alloc(total);
  b.writeUInt32LE(total, 0);
  b.writeUInt16LE(ipsetType(cmd), 4);
  b.writeUInt16LE(ackFlags(exist), 6);
  b[16] = NFPROTO_IPV4;  // nfgenmsg: family, version 0, res_id 0
  let o = putHdr(b, 20, 5, IPSET_ATTR.PROTOCOL);
  b[o] = IPSET_PROTOCOL;
  o = putHdr(b, o + 4, 4 + nameLen + 1, IPSET_ATTR.SETNAME);
  b.write(name, o, 'utf8');
  o += (nameLen + 1 + 3) & ~3;
  if (lineno) o = putHdr(b, o, 8, IPSET_ATTR.LINENO | NET) + 4;  // value 0
  return { b, o };
}

/** One IPSET_ATTR_DATA element at `o` (with its LINENO when `line` > 0); returns the end. */
function putData(b: Buffer, o: number, e: NormEntry, line: number): number {
  const start = o;
  o += 4;  // DATA header, length known at the end
  o = putHdr(b, o, 8 + e.addr.length, IPSET_DATA.IP | NLA_F_NESTED);
  o = putHdr(b, o, 4 + e.addr.length, (e.family === 4 ? IPSET_ATTR_IPADDR_IPV4 : IPSET_ATTR_IPADDR_IPV6) | NET);
  for (let k = 0; k < e.addr.length; k++) b[o + k] = e.addr[k]!;
  o += e.addr.length;
  if (e.cidr !== undefined) { o = putHdr(b, o, 5, IPSET_DATA.CIDR); b[o] = e.cidr; o += 4; }
  if (e.port !== undefined) { o = putHdr(b, o, 6, IPSET_DATA.PORT | NET); b.writeUInt16BE(e.port, o); o += 4; }
  if (e.proto !== undefined) { o = putHdr(b, o, 5, IPSET_DATA.PROTO); b[o] = e.proto; o += 4; }
  if (e.timeout !== undefined) { o = putHdr(b, o, 8, IPSET_DATA.TIMEOUT | NET); b.writeUInt32BE(e.timeout, o); o += 4; }
  if (e.comment !== undefined) {
    const n = e.commentBytes ?? Buffer.byteLength(e.comment);
    o = putHdr(b, o, 4 + n + 1, IPSET_DATA.COMMENT);
    putText(b, o, e.comment, n);
    o += (n + 1 + 3) & ~3;
  }
  if (line > 0) {
    o = putHdr(b, o, 8, IPSET_DATA.LINENO | NET);
    b.writeUInt32BE(line, o);
    o += 4;
  }
  putHdr(b, start, o - start, IPSET_ATTR.DATA | NLA_F_NESTED);
  return o;
}

// ASCII text (pod UIDs) takes the cheaper one-byte copy; `bytes` is its UTF-8 length.
function putText(b: Buffer, o: number, s: string, bytes: number): void {
  b.write(s, o, bytes, bytes === s.length ? 'latin1' : 'utf8');
}

function putHdr(b: Buffer, o: number, len: number, type: number): number {
  b[o] = len & 0xff;
  b[o + 1] = len >>> 8;
  b[o + 2] = type & 0xff;
  b[o + 3] = type >>> 8;
  return o + 4;
}

/** IPSET_CMD_LIST dump: one set (or all), optionally names or headers only. */
export function encodeList(name?: string, what: 'all' | 'names' | 'header' = 'all'): Buffer {
  // No NLM_F_ACK: a dump that cannot start (no such set) is answered with one error.
  const w = start(IPSET_CMD.LIST, NLM_F_REQUEST | NLM_F_DUMP);
  if (name !== undefined) w.str(IPSET_ATTR.SETNAME, validateSetName(name));
  if (what !== 'all') w.u32be(IPSET_ATTR.FLAGS | NET, what === 'names' ? IPSET_FLAG_LIST_SETNAME : IPSET_FLAG_LIST_HEADER);
  return w.finish();
}

// --- decoding ---------------------------------------------------------------

function decodeEntry(data: Attrs): IpsetEntry | undefined {
  const ip = data.nested(IPSET_DATA.IP);
  const addr = ip?.raw(IPSET_ATTR_IPADDR_IPV4) ?? ip?.raw(IPSET_ATTR_IPADDR_IPV6);
  if (!addr || (addr.length !== 4 && addr.length !== 16)) return undefined;
  const out: IpsetEntry = { address: formatIp(addr) };
  const cidr = data.u8(IPSET_DATA.CIDR);
  if (cidr !== undefined && cidr !== addr.length * 8) out.cidr = cidr;
  const port = data.u16be(IPSET_DATA.PORT);
  if (port !== undefined) {
    out.port = port;
    const proto = data.u8(IPSET_DATA.PROTO) ?? 6;
    out.proto = PROTO_NAMES[proto] ?? 'tcp';
  }
  const timeout = data.u32be(IPSET_DATA.TIMEOUT);
  if (timeout !== undefined) out.timeout = timeout;
  const comment = data.str(IPSET_DATA.COMMENT);
  if (comment !== undefined) out.comment = comment;
  return out;
}

function decodeHeader(a: Attrs, name: string): IpsetHeader {
  const d = a.nested(IPSET_ATTR.DATA);
  const fam = a.u8(IPSET_ATTR.FAMILY);
  const h: IpsetHeader = {
    name,
    type: a.str(IPSET_ATTR.TYPENAME) ?? '',
    family: fam === NFPROTO_IPV6 ? 6 : 4,
    revision: a.u8(IPSET_ATTR.REVISION) ?? 0,
    comment: ((d?.u32be(IPSET_DATA.CADT_FLAGS) ?? 0) & IPSET_FLAG_WITH_COMMENT) !== 0,
    references: d?.u32be(IPSET_DATA.REFERENCES) ?? 0,
    entries: d?.u32be(IPSET_DATA.ELEMENTS) ?? 0,
    memory: d?.u32be(IPSET_DATA.MEMSIZE) ?? 0,
  };
  const hashsize = d?.u32be(IPSET_DATA.HASHSIZE);
  if (hashsize !== undefined) h.hashsize = hashsize;
  const maxelem = d?.u32be(IPSET_DATA.MAXELEM);
  if (maxelem !== undefined) h.maxelem = maxelem;
  const timeout = d?.u32be(IPSET_DATA.TIMEOUT);
  if (timeout !== undefined) h.timeout = timeout;
  return h;
}

/**
 * Decodes an IPSET_CMD_LIST dump. A set's first message carries its header,
 * later ones (a big set spans many) only its name and more ADT elements.
 */
export function decodeList(msgs: RawMsg[]): IpsetList[] {
  const sets = new Map<string, IpsetList>();
  for (const m of msgs) {
    if (m.type !== ipsetType(IPSET_CMD.LIST)) continue;
    const a = new Attrs(m.body, NFGENMSG_LEN);
    const name = a.str(IPSET_ATTR.SETNAME);
    if (name === undefined) continue;
    let set = sets.get(name);
    if (!set) {
      set = { header: decodeHeader(a, name), entries: [] };
      sets.set(name, set);
    } else if (a.has(IPSET_ATTR.TYPENAME)) {
      set.header = decodeHeader(a, name);
    }
    const adt = a.raw(IPSET_ATTR.ADT);
    if (!adt) continue;
    for (const [type, payload] of new Attrs(adt).all) {
      if (type !== IPSET_ATTR.DATA) continue;
      const e = decodeEntry(new Attrs(payload));
      if (e) set.entries.push(e);
    }
  }
  return [...sets.values()];
}

/** Set names from a names-only dump, in kernel order. */
export function decodeNames(msgs: RawMsg[]): string[] {
  const out: string[] = [];
  for (const m of msgs) {
    if (m.type !== ipsetType(IPSET_CMD.LIST)) continue;
    const name = new Attrs(m.body, NFGENMSG_LEN).str(IPSET_ATTR.SETNAME);
    if (name !== undefined && out[out.length - 1] !== name) out.push(name);
  }
  return out;
}

// --- `ipset save` text --------------------------------------------------------

/** The `create` line as `ipset save` prints it (options it always prints, in its order). */
export function formatCreateLine(h: IpsetHeader): string {
  const parts = ['create', h.name, h.type, 'family', familyName(h.family)];
  if (h.hashsize !== undefined) parts.push('hashsize', String(h.hashsize));
  if (h.maxelem !== undefined) parts.push('maxelem', String(h.maxelem));
  if (h.timeout !== undefined) parts.push('timeout', String(h.timeout));
  if (h.comment) parts.push('comment');
  return parts.join(' ');
}

export function formatAddLine(set: string, e: IpsetEntry): string {
  let s = `add ${set} ${formatEntry(e)}`;
  if (e.timeout !== undefined) s += ` timeout ${e.timeout}`;
  if (e.comment !== undefined) s += ` comment "${e.comment}"`;
  return s;
}

/** `ipset save`-compatible text for the sets given. */
export function formatSave(sets: readonly IpsetList[]): string {
  const lines: string[] = [];
  for (const s of sets) {
    lines.push(formatCreateLine(s.header));
    for (const e of s.entries) lines.push(formatAddLine(s.header.name, e));
  }
  return lines.length ? `${lines.join('\n')}\n` : '';
}

export { IPSET_CMD } from '../nl/nfnl.js';
