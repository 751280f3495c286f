// A minimal schema-driven proto3 codec for the test CRI client (test/helpers/cri.ts):
// plain objects in, plain objects out, for the handful of runtime.v1 messages the
// tests use. Field numbers come from the message tables in cri.ts (upstream
// k8s.io/cri-api runtime/v1 api.proto). Enough of proto3 for those messages:
// string, bytes, bool, int32/uint32/enum, int64 (bigint on decode), nested
// messages, repeated (packed or not on decode), map<string,string>. Encoding
// follows proto3 implicit presence (default scalars are left out, a set
// sub-message is always written); decoding skips unknown fields and fills every
// declared field with its default, as generated code does.

export type Scalar = 'string' | 'bytes' | 'bool' | 'int32' | 'uint32' | 'int64';

export interface MessageType {
  readonly name: string;
  /** Field name (camelCase) → [field number, type, 'repeated'?]. Thunks allow forward references. */
  readonly fields: Readonly<Record<string, FieldDef>>;
}

export type FieldType = Scalar | 'map' | MessageType | (() => MessageType);
export type FieldDef = readonly [no: number, type: FieldType, repeated?: 'repeated'];

export type Msg = Record<string, unknown>;

export function message(name: string, fields: Record<string, FieldDef>): MessageType {
  return { name, fields };
}

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

function resolve(t: FieldType): Scalar | 'map' | MessageType {
  return typeof t === 'function' ? t() : t;
}

// ---- encoding ----

class Writer {
  private chunks: Buffer[] = [];
  private cur: number[] = [];

  varint(v: bigint): void {
    let x = BigInt.asUintN(64, v);
    while (x > 0x7fn) {
      this.cur.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    this.cur.push(Number(x));
  }
  tag(no: number, wire: number): void {
    this.varint(BigInt(no * 8 + wire));
  }
  bytes(b: Uint8Array): void {
    this.varint(BigInt(b.length));
    this.flush();
    this.chunks.push(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
  }
  private flush(): void {
    if (this.cur.length) this.chunks.push(Buffer.from(this.cur));
    this.cur = [];
  }
  done(): Buffer {
    this.flush();
    return Buffer.concat(this.chunks);
  }
}

function toBigInt(v: unknown, what: string): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (typeof v === 'boolean') return v ? 1n : 0n;
  throw new TypeError(`${what} must be an integer, got ${String(v)}`);
}

function writeScalar(w: Writer, no: number, t: Scalar, v: unknown, what: string, always: boolean): void {
  switch (t) {
    case 'string': {
      if (typeof v !== 'string') throw new TypeError(`${what} must be a string`);
      if (v === '' && !always) return;
      w.tag(no, LEN);
      w.bytes(Buffer.from(v, 'utf8'));
      return;
    }
    case 'bytes': {
      const b = typeof v === 'string' ? Buffer.from(v, 'utf8') : v;
      if (!(b instanceof Uint8Array)) throw new TypeError(`${what} must be bytes`);
      if (b.length === 0 && !always) return;
      w.tag(no, LEN);
      w.bytes(b);
      return;
    }
    default: {
      const n = toBigInt(v, what);
      if (n === 0n && !always) return;
      if (t === 'int32') {
        if (n < -0x80000000n || n > 0x7fffffffn) throw new RangeError(`${what} is out of int32 range`);
      } else if (t === 'uint32') {
        if (n < 0n || n > 0xffffffffn) throw new RangeError(`${what} is out of uint32 range`);
      } else if (t === 'bool') {
        if (n !== 0n && n !== 1n) throw new TypeError(`${what} must be a boolean`);
      }
      w.tag(no, VARINT);
      w.varint(n); // negative int32/int64: ten-byte two's complement, as proto3 does
    }
  }
}

function writeMessage(w: Writer, type: MessageType, obj: Msg): void {
  if (typeof obj !== 'object' || obj === null) throw new TypeError(`${type.name} must be an object`);
  for (const key of Object.keys(obj)) {
    if (!(key in type.fields)) throw new TypeError(`${type.name} has no field ${key}`);
  }
  for (const [key, [no, ft, rep]] of Object.entries(type.fields)) {
    const v = obj[key];
    if (v === undefined || v === null) continue;
    const t = resolve(ft);
    const what = `${type.name}.${key}`;
    if (t === 'map') {
      for (const [k, val] of Object.entries(v as Record<string, string>)) {
        const entry = new Writer();
        writeScalar(entry, 1, 'string', k, `${what} key`, false);
        writeScalar(entry, 2, 'string', val, `${what}[${k}]`, false);
        w.tag(no, LEN);
        w.bytes(entry.done());
      }
      continue;
    }
    const items = rep ? (v as unknown[]) : [v];
    if (rep && !Array.isArray(v)) throw new TypeError(`${what} must be an array`);
    for (const item of items) {
      if (typeof t === 'object') {
        const inner = new Writer();
        writeMessage(inner, t, item as Msg);
        w.tag(no, LEN);
        w.bytes(inner.done());
      } else {
        writeScalar(w, no, t, item, what, rep === 'repeated');
      }
    }
  }
}

export function encode(type: MessageType, obj: Msg): Buffer {
  const w = new Writer();
  writeMessage(w, type, obj);
  return w.done();
}

// ---- decoding ----

export class ProtobufError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtobufError';
  }
}

class Reader {
  pos = 0;
  constructor(readonly buf: Buffer, readonly end = buf.length) {}

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtobufError('truncated varint');
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return BigInt.asUintN(64, result);
      shift += 7n;
    }
    throw new ProtobufError('varint longer than 10 bytes');
  }
  len(): Buffer {
    const n = this.varint();
    if (n > BigInt(this.end - this.pos)) throw new ProtobufError('length beyond the buffer');
    const out = this.buf.subarray(this.pos, this.pos + Number(n));
    this.pos += Number(n);
    return out;
  }
  skip(wire: number): void {
    switch (wire) {
      case VARINT: this.varint(); return;
      case I64: this.advance(8); return;
      case LEN: this.len(); return;
      case I32: this.advance(4); return;
      default: throw new ProtobufError(`unsupported wire type ${wire}`);
    }
  }
  private advance(n: number): void {
    if (this.pos + n > this.end) throw new ProtobufError('truncated fixed-width field');
    this.pos += n;
  }
}

function defaultOf(t: Scalar | 'map' | MessageType, rep: boolean): unknown {
  if (rep) return [];
  if (t === 'map') return {};
  if (typeof t === 'object') return undefined;
  switch (t) {
    case 'string': return '';
    case 'bytes': return Buffer.alloc(0);
    case 'bool': return false;
    case 'int64': return 0n;
    default: return 0;
  }
}

function fromVarint(t: Scalar, v: bigint): unknown {
  switch (t) {
    case 'bool': return v !== 0n;
    case 'int32': return Number(BigInt.asIntN(32, v));
    case 'uint32': return Number(BigInt.asUintN(32, v));
    case 'int64': return BigInt.asIntN(64, v);
    default: throw new ProtobufError(`varint for a ${t} field`);
  }
}

export function decode(type: MessageType, buf: Buffer): Msg {
  const byNo = new Map<number, [string, Scalar | 'map' | MessageType, boolean]>();
  const out: Msg = {};
  for (const [key, [no, ft, rep]] of Object.entries(type.fields)) {
    const t = resolve(ft);
    byNo.set(no, [key, t, rep === 'repeated']);
    out[key] = defaultOf(t, rep === 'repeated');
  }
  const r = new Reader(buf);
  while (r.pos < r.end) {
    const key = r.varint();
    const no = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (no === 0) throw new ProtobufError('field number 0');
    const f = byNo.get(no);
    if (!f) {
      r.skip(wire);
      continue;
    }
    const [name, t, rep] = f;
    const what = `${type.name}.${name}`;
    let value: unknown;
    if (t === 'map') {
      if (wire !== LEN) throw new ProtobufError(`${what}: wire type ${wire} for a map entry`);
      const entry = decode(MAP_ENTRY, r.len());
      (out[name] as Record<string, string>)[entry.key as string] = entry.value as string;
      continue;
    } else if (typeof t === 'object') {
      if (wire !== LEN) throw new ProtobufError(`${what}: wire type ${wire} for a message`);
      value = decode(t, r.len());
    } else if (t === 'string' || t === 'bytes') {
      if (wire !== LEN) throw new ProtobufError(`${what}: wire type ${wire} for ${t}`);
      const b = r.len();
      value = t === 'string' ? b.toString('utf8') : Buffer.from(b);
    } else if (wire === VARINT) {
      value = fromVarint(t, r.varint());
    } else if (wire === LEN && rep) {
      // packed repeated scalars
      const inner = new Reader(r.len());
      while (inner.pos < inner.end) (out[name] as unknown[]).push(fromVarint(t, inner.varint()));
      continue;
    } else {
      throw new ProtobufError(`${what}: wire type ${wire} for ${t}`);
    }
    if (rep) (out[name] as unknown[]).push(value);
    else out[name] = value; // last one wins, as proto3 says
  }
  return out;
}

const MAP_ENTRY = message('MapEntry', { key: [1, 'string'], value: [2, 'string'] });
