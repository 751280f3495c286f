// Netlink message encoding and attribute decoding. Pure and synchronous: the
// native socket only frames, sends and collects; the bytes are built here,
// so they are unit-tested without root.

export const NLMSG_HDRLEN = 16;
export const NLA_HDRLEN = 4;
export const NLA_F_NESTED = 0x8000;
const NLA_TYPE_MASK = 0x3fff;

export const NLM_F_REQUEST = 0x1;
export const NLM_F_MULTI = 0x2;
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

/**
 * Builds one netlink message: header, fixed family header, attributes.
 * Several writers can be concatenated into one request with `concat`.
 */
export class MsgWriter {
  private buf: Buffer;
  private len: number;
  private readonly nests: number[] = [];

  constructor(type: number, flags: number, capacity = 256) {
    this.buf = Buffer.alloc(capacity);
    this.buf.writeUInt16LE(type, 4);
    this.buf.writeUInt16LE(flags, 6);
    this.len = NLMSG_HDRLEN;
  }

  private reserve(n: number): number {
    const at = this.len;
    const need = align4(at + n);
    if (need > this.buf.length) {
      const next = Buffer.alloc(Math.max(need, this.buf.length * 2));
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

  attr(type: number, payload: Uint8Array): this {
    const at = this.reserve(NLA_HDRLEN + payload.length);
    this.buf.writeUInt16LE(NLA_HDRLEN + payload.length, at);
    this.buf.writeUInt16LE(type, at + 2);
    this.buf.set(payload, at + NLA_HDRLEN);
    return this;
  }

  u8(type: number, v: number): this { return this.attr(type, Uint8Array.of(v)); }
  u16(type: number, v: number): this { const b = Buffer.alloc(2); b.writeUInt16LE(v); return this.attr(type, b); }
  u32(type: number, v: number): this { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); return this.attr(type, b); }
  s32(type: number, v: number): this { const b = Buffer.alloc(4); b.writeInt32LE(v); return this.attr(type, b); }
  u16be(type: number, v: number): this { const b = Buffer.alloc(2); b.writeUInt16BE(v); return this.attr(type, b); }
  u32be(type: number, v: number): this { const b = Buffer.alloc(4); b.writeUInt32BE(v >>> 0); return this.attr(type, b); }
  u64be(type: number, v: bigint): this { const b = Buffer.alloc(8); b.writeBigUInt64BE(v); return this.attr(type, b); }
  /** NUL-terminated string attribute. */
  str(type: number, v: string): this { return this.attr(type, Buffer.from(`${v}\0`)); }
  flag(type: number): this { return this.attr(type, new Uint8Array(0)); }

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
  readonly map = new Map<number, Buffer>();
  readonly all: Array<[number, Buffer]> = [];

  constructor(buf: Buffer, offset = 0) {
    let off = offset;
    while (off + NLA_HDRLEN <= buf.length) {
      const len = buf.readUInt16LE(off);
      if (len < NLA_HDRLEN || off + len > buf.length) break;
      const type = buf.readUInt16LE(off + 2) & NLA_TYPE_MASK;
      const payload = buf.subarray(off + NLA_HDRLEN, off + len);
      this.map.set(type, payload);
      this.all.push([type, payload]);
      off += align4(len);
    }
  }

  has(t: number): boolean { return this.map.has(t); }
  raw(t: number): Buffer | undefined { return this.map.get(t); }
  u8(t: number): number | undefined { const b = this.map.get(t); return b && b.length >= 1 ? b.readUInt8(0) : undefined; }
  u16(t: number): number | undefined { const b = this.map.get(t); return b && b.length >= 2 ? b.readUInt16LE(0) : undefined; }
  u32(t: number): number | undefined { const b = this.map.get(t); return b && b.length >= 4 ? b.readUInt32LE(0) : undefined; }
  s32(t: number): number | undefined { const b = this.map.get(t); return b && b.length >= 4 ? b.readInt32LE(0) : undefined; }
  u16be(t: number): number | undefined { const b = this.map.get(t); return b && b.length >= 2 ? b.readUInt16BE(0) : undefined; }
  u32be(t: number): number | undefined { const b = this.map.get(t); return b && b.length >= 4 ? b.readUInt32BE(0) : undefined; }
  str(t: number): string | undefined {
    const b = this.map.get(t);
    if (!b) return undefined;
    const nul = b.indexOf(0);
    return b.toString('utf8', 0, nul < 0 ? b.length : nul);
  }
  nested(t: number): Attrs | undefined { const b = this.map.get(t); return b ? new Attrs(b) : undefined; }
}
