// Netlink message encoding and attribute decoding. Pure and synchronous: the
// native socket only frames, sends and collects; the bytes are built here,
// so they are unit-tested without root.

export const NLMSG_HDRLEN = 16;
export const NLA_HDRLEN = 4;
export const NLA_F_NESTED = 0x8000;
const NLA_TYPE_MASK = 0x3fff;

export const NLM_F_REQUEST = 0x1;
export const NLM_F_ACK = 0x4;
export const NLM_F_DUMP_INTR = 0x10;
export const NLM_F_ROOT = 0x100;
export const NLM_F_MATCH = 0x200;
export const NLM_F_DUMP = NLM_F_ROOT | NLM_F_MATCH;
export const NLM_F_REPLACE = 0x100;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;
export const NLM_F_APPEND = 0x800;

export const align4 = (n: number): number => (n + 3) & ~3;

// From Node's buffer pool, then zeroed (padding and unset header fields must
// be 0): several times cheaper than Buffer.alloc, which gives every buffer
// over 64 bytes its own backing store, and a message is built per request.
const zeroed = (size: number): Buffer => Buffer.allocUnsafe(size).fill(0);

/**
 * Builds one netlink message: header, fixed family header, attributes.
 * Several writers can be concatenated into one request with `concat`.
 */
export class MsgWriter {
  private buf: Buffer;
  private len: number;
  private readonly nests: number[] = [];

  constructor(type: number, flags: number, capacity = 256) {
    this.buf = zeroed(capacity);
    this.buf.writeUInt16LE(type, 4);
    this.buf.writeUInt16LE(flags, 6);
    this.len = NLMSG_HDRLEN;
  }

  private reserve(n: number): number {
    const at = this.len;
    const need = align4(at + n);
    if (need > this.buf.length) {
      const next = zeroed(Math.max(need, this.buf.length * 2));
      this.buf.copy(next, 0, 0, this.len);
      this.buf = next;
    }
    this.len = need;
    return at;
  }

  /** Appends raw bytes (the family header), padded to 4. */
  raw(bytes: Uint8Array): this {
    const at = this.reserve(bytes.length);
    this.buf.set(bytes, at);
    return this;
  }

  /** Reserves an attribute of `n` payload bytes; returns where the payload goes. */
  private put(type: number, n: number): number {
    const at = this.reserve(NLA_HDRLEN + n);
    this.buf.writeUInt16LE(NLA_HDRLEN + n, at);
    this.buf.writeUInt16LE(type, at + 2);
    return at + NLA_HDRLEN;
  }

  attr(type: number, payload: Uint8Array): this {
    const at = this.put(type, payload.length);
    this.buf.set(payload, at);
    return this;
  }

  // Written in place: no payload Buffer per attribute.
  u8(type: number, v: number): this { const at = this.put(type, 1); this.buf[at] = v; return this; }
  u16(type: number, v: number): this { const at = this.put(type, 2); this.buf.writeUInt16LE(v, at); return this; }
  u32(type: number, v: number): this { const at = this.put(type, 4); this.buf.writeUInt32LE(v >>> 0, at); return this; }
  s32(type: number, v: number): this { const at = this.put(type, 4); this.buf.writeInt32LE(v, at); return this; }
  u16be(type: number, v: number): this { const at = this.put(type, 2); this.buf.writeUInt16BE(v, at); return this; }
  u32be(type: number, v: number): this { const at = this.put(type, 4); this.buf.writeUInt32BE(v >>> 0, at); return this; }
  u64be(type: number, v: bigint): this { const at = this.put(type, 8); this.buf.writeBigUInt64BE(v, at); return this; }
  /** NUL-terminated string attribute. */
  str(type: number, v: string): this {
    const text = `${v}`;
    const at = this.put(type, Buffer.byteLength(text) + 1);
    this.buf.write(text, at);
    return this;  // the NUL is there: the buffer is zero-filled
  }
  flag(type: number): this { this.put(type, 0); return this; }

  /** Opens a nested attribute; close it with `end()`. */
  begin(type: number, nestedFlag = false): this {
    const at = this.reserve(NLA_HDRLEN);
    this.buf.writeUInt16LE(type | (nestedFlag ? NLA_F_NESTED : 0), at + 2);
    this.nests.push(at);
    return this;
  }

  end(): this {
    const at = this.nests.pop();
    if (at === undefined) throw new Error('MsgWriter.end() without begin()');
    this.buf.writeUInt16LE(this.len - at, at);
    return this;
  }

  /** The finished message (a copy-free view). */
  finish(): Buffer {
    if (this.nests.length) throw new Error('MsgWriter.finish() with an open nested attribute');
    this.buf.writeUInt32LE(this.len, 0);
    return this.buf.subarray(0, this.len);
  }
}

export interface RawMsg {
  type: number;
  flags: number;
  seq: number;
  /** Payload after the netlink header. */
  body: Buffer;
}

/** Splits a buffer of concatenated messages. */
export function splitMessages(buf: Buffer | undefined): RawMsg[] {
  const out: RawMsg[] = [];
  if (!buf) return out;
  let off = 0;
  while (off + NLMSG_HDRLEN <= buf.length) {
    const len = buf.readUInt32LE(off);
    if (len < NLMSG_HDRLEN || off + len > buf.length) throw new RangeError(`malformed netlink message at offset ${off}`);
    out.push({
      type: buf.readUInt16LE(off + 4),
      flags: buf.readUInt16LE(off + 6),
      seq: buf.readUInt32LE(off + 8),
      body: buf.subarray(off + NLMSG_HDRLEN, off + len),
    });
    off += align4(len);
  }
  return out;
}

/** Attributes by type (last one wins); `all` keeps repeats in order. */
export class Attrs {
  // Payload bounds, not views or a map: a dump message carries dozens of
  // attributes and its parser reads a few, so lookups scan the bounds and
  // Buffer views are made only when asked for.
  private readonly buf: Buffer;
  /** [type, start, end] per attribute, in order. */
  private readonly spans: number[] = [];
  #all: Array<[number, Buffer]> | undefined;
  #map: Map<number, Buffer> | undefined;

  constructor(buf: Buffer, offset = 0, end = buf.length) {
    this.buf = buf;
    let off = offset;
    while (off + NLA_HDRLEN <= end) {
      const len = buf.readUInt16LE(off);
      if (len < NLA_HDRLEN || off + len > end) break;
      this.spans.push(buf.readUInt16LE(off + 2) & NLA_TYPE_MASK, off + NLA_HDRLEN, off + len);
      off += align4(len);
    }
  }

  get all(): Array<[number, Buffer]> {
    if (!this.#all) {
      this.#all = [];
      for (let i = 0; i < this.spans.length; i += 3) this.#all.push([this.spans[i]!, this.buf.subarray(this.spans[i + 1], this.spans[i + 2])]);
    }
    return this.#all;
  }

  get map(): Map<number, Buffer> {
    this.#map ??= new Map(this.all);
    return this.#map;
  }

  /** Index in `spans` of the last attribute `t`, or -1. */
  private find(t: number): number {
    for (let i = this.spans.length - 3; i >= 0; i -= 3) if (this.spans[i] === t) return i;
    return -1;
  }

  /** Where the payload of the last attribute `t` starts, when it has at least `min` bytes; else -1. */
  private at(t: number, min: number): number {
    const i = this.find(t);
    return i >= 0 && this.spans[i + 2]! - this.spans[i + 1]! >= min ? this.spans[i + 1]! : -1;
  }

  has(t: number): boolean { return this.find(t) >= 0; }
  raw(t: number): Buffer | undefined { const i = this.find(t); return i < 0 ? undefined : this.buf.subarray(this.spans[i + 1], this.spans[i + 2]); }
  u8(t: number): number | undefined { const o = this.at(t, 1); return o < 0 ? undefined : this.buf.readUInt8(o); }
  u16(t: number): number | undefined { const o = this.at(t, 2); return o < 0 ? undefined : this.buf.readUInt16LE(o); }
  u32(t: number): number | undefined { const o = this.at(t, 4); return o < 0 ? undefined : this.buf.readUInt32LE(o); }
  s32(t: number): number | undefined { const o = this.at(t, 4); return o < 0 ? undefined : this.buf.readInt32LE(o); }
  u16be(t: number): number | undefined { const o = this.at(t, 2); return o < 0 ? undefined : this.buf.readUInt16BE(o); }
  u32be(t: number): number | undefined { const o = this.at(t, 4); return o < 0 ? undefined : this.buf.readUInt32BE(o); }
  str(t: number): string | undefined {
    const i = this.find(t);
    if (i < 0) return undefined;
    const start = this.spans[i + 1]!;
    const end = this.spans[i + 2]!;
    const nul = this.buf.indexOf(0, start);
    return this.buf.toString('utf8', start, nul < 0 || nul > end ? end : nul);
  }
  nested(t: number): Attrs | undefined { const i = this.find(t); return i < 0 ? undefined : new Attrs(this.buf, this.spans[i + 1], this.spans[i + 2]); }
}
