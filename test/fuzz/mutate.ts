// A small coverage-less mutation engine for the JS decoder fuzzers
// (scripts/fuzz-js.mjs). Deterministic for a given seed: a finding can be
// replayed with PODWIRE_FUZZ_SEED. The mutations know the two encodings the
// decoders read: netlink TLVs (u16 nla_len, u32 nlmsg_len, 4-byte aligned)
// and protobuf (varint keys and lengths).

/** splitmix32-style PRNG: fast, seedable, good enough to pick mutations. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 0x9e3779b9;
  }
  next(): number {
    let z = (this.s = (this.s + 0x9e3779b9) >>> 0);
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  }
  /** 0 <= n < max (max >= 1). */
  below(max: number): number {
    return max <= 1 ? 0 : this.next() % max;
  }
  chance(p: number): boolean {
    return this.next() / 0x1_0000_0000 < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.below(xs.length)]!;
  }
}

const INTERESTING8 = [0x00, 0x01, 0x02, 0x03, 0x04, 0x07, 0x08, 0x0f, 0x10, 0x7f, 0x80, 0x81, 0xfe, 0xff];
const INTERESTING16 = [0, 1, 3, 4, 5, 7, 8, 15, 16, 17, 20, 255, 256, 0x7fff, 0x8000, 0xfffc, 0xffff];
const INTERESTING32 = [0, 1, 15, 16, 17, 19, 20, 0x7fffffff, 0x80000000, 0xfffffff0, 0xfffffffc, 0xffffffff];

/** Protobuf varint bytes of a non-negative integer (beyond 2^53 by BigInt). */
export function varintBytes(v: number | bigint): number[] {
  let x = BigInt(v);
  const out: number[] = [];
  while (x > 0x7fn) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
}

/** Where a varint starting at `at` ends (exclusive), or -1 when it runs off the end or past 10 bytes. */
function varintEnd(b: Uint8Array, at: number): number {
  for (let i = at; i < b.length && i < at + 10; i++) if ((b[i]! & 0x80) === 0) return i + 1;
  return -1;
}

export interface MutatorOptions {
  /** Largest input produced. */
  maxLen: number;
  /** Which structure-aware mutations apply. */
  netlink?: boolean;
  protobuf?: boolean;
}

export type Mutation = (b: number[], rng: Rng, other: Uint8Array) => void;

/** Mutators by name (the name goes into a finding's report). */
export function mutations(opts: MutatorOptions): Record<string, Mutation> {
  const m: Record<string, Mutation> = {
    flipBit(b, r) {
      if (b.length) b[r.below(b.length)]! ^= 1 << r.below(8);
    },
    setByte(b, r) {
      if (b.length) b[r.below(b.length)] = r.chance(0.5) ? r.pick(INTERESTING8) : r.below(256);
    },
    addByte(b, r) {
      if (b.length) b[r.below(b.length)] = (b[r.below(b.length)]! + (r.chance(0.5) ? 1 : 255)) & 0xff;
    },
    insertBytes(b, r) {
      const n = 1 + r.below(r.chance(0.8) ? 4 : 64);
      const at = r.below(b.length + 1);
      const fill = r.chance(0.5) ? -1 : r.pick(INTERESTING8);
      b.splice(at, 0, ...Array.from({ length: n }, () => (fill < 0 ? r.below(256) : fill)));
    },
    deleteBytes(b, r) {
      if (!b.length) return;
      const at = r.below(b.length);
      b.splice(at, 1 + r.below(Math.min(b.length - at, r.chance(0.8) ? 4 : 64)));
    },
    duplicateRange(b, r) {
      if (!b.length) return;
      const at = r.below(b.length);
      const n = 1 + r.below(Math.min(b.length - at, 64));
      b.splice(r.below(b.length + 1), 0, ...b.slice(at, at + n));
    },
    truncate(b, r) {
      b.length = r.below(b.length + 1);
    },
    /** Another corpus item's range inserted or overwritten here. */
    splice(b, r, other) {
      if (!other.length) return;
      const at = r.below(other.length);
      const piece = [...other.subarray(at, at + 1 + r.below(other.length - at))];
      const to = r.below(b.length + 1);
      if (r.chance(0.5)) b.splice(to, 0, ...piece);
      else b.splice(to, piece.length, ...piece);
    },
    /** Crossover: this item's head, the other's tail. */
    crossover(b, r, other) {
      const cut = r.below(b.length + 1);
      b.splice(cut, b.length - cut, ...other.subarray(r.below(other.length + 1)));
    },
  };
  if (opts.netlink) {
    const aligned = (b: number[], r: Rng, w: number) => {
      const slots = Math.floor((b.length - w) / 4) + 1;
      return slots > 0 ? r.below(slots) * 4 : -1;
    };
    /** An nla_len (u16 LE at a 4-aligned offset): interesting, off by one/four, or "the rest". */
    m.nlaLen = (b, r) => {
      const at = aligned(b, r, 2);
      if (at < 0) return;
      const cur = b[at]! | (b[at + 1]! << 8);
      const v = r.pick([
        () => r.pick(INTERESTING16),
        () => cur + 1, () => cur - 1, () => cur + 4, () => cur - 4,
        () => b.length - at, () => b.length - at + 1, () => r.below(0x10000),
      ])() & 0xffff;
      b[at] = v & 0xff;
      b[at + 1] = v >>> 8;
    };
    /** The nested flag / type half of an attribute header. */
    m.nlaType = (b, r) => {
      const at = aligned(b, r, 4);
      if (at < 0) return;
      if (r.chance(0.5)) b[at + 3]! ^= 0x80;  // NLA_F_NESTED
      else b[at + 2] = r.below(16);
    };
    /** nlmsg_len (u32 LE) of the first message or one at an aligned offset. */
    m.nlmsgLen = (b, r) => {
      const at = r.chance(0.5) ? 0 : aligned(b, r, 4);
      if (at < 0 || at + 4 > b.length) return;
      const cur = (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16) | (b[at + 3]! << 24)) >>> 0;
      const v = r.pick([() => r.pick(INTERESTING32), () => cur + 1, () => cur - 1, () => b.length - at, () => cur + 4])() >>> 0;
      for (let k = 0; k < 4; k++) b[at + k] = (v >>> (8 * k)) & 0xff;
    };
  }
  if (opts.protobuf) {
    /** Replaces the varint at a random position by another value's encoding (lengths ±1, huge, 10 bytes). */
    m.varint = (b, r) => {
      if (!b.length) return;
      const at = r.below(b.length);
      const end = varintEnd(Uint8Array.from(b), at);
      const n = end < 0 ? 1 : end - at;
      let cur = 0;
      for (let i = 0; i < Math.min(n, 7); i++) cur += (b[at + i]! & 0x7f) * 128 ** i;
      const v = r.pick<() => number | bigint>([
        () => cur + 1, () => Math.max(0, cur - 1), () => 0, () => r.pick([1, 2, 5, 8, 10, 16, 26, 42]),
        () => 127, () => 128, () => 0x7fffffff, () => 0xffffffff, () => 2 ** 35 + cur, () => (1n << 63n) + BigInt(cur),
        () => (1n << 64n) - 1n,
      ])();
      const bytes = varintBytes(v);
      // Non-minimal encodings of the same value too: `0x80 0x00` for 0.
      if (r.chance(0.15)) {
        bytes[bytes.length - 1]! |= 0x80;
        bytes.push(0);
      }
      b.splice(at, n, ...bytes);
    };
    /** A key with another wire type or field number. */
    m.protoKey = (b, r) => {
      if (!b.length) return;
      const at = r.below(b.length);
      b.splice(at, 1, ...varintBytes(r.below(16) * 8 + r.below(8)));
    };
  }
  return m;
}

/** Mutates a copy of `input` with 1..maxStack stacked mutations; returns it and their names. */
export class Mutator {
  private readonly ops: Array<[string, Mutation]>;
  constructor(private readonly opts: MutatorOptions) {
    this.ops = Object.entries(mutations(opts));
  }
  mutate(input: Uint8Array, other: Uint8Array, rng: Rng, maxStack = 6): { data: Buffer; applied: string[] } {
    const b = [...input];
    const applied: string[] = [];
    const n = 1 + rng.below(maxStack);
    for (let i = 0; i < n; i++) {
      const [name, op] = rng.pick(this.ops);
      op(b, rng, other);
      applied.push(name);
    }
    if (b.length > this.opts.maxLen) b.length = this.opts.maxLen;
    return { data: Buffer.from(b), applied };
  }
}
