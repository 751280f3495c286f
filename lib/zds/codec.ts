// ZDS messages (package istio.workload.zds, proto3) encoded and decoded by
// hand. The schema is six tiny messages of strings and sub-messages, so a
// ~150-line codec is smaller than a generated one plus a runtime dependency,
// and lets us pin the exact bytes: oneof members are always written (even
// empty, so no record is ever zero-length), empty proto3 strings are left
// out, and unknown fields are skipped as both upstream decoders do.
// Field numbers (see ../../../shared/spec/zds.md §2):
//   ZdsHello{version=1}  WorkloadInfo{name=1, namespace=2, service_account=3; 4 reserved}
//   AddWorkload{uid=1, workload_info=2}  KeepWorkload{uid=1}  DelWorkload{uid=2}  SnapshotSent{}
//   WorkloadRequest{oneof: add=1, del=2, snapshot_sent=3, keep=5}  WorkloadResponse{oneof: ack=1}  Ack{error=1}
import { ZdsError } from './errors.js';

export const ZDS_VERSION_V1 = 1;
/** Both sides read records into 1024-byte buffers; nothing longer may be sent. */
export const ZDS_MAX_RECORD = 1024;

export interface WorkloadInfo {
  name: string;
  namespace: string;
  serviceAccount: string;
}

export type WorkloadRequest =
  | { type: 'add'; uid: string; workloadInfo: WorkloadInfo | undefined }
  | { type: 'keep'; uid: string }
  | { type: 'del'; uid: string }
  | { type: 'snapshot_sent' }
  /** Decoded only: the payload was absent or an unknown oneof member (ztunnel: "no payload"). */
  | { type: 'none' };

export interface WorkloadResponse {
  /** undefined when the payload was absent (an unknown response type). */
  ack: { error: string } | undefined;
}

// ---- writing ----

const LEN = 2;
const VARINT = 0;
const utf8 = new TextEncoder();

class Writer {
  readonly bytes: number[] = [];
  varint(v: number): this {
    while (v > 0x7f) {
      this.bytes.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    this.bytes.push(v);
    return this;
  }
  tag(field: number, wire: number): this {
    return this.varint(field * 8 + wire);
  }
  /** A proto3 string: omitted when empty (implicit presence). */
  string(field: number, s: string): this {
    if (s === '') return this;
    const b = utf8.encode(s);
    this.tag(field, LEN).varint(b.length);
    for (const x of b) this.bytes.push(x);
    return this;
  }
  /** A message field: always written, even when empty (explicit presence). */
  message(field: number, inner: Writer): this {
    this.tag(field, LEN).varint(inner.bytes.length);
    for (const x of inner.bytes) this.bytes.push(x);
    return this;
  }
  done(): Buffer {
    return Buffer.from(this.bytes);
  }
}

function checkString(what: string, v: unknown): string {
  if (typeof v !== 'string') throw new TypeError(`${what} must be a string`);
  return v;
}

function workloadInfo(info: WorkloadInfo): Writer {
  if (typeof info !== 'object' || info === null) throw new TypeError('workloadInfo must be an object');
  return new Writer()
    .string(1, checkString('workloadInfo.name', info.name))
    .string(2, checkString('workloadInfo.namespace', info.namespace))
    .string(3, checkString('workloadInfo.serviceAccount', info.serviceAccount));
}

export function encodeHello(version = ZDS_VERSION_V1): Buffer {
  if (!Number.isInteger(version) || version < 0 || version > 0x7fffffff) throw new RangeError(`bad ZDS version ${version}`);
  return new Writer().tag(1, VARINT).varint(version).done();
}

export function encodeRequest(req: WorkloadRequest): Buffer {
  const w = new Writer();
  switch (req.type) {
    case 'add': {
      const add = new Writer().string(1, checkString('uid', req.uid));
      if (req.workloadInfo !== undefined) add.message(2, workloadInfo(req.workloadInfo));
      return w.message(1, add).done();
    }
    case 'del':
      return w.message(2, new Writer().string(2, checkString('uid', req.uid))).done();
    case 'snapshot_sent':
      return w.message(3, new Writer()).done();
    case 'keep':
      return w.message(5, new Writer().string(1, checkString('uid', req.uid))).done();
    default:
      throw new TypeError(`cannot encode a ZDS request of type ${(req as { type?: unknown }).type as string}`);
  }
}

/** An ack; a non-empty `error` is a nack. */
export function encodeResponse(error = ''): Buffer {
  return new Writer().message(1, new Writer().string(1, checkString('error', error))).done();
}

// ---- reading ----

const utf8Strict = new TextDecoder('utf-8', { fatal: true });

interface Field {
  no: number;
  wire: number;
  /** LEN payload, or undefined for other wire types. */
  bytes: Uint8Array | undefined;
  /** Low 32 bits of a varint (enough for enums). */
  value: number;
}

function fail(what: string): never {
  throw new ZdsError('ZDS_DECODE', `invalid ZDS message: ${what}`);
}

function* fields(buf: Uint8Array): Generator<Field> {
  let pos = 0;
  // Reads a varint, exact in its low 35 bits; `wide` says higher bits were set. A wide key or
  // length is an error (prost: "invalid key value" beyond u32, "buffer underflow"), never
  // silently truncated; varint values keep their low 32 bits.
  let wide = false;
  const varint = (): number => {
    let result = 0;
    let mul = 1;
    wide = false;
    for (let i = 0; i < 10; i++) {
      if (pos >= buf.length) fail('truncated varint');
      const b = buf[pos++]!;
      if (i < 5) result += (b & 0x7f) * mul;  // low 35 bits are plenty for tags and lengths
      else if ((b & 0x7f) !== 0) wide = true;
      if (i === 9 && b > 1) fail('varint overflows 64 bits');
      mul *= 128;
      if ((b & 0x80) === 0) return result;
    }
    fail('varint longer than 10 bytes');
  };
  while (pos < buf.length) {
    const key = varint();
    if (wide || key > 0xffffffff) fail('key wider than 32 bits');
    const no = Math.floor(key / 8);
    const wire = key % 8;
    if (no === 0) fail('field number 0');
    switch (wire) {
      case 0: {
        const v = varint();  // wide values keep their low 32 bits (as a u32 field would)
        yield { no, wire, bytes: undefined, value: v % 2 ** 32 };
        break;
      }
      case 1:
        if (pos + 8 > buf.length) fail('truncated fixed64');
        pos += 8;
        yield { no, wire, bytes: undefined, value: 0 };
        break;
      case 2: {
        const len = varint();
        if (wide || len > buf.length - pos) fail(`length ${wide ? '>= 2^35' : len} past the end`);
        const bytes = buf.subarray(pos, pos + len);
        pos += len;
        yield { no, wire, bytes, value: 0 };
        break;
      }
      case 5:
        if (pos + 4 > buf.length) fail('truncated fixed32');
        pos += 4;
        yield { no, wire, bytes: undefined, value: 0 };
        break;
      default:
        fail(`unsupported wire type ${wire}`);  // groups (3, 4) and 6, 7
    }
  }
}

function str(f: Field): string {
  if (f.wire !== LEN) fail(`field ${f.no} is not length-delimited`);
  try {
    return utf8Strict.decode(f.bytes!);
  } catch {
    fail(`field ${f.no} is not valid UTF-8`);
  }
}

function sub(f: Field): Uint8Array {
  if (f.wire !== LEN) fail(`field ${f.no} is not a message`);
  return f.bytes!;
}

function decodeUid(buf: Uint8Array, uidField: number): string {
  let uid = '';
  for (const f of fields(buf)) if (f.no === uidField) uid = str(f);
  return uid;
}

function decodeWorkloadInfo(buf: Uint8Array): WorkloadInfo {
  const info: WorkloadInfo = { name: '', namespace: '', serviceAccount: '' };
  for (const f of fields(buf)) {
    if (f.no === 1) info.name = str(f);
    else if (f.no === 2) info.namespace = str(f);
    else if (f.no === 3) info.serviceAccount = str(f);
  }
  return info;
}

export function decodeHello(buf: Uint8Array): { version: number } {
  let version = 0;
  for (const f of fields(buf)) {
    if (f.no !== 1) continue;
    if (f.wire !== VARINT) fail('ZdsHello.version is not a varint');
    version = f.value;
  }
  return { version };
}

export function decodeRequest(buf: Uint8Array): WorkloadRequest {
  let req: WorkloadRequest = { type: 'none' };
  // proto3 oneof: the last member on the wire wins; unknown numbers are skipped.
  for (const f of fields(buf)) {
    switch (f.no) {
      case 1: {
        let uid = '';
        let workloadInfo: WorkloadInfo | undefined;
        for (const g of fields(sub(f))) {
          if (g.no === 1) uid = str(g);
          else if (g.no === 2) workloadInfo = decodeWorkloadInfo(sub(g));
        }
        req = { type: 'add', uid, workloadInfo };
        break;
      }
      case 2:
        req = { type: 'del', uid: decodeUid(sub(f), 2) };
        break;
      case 3:
        for (const _ of fields(sub(f))) {
          // SnapshotSent has no fields; walking it still validates the bytes
        }
        req = { type: 'snapshot_sent' };
        break;
      case 5:
        req = { type: 'keep', uid: decodeUid(sub(f), 1) };
        break;
      default:
        break;
    }
  }
  return req;
}

export function decodeResponse(buf: Uint8Array): WorkloadResponse {
  let ack: { error: string } | undefined;
  for (const f of fields(buf)) {
    if (f.no !== 1) continue;
    let error = '';
    for (const g of fields(sub(f))) if (g.no === 1) error = str(g);
    ack = { error };
  }
  return { ack };
}
