// The JS decoder fuzz targets. Each gets the built codec modules from the
// runner (scripts/fuzz-js.mjs resolves their dist/ paths in one place), so
// nothing here imports lib/ and the harness survives moves inside lib/.
//
// A target's `run` decodes one input and returns a short signature of the
// outcome (the engine keeps inputs with new signatures: cheap feedback
// without coverage). It throws a Finding when the decoder broke its
// contract: an error other than the documented ones, or a
// decode → encode → decode round trip that changed the value.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';

import type { MutatorOptions } from './mutate.js';

// ---- the shapes used from the codecs (structural: no lib/ import) ----

interface RawMsg { type: number; flags: number; seq: number; body: Buffer }
interface IpsetEntry { address: string; cidr?: number; port?: number; proto?: string; timeout?: number; comment?: string }
interface IpsetList { header: { name: string; type: string }; entries: IpsetEntry[] }

/** lib/net/nl/codec.ts */
export interface NlCodec {
  splitMessages(buf: Buffer | undefined): RawMsg[];
}
/** lib/net/ipset/codec.ts (was lib/net/ipset-codec.ts) */
export interface IpsetCodec {
  decodeList(msgs: RawMsg[]): IpsetList[];
  decodeNames(msgs: RawMsg[]): string[];
  decodeTypeReply(msgs: RawMsg[]): { revision: number; revisionMin: number } | undefined;
  normalizeEntry(e: IpsetEntry): unknown;
  entryOf(n: unknown): IpsetEntry;
  encodeAdtList(cmd: number, name: string, entries: readonly unknown[], exist: boolean): Buffer;
  encodeNames(cmd: number, name: string, name2?: string, exist?: boolean): Buffer;
  encodeList(name?: string, what?: 'all' | 'names' | 'header'): Buffer;
  encodeTypeQuery(type: string, family: string): Buffer;
  validateSetName(name: unknown): string;
  formatSave(sets: readonly IpsetList[]): string;
  IPSET_CMD: { LIST: number; ADD: number; TYPE: number };
}
/** lib/zds/codec.ts */
export interface ZdsCodec {
  encodeHello(version?: number): Buffer;
  encodeRequest(req: unknown): Buffer;
  encodeResponse(error?: string): Buffer;
  decodeHello(buf: Uint8Array): { version: number };
  decodeRequest(buf: Uint8Array): { type: string };
  decodeResponse(buf: Uint8Array): { ack: { error: string } | undefined };
}
/** lib/zds/errors.ts */
export interface ZdsErrors {
  ZdsError: new (...args: never[]) => Error & { code: string };
}

export interface Modules {
  nlCodec: NlCodec;
  ipsetCodec: IpsetCodec;
  zdsCodec: ZdsCodec;
  zdsErrors: ZdsErrors;
}

/** A contract violation: what broke, and the error behind it (its stack goes into the report). */
export class Finding extends Error {
  constructor(readonly kind: string, message: string, readonly original?: unknown) {
    super(message);
  }
}

export interface Target {
  name: string;
  describe: string;
  mutator: MutatorOptions;
  seeds(): Buffer[];
  run(input: Buffer): string;
}

const errSig = (e: unknown) => `${(e as Error)?.constructor?.name}:${String((e as Error)?.message).replace(/\d+/g, 'N').slice(0, 40)}`;

function unexpected(what: string, err: unknown): never {
  if (err instanceof Finding) throw err;
  throw new Finding('unexpected-error', `${what} threw ${(err as Error)?.constructor?.name ?? typeof err}: ${(err as Error)?.message ?? String(err)}`, err);
}

/** Runs `fn`; documented errors (per `allowed`) yield undefined, anything else is a Finding. */
function guarded<T>(what: string, fn: () => T, allowed: (e: unknown) => boolean): { value?: T; error?: unknown } {
  try {
    return { value: fn() };
  } catch (e) {
    if (allowed(e)) return { error: e };
    unexpected(what, e);
  }
}

const ARGUMENT_ERRORS = (e: unknown) => e instanceof TypeError || e instanceof RangeError;

// ---- ipset: what the kernel sends to IPSET_CMD_LIST / TYPE ----

const NFNL_SUBSYS_IPSET = 6;  // kernel ABI (include/uapi/linux/netfilter/nfnetlink.h)

function withType(msg: Buffer, type: number): Buffer {
  const b = Buffer.from(msg);
  b.writeUInt16LE(type, 4);
  return b;
}

function nla(type: number, payload: Buffer): Buffer {
  const len = 4 + payload.length;
  const b = Buffer.alloc((len + 3) & ~3);
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  payload.copy(b, 4);
  return b;
}

/** Appends attributes to a one-message buffer and fixes its nlmsg_len. */
function appendAttrs(msg: Buffer, ...attrs: Buffer[]): Buffer {
  const b = Buffer.concat([msg, ...attrs]);
  b.writeUInt32LE(b.length, 0);
  return b;
}

export function ipsetTarget(m: Modules, fixturesDir: string): Target {
  const { splitMessages } = m.nlCodec;
  const c = m.ipsetCodec;
  const LIST = (NFNL_SUBSYS_IPSET << 8) | c.IPSET_CMD.LIST;
  const TYPE = (NFNL_SUBSYS_IPSET << 8) | c.IPSET_CMD.TYPE;
  return {
    name: 'ipset-decode',
    describe: 'splitMessages + decodeList/decodeNames/decodeTypeReply (lib/net/ipset codec), ADT round trip',
    mutator: { maxLen: 4096, netlink: true },
    seeds() {
      const seeds: Buffer[] = [];
      for (const f of readdirSync(fixturesDir).filter((n) => n.endsWith('.bin')).sort()) seeds.push(readFileSync(join(fixturesDir, f)));
      // Encoder-built messages rewritten into the reply types the decoders read.
      const norm = (e: IpsetEntry) => c.normalizeEntry(e);
      const entries = [
        { address: '10.0.0.1', comment: 'pod-a', timeout: 30 }, { address: 'fd00::1' },
        { address: '10.2.0.0', cidr: 16 }, { address: '10.3.0.1', port: 53, proto: 'udp' },
        { address: '2001:db8::', cidr: 32, port: 443 }, { address: '10.9.9.9', comment: 'ü-ñ' },
      ].map(norm);
      seeds.push(withType(c.encodeAdtList(c.IPSET_CMD.ADD, 'fz-set', entries, true), LIST));
      seeds.push(withType(c.encodeAdtList(c.IPSET_CMD.ADD, 'fz-set', entries.slice(0, 2), true), LIST));
      const names = Buffer.concat(['a', 'bb', 'bb', 'ccc'].map((n) => withType(c.encodeList(n, 'names'), LIST)));
      seeds.push(names);
      seeds.push(appendAttrs(withType(c.encodeTypeQuery('hash:ip', 'inet'), TYPE), nla(4, Buffer.from([6])), nla(10, Buffer.from([0]))));
      return seeds;
    },
    run(input) {
      const split = guarded('splitMessages', () => splitMessages(input), (e) => e instanceof RangeError);
      if (!split.value) return errSig(split.error);
      const msgs = split.value;
      const sets = guarded('decodeList', () => c.decodeList(msgs), () => false).value!;
      const names = guarded('decodeNames', () => c.decodeNames(msgs), () => false).value!;
      const type = guarded('decodeTypeReply', () => c.decodeTypeReply(msgs), () => false).value;
      guarded('formatSave', () => c.formatSave(sets), () => false);
      for (const s of sets) {
        for (const e of s.entries) {
          if (typeof e.address !== 'string' || e.address === '') throw new Finding('bad-value', `entry without an address: ${JSON.stringify(e)}`);
        }
      }
      // decode -> encode -> decode: the entries our own validator accepts must come back equal.
      let roundTrips = 0;
      for (const s of sets) {
        const name = guarded('validateSetName', () => c.validateSetName(s.header.name), ARGUMENT_ERRORS);
        if (name.error !== undefined) continue;
        const norms: unknown[] = [];
        const want: IpsetEntry[] = [];
        for (const e of s.entries) {
          const n = guarded('normalizeEntry', () => c.normalizeEntry(e), ARGUMENT_ERRORS);
          if (n.error !== undefined) continue;
          norms.push(n.value);
          want.push(c.entryOf(n.value));
        }
        if (!norms.length) continue;
        const enc = guarded('encodeAdtList', () => c.encodeAdtList(c.IPSET_CMD.ADD, s.header.name, norms, true), (e) => e instanceof RangeError);
        if (!enc.value) continue;
        const again = c.decodeList(splitMessages(withType(enc.value, LIST)));
        const got = again.find((x) => x.header.name === s.header.name)?.entries ?? [];
        if (!isDeepStrictEqual(got, want)) {
          throw new Finding('round-trip', `set ${JSON.stringify(s.header.name)}: decoded ${JSON.stringify(want)}, re-encoded and decoded ${JSON.stringify(got)}`);
        }
        roundTrips++;
      }
      const shape = sets.map((s) => `${s.header.type.length > 0 ? 'T' : 't'}${s.entries.map((e) => Object.keys(e).length).join('')}`).join('|');
      return `ok:${msgs.length}:${msgs.map((x) => x.type === LIST ? 'L' : x.type === TYPE ? 'Y' : '?').join('')}:${shape}:${names.length}:${type ? 'rev' : '-'}:${roundTrips}`;
    },
  };
}

// ---- ZDS: what ztunnel sends (WorkloadResponse, ZdsHello) and what a server reads (WorkloadRequest) ----

export function zdsTarget(m: Modules): Target {
  const c = m.zdsCodec;
  const { ZdsError } = m.zdsErrors;
  const decodeErr = (e: unknown) => e instanceof ZdsError && e.code === 'ZDS_DECODE';
  return {
    name: 'zds-decode',
    describe: 'decodeHello/decodeRequest/decodeResponse (lib/zds/codec.ts), decode → encode → decode',
    mutator: { maxLen: 1024, protobuf: true },
    seeds() {
      const info = { name: 'pod-0', namespace: 'default', serviceAccount: 'sa' };
      return [
        c.encodeHello(), c.encodeHello(0x7fffffff),
        c.encodeRequest({ type: 'add', uid: '0b1e7a2c-0000-4000-8000-000000000001', workloadInfo: info }),
        c.encodeRequest({ type: 'add', uid: 'u', workloadInfo: undefined }),
        c.encodeRequest({ type: 'add', uid: 'ünï', workloadInfo: { name: '', namespace: 'n', serviceAccount: '' } }),
        c.encodeRequest({ type: 'del', uid: 'uid-2' }), c.encodeRequest({ type: 'keep', uid: 'uid-3' }),
        c.encodeRequest({ type: 'snapshot_sent' }),
        c.encodeResponse(), c.encodeResponse('no such pod'),
        Buffer.concat([c.encodeRequest({ type: 'del', uid: 'a' }), c.encodeRequest({ type: 'keep', uid: 'b' })]),
        Buffer.from([0x09, 1, 2, 3, 4, 5, 6, 7, 8, 0x15, 1, 2, 3, 4, 0x20, 0x01]),  // fixed64, fixed32, varint fields (skipped)
      ];
    },
    run(input) {
      const sig: string[] = [];
      const hello = guarded('decodeHello', () => c.decodeHello(input), decodeErr);
      if (hello.value) {
        const v = hello.value.version;
        if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new Finding('bad-value', `hello version ${v}`);
        if (v <= 0x7fffffff && c.decodeHello(c.encodeHello(v)).version !== v) throw new Finding('round-trip', `hello version ${v}`);
        sig.push('h');
      } else sig.push(errSig(hello.error));
      const req = guarded('decodeRequest', () => c.decodeRequest(input), decodeErr);
      if (req.value) {
        const r = req.value;
        if (r.type !== 'none') {
          const enc = guarded('encodeRequest', () => c.encodeRequest(r), () => false).value!;
          const again = guarded('decodeRequest(re-encoded)', () => c.decodeRequest(enc), () => false).value;
          if (!isDeepStrictEqual(again, r)) throw new Finding('round-trip', `request ${JSON.stringify(r)} came back as ${JSON.stringify(again)}`);
        }
        sig.push(`r${r.type}${'workloadInfo' in r && r.workloadInfo ? 'i' : ''}`);
      } else sig.push(errSig(req.error));
      const res = guarded('decodeResponse', () => c.decodeResponse(input), decodeErr);
      if (res.value) {
        const a = res.value.ack;
        if (a) {
          const again = c.decodeResponse(c.encodeResponse(a.error));
          if (!isDeepStrictEqual(again, res.value)) throw new Finding('round-trip', `response ${JSON.stringify(res.value)} came back as ${JSON.stringify(again)}`);
        }
        sig.push(a ? (a.error ? 'nack' : 'ack') : 'noack');
      } else sig.push(errSig(res.error));
      return sig.join('/');
    },
  };
}

export function allTargets(m: Modules, fixturesDir: string): Target[] {
  return [ipsetTarget(m, fixturesDir), zdsTarget(m)];
}
