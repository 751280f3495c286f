// nft rule statements → kernel expressions, the way nft 1.0.x linearises
// them (register 1 for data, implicit `meta nfproto` / `meta l4proto`
// dependencies inserted right before the header load that needs them,
// byte-aligned prefixes as shorter loads, constant folding of set values).
// Any statement or form outside this list is NftUnsupported.
import { parsePrefix } from '../ip.js';
import { NFPROTO, type NftCommand, type NftExpr } from './ir.js';

/** A statement or form the native compiler does not handle; `line` is 1-based. */
export class NftUnsupported extends Error {
  constructor(readonly reason: string, readonly line: number) {
    super(`line ${line}: ${reason}`);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'NftUnsupported', enumerable: false });
  }
}

const REG = 1;          // NFT_REG_1
const VERDICT_REG = 0;  // NFT_REG_VERDICT
const NF_NAT_RANGE_PROTO_SPECIFIED = 2;
const NFT_LOOKUP_F_INV = 1;
const NFT_SET_ANONYMOUS = 0x1;
const NFT_SET_CONSTANT = 0x2;
const IFNAMSIZ = 16;

/** nft datatypes of set keys: id (enum datatypes) and key length. */
export const SET_TYPES: Record<string, { keyType: number; keyLen: number }> = {
  ipv4_addr: { keyType: 7, keyLen: 4 },
  ipv6_addr: { keyType: 8, keyLen: 16 },
  inet_proto: { keyType: 12, keyLen: 1 },
  inet_service: { keyType: 13, keyLen: 2 },
  mark: { keyType: 19, keyLen: 4 },
  ifname: { keyType: 41, keyLen: IFNAMSIZ },
};

const L4PROTO: Record<string, number> = { tcp: 6, udp: 17, icmp: 1, icmpv6: 58, sctp: 132, udplite: 136 };
const CT_STATE: Record<string, number> = { invalid: 1, established: 2, related: 4, new: 8, untracked: 64 };

// --- bytes -------------------------------------------------------------------

const u8 = (v: number) => Buffer.of(v);
const u16be = (v: number) => { const b = Buffer.alloc(2); b.writeUInt16BE(v); return b; };
const u16 = (v: number) => { const b = Buffer.alloc(2); b.writeUInt16LE(v); return b; };
// Host order (x86/arm little-endian): marks, uids, ct state/mark are compared in host order.
const u32 = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); return b; };

function int(tok: string | undefined, max: number, what: string, line: number): number {
  if (tok === undefined || !/^(0x[0-9a-fA-F]+|\d+)$/.test(tok)) throw new NftUnsupported(`${what} ${tok ?? '(none)'} is not a number`, line);
  const v = Number(tok);
  if (v > max) throw new NftUnsupported(`${what} ${tok} out of range`, line);
  return v;
}

function ifname(tok: string | undefined, line: number): Buffer {
  if (tok === undefined) throw new NftUnsupported('missing interface name', line);
  const name = tok.startsWith('"') ? tok.slice(1, -1) : tok;
  if (name === '' || name.includes('*') || name.includes('\\') || Buffer.byteLength(name) >= IFNAMSIZ)
    throw new NftUnsupported(`interface name ${tok}`, line);
  const b = Buffer.alloc(IFNAMSIZ);
  b.write(name);
  return b;
}

function port(tok: string | undefined, line: number): number {
  return int(tok, 0xffff, 'port', line);
}

/** A set element's key bytes for the set type. */
export function encodeElementKey(type: string, tok: string, line: number): Buffer {
  switch (type) {
    case 'ipv4_addr':
    case 'ipv6_addr': {
      let p;
      try { p = parsePrefix(tok); } catch { throw new NftUnsupported(`address ${tok}`, line); }
      if (p.family !== (type === 'ipv4_addr' ? 4 : 6) || p.prefixLen !== p.bytes.length * 8)
        throw new NftUnsupported(`element ${tok} for a ${type} set (single addresses only)`, line);
      return p.bytes;
    }
    case 'inet_service': return u16be(port(tok, line));
    case 'inet_proto': {
      const v = L4PROTO[tok] ?? int(tok, 255, 'protocol', line);
      return u8(v);
    }
    case 'mark': return u32(int(tok, 0xffffffff, 'mark', line));
    case 'ifname': return ifname(tok, line);
  }
  throw new NftUnsupported(`elements of type ${type}`, line);
}

// --- rule placement ----------------------------------------------------------

/**
 * Which chains' rule lists this script fully knows (a `flush table` or
 * `flush chain` emptied them earlier in the same batch), so `index N` can be
 * turned into a position relative to a rule of this batch.
 */
export class RuleState {
  private readonly flushedTables = new Set<string>();
  private readonly chains = new Map<string, number[]>();
  private nextRuleId = 1;

  flushTable(fam: number, table: string): void {
    this.flushedTables.add(`${fam} ${table}`);
    for (const k of [...this.chains.keys()]) if (k.startsWith(`${fam} ${table} `)) this.chains.set(k, []);
  }

  flushChain(fam: number, table: string, chain: string): void {
    this.chains.set(`${fam} ${table} ${chain}`, []);
  }

  private list(fam: number, table: string, chain: string): number[] | undefined {
    const k = `${fam} ${table} ${chain}`;
    let l = this.chains.get(k);
    if (!l && this.flushedTables.has(`${fam} ${table}`)) this.chains.set(k, (l = []));
    return l;
  }

  /** Gives the rule an id and, for `index N`, its position id. */
  place(cmd: NftCommand, fam: number, table: string, chain: string, index: number | undefined, line: number): void {
    const id = this.nextRuleId++;
    cmd.ruleId = id;
    const l = this.list(fam, table, chain);
    if (index !== undefined) {
      if (cmd.position !== undefined) throw new NftUnsupported('both index and handle', line);
      if (!l) throw new NftUnsupported(`index into chain ${chain}, whose rules this script does not know`, line);
      const ref = l[index];
      if (ref === undefined) throw new NftUnsupported(`index ${index} past the end of chain ${chain}`, line);
      cmd.positionId = ref;
      const at = cmd.append ? index + 1 : index;
      l.splice(at, 0, id);
      return;
    }
    if (cmd.position !== undefined) {
      // Relative to a rule that was there before: the list is no longer known.
      this.chains.delete(`${fam} ${table} ${chain}`);
      return;
    }
    if (l) {
      if (cmd.append) l.push(id);
      else l.unshift(id);
    }
  }
}

// --- statements --------------------------------------------------------------

interface Ctx {
  family: number;
  line: number;
  nfproto?: 'ip' | 'ip6';
  l4proto?: number;
  exprs: NftExpr[];
  anonSets: NftCommand[];
  setOf: (name: string) => { keyType: number; setId: number; type: string } | undefined;
  newSetId: () => number;
}

type Rel = 'eq' | 'neq';

function relOp(toks: string[], i: number): [Rel | 'lt' | 'lte' | 'gt' | 'gte' | undefined, number] {
  switch (toks[i]) {
    case '==': case 'eq': return ['eq', i + 1];
    case '!=': case 'ne': return ['neq', i + 1];
    case '<': case 'lt': return ['lt', i + 1];
    case '<=': case 'le': return ['lte', i + 1];
    case '>': case 'gt': return ['gt', i + 1];
    case '>=': case 'ge': return ['gte', i + 1];
  }
  return [undefined, i];
}

function needEqNeq(op: string | undefined, line: number): Rel {
  if (op === undefined || op === 'eq') return 'eq';
  if (op === 'neq') return 'neq';
  throw new NftUnsupported(`operator ${op}`, line);
}

const meta = (key: string): NftExpr => ({ type: 'meta', key, dreg: REG });
const cmp = (op: string, data: Buffer): NftExpr => ({ type: 'cmp', key: op, sreg: REG, data });

function needNfproto(c: Ctx, want: 'ip' | 'ip6'): void {
  if (c.family === NFPROTO.ip || c.family === NFPROTO.ip6) {
    if ((c.family === NFPROTO.ip) !== (want === 'ip')) throw new NftUnsupported(`${want} match in a table of the other family`, c.line);
    return;
  }
  if (c.nfproto === want) return;
  if (c.nfproto !== undefined) throw new NftUnsupported('ip and ip6 matches in one rule', c.line);
  c.exprs.push(meta('nfproto'), cmp('eq', u8(want === 'ip' ? NFPROTO.ip : NFPROTO.ip6)));
  c.nfproto = want;
}

function needL4proto(c: Ctx, proto: number): void {
  if (c.l4proto === proto) return;
  if (c.l4proto !== undefined) throw new NftUnsupported('two transport protocols in one rule', c.line);
  c.exprs.push(meta('l4proto'), cmp('eq', u8(proto)));
  c.l4proto = proto;
}

/** `{ a, b, c }` at toks[i]: the element tokens and the index after `}`. */
function braceList(toks: string[], i: number, line: number): [string[], number] {
  const items: string[] = [];
  let j = i + 1;
  for (; j < toks.length && toks[j] !== '}'; j++) {
    if (toks[j] === ',') continue;
    items.push(toks[j]!);
    if (toks[j + 1] !== ',' && toks[j + 1] !== '}') throw new NftUnsupported('set element with options in a rule', line);
  }
  if (toks[j] !== '}' || items.length === 0) throw new NftUnsupported('malformed anonymous set', line);
  return [items, j + 1];
}

/** An anonymous constant set for `{ ... }` and the lookup into it. */
function anonLookup(c: Ctx, type: string, items: string[], op: Rel): void {
  const t = SET_TYPES[type]!;
  const setId = c.newSetId();
  const fam = c.family;
  const keys = items.map((it) => encodeElementKey(type, it, c.line));
  c.anonSets.push(
    { op: 'newset', family: fam, table: '', name: '__set%d', setFlags: NFT_SET_ANONYMOUS | NFT_SET_CONSTANT,
      keyType: t.keyType, keyLen: t.keyLen, setId, size: keys.length },
    { op: 'newelem', family: fam, table: '', name: '__set%d', setId, elems: keys.map((key) => ({ key })) },
  );
  c.exprs.push({ type: 'lookup', sreg: REG, set: '__set%d', setId, ...(op === 'neq' ? { flags: NFT_LOOKUP_F_INV } : {}) });
}

/** Address match after `ip|ip6 saddr|daddr`; returns the next index. */
function addrMatch(c: Ctx, toks: string[], i: number, fam: 'ip' | 'ip6', dir: 'saddr' | 'daddr'): number {
  const [rawOp, j] = relOp(toks, i);
  const op = needEqNeq(rawOp, c.line);
  needNfproto(c, fam);
  const alen = fam === 'ip' ? 4 : 16;
  const offset = fam === 'ip' ? (dir === 'saddr' ? 12 : 16) : (dir === 'saddr' ? 8 : 24);
  const v = toks[j];
  if (v === undefined) throw new NftUnsupported(`${fam} ${dir} without a value`, c.line);
  const load = (len: number): NftExpr => ({ type: 'payload', base: 'nh', offset, len, dreg: REG });
  if (v.startsWith('@')) {
    const name = v.slice(1);
    const s = c.setOf(name);
    if (s && s.type !== (fam === 'ip' ? 'ipv4_addr' : 'ipv6_addr')) throw new NftUnsupported(`set ${name} has type ${s.type}`, c.line);
    c.exprs.push(load(alen), { type: 'lookup', sreg: REG, set: name, ...(s ? { setId: s.setId } : {}), ...(op === 'neq' ? { flags: NFT_LOOKUP_F_INV } : {}) });
    return j + 1;
  }
  if (v === '{') {
    const [items, next] = braceList(toks, j, c.line);
    c.exprs.push(load(alen));
    anonLookup(c, fam === 'ip' ? 'ipv4_addr' : 'ipv6_addr', items, op);
    return next;
  }
  let p;
  try { p = parsePrefix(v); } catch { throw new NftUnsupported(`address ${v}`, c.line); }
  if (p.family !== (fam === 'ip' ? 4 : 6)) throw new NftUnsupported(`${v} is not an ${fam} address`, c.line);
  if (p.prefixLen === 0) throw new NftUnsupported(`${v}: a /0 prefix`, c.line);
  if (p.prefixLen % 8 === 0) {
    // nft loads only the prefix's bytes.
    const n = p.prefixLen / 8;
    c.exprs.push(load(n), cmp(op, p.bytes.subarray(0, n)));
  } else {
    const mask = Buffer.alloc(alen);
    for (let b = 0; b < p.prefixLen; b++) mask[b >> 3]! |= 0x80 >> (b & 7);
    const net = Buffer.from(p.bytes.map((x, k) => x & mask[k]!));
    c.exprs.push(load(alen), { type: 'bitwise', sreg: REG, dreg: REG, mask, xor: Buffer.alloc(alen) }, cmp(op, net));
  }
  return j + 1;
}

/** Port match after `tcp|udp sport|dport`. */
function portMatch(c: Ctx, toks: string[], i: number, proto: number, dir: 'sport' | 'dport'): number {
  const [rawOp, j] = relOp(toks, i);
  needL4proto(c, proto);
  const load: NftExpr = { type: 'payload', base: 'th', offset: dir === 'sport' ? 0 : 2, len: 2, dreg: REG };
  const v = toks[j];
  if (v === '{') {
    const [items, next] = braceList(toks, j, c.line);
    if (items.some((x) => x.includes('-'))) throw new NftUnsupported('port ranges in a set (interval sets)', c.line);
    c.exprs.push(load);
    anonLookup(c, 'inet_service', items, needEqNeq(rawOp, c.line));
    return next;
  }
  const range = v !== undefined ? /^(\d+)-(\d+)$/.exec(v) : null;
  if (range) {
    const op = needEqNeq(rawOp, c.line);
    c.exprs.push(load, { type: 'range', key: op, sreg: REG, data: u16be(port(range[1], c.line)), data2: u16be(port(range[2], c.line)) });
    return j + 1;
  }
  c.exprs.push(load, cmp(rawOp ?? 'eq', u16be(port(v, c.line))));
  return j + 1;
}

/** `KEY [and|& MASK] [op] VALUE` for 32-bit host-order keys (marks, uids). */
function u32Match(c: Ctx, toks: string[], i: number, load: NftExpr, what: string): number {
  let j = i;
  let mask: number | undefined;
  if (toks[j] === 'and' || toks[j] === '&') {
    mask = int(toks[j + 1], 0xffffffff, `${what} mask`, c.line);
    j += 2;
  }
  const [op, k] = relOp(toks, j);
  const v = int(toks[k], 0xffffffff, what, c.line);
  c.exprs.push(load);
  if (mask !== undefined) c.exprs.push({ type: 'bitwise', sreg: REG, dreg: REG, mask: u32(mask), xor: u32(0) });
  c.exprs.push(cmp(op ?? 'eq', u32(v)));
  return k + 1;
}

/**
 * The value of `meta mark set` / `ct mark set`: a constant (folded), or
 * `mark`/`meta mark`/`ct mark` combined with & | ^ constants (one bitwise).
 */
function setValue(c: Ctx, toks: string[], i: number): [number | { src: NftExpr; mask: number; xor: number }, number] {
  let j = i;
  let src: NftExpr | undefined;
  let constant: number | undefined;
  if (toks[j] === 'ct' && toks[j + 1] === 'mark') { src = { type: 'ct', key: 'mark', dreg: REG }; j += 2; }
  else if (toks[j] === 'meta' && toks[j + 1] === 'mark') { src = meta('mark'); j += 2; }
  else if (toks[j] === 'mark') { src = meta('mark'); j += 1; }
  else { constant = int(toks[j], 0xffffffff, 'value', c.line); j += 1; }
  let mask = 0xffffffff;
  let xor = 0;
  for (;;) {
    const opTok = toks[j];
    const op = opTok === 'and' || opTok === '&' ? '&' : opTok === 'or' || opTok === '|' ? '|' : opTok === 'xor' || opTok === '^' ? '^' : undefined;
    if (!op) break;
    const v = int(toks[j + 1], 0xffffffff, 'operand', c.line);
    j += 2;
    if (constant !== undefined) {
      constant = (op === '&' ? constant & v : op === '|' ? constant | v : constant ^ v) >>> 0;
    } else if (op === '&') { mask = (mask & v) >>> 0; xor = (xor & v) >>> 0; }
    else if (op === '|') { mask = (mask & ~v) >>> 0; xor = (xor | v) >>> 0; }
    else xor = (xor ^ v) >>> 0;
  }
  if (constant !== undefined) return [constant, j];
  return [{ src: src!, mask, xor }, j];
}

/** Emits the value into register 1. */
function loadValue(c: Ctx, v: number | { src: NftExpr; mask: number; xor: number }): void {
  if (typeof v === 'number') {
    c.exprs.push({ type: 'immediate', dreg: REG, data: u32(v) });
    return;
  }
  c.exprs.push(v.src);
  if (v.mask !== 0xffffffff || v.xor !== 0) c.exprs.push({ type: 'bitwise', sreg: REG, dreg: REG, mask: u32(v.mask), xor: u32(v.xor) });
}

const VERDICTS = new Set(['accept', 'drop', 'return', 'continue']);

function statement(c: Ctx, toks: string[], i: number): number {
  const t = toks[i]!;
  const line = c.line;
  // meta keys, with or without `meta`
  let key = t;
  let j = i + 1;
  if (t === 'meta') { key = toks[i + 1] ?? ''; j = i + 2; }
  switch (key) {
    case 'mark':
      if (toks[j] === 'set') {
        const [v, next] = setValue(c, toks, j + 1);
        loadValue(c, v);
        c.exprs.push({ type: 'meta', key: 'mark', sreg: REG });
        return next;
      }
      return u32Match(c, toks, j, meta('mark'), 'mark');
    case 'skuid':
    case 'skgid':
      return u32Match(c, toks, j, meta(key), key);
    case 'iifname':
    case 'oifname': {
      const [op, k] = relOp(toks, j);
      c.exprs.push(meta(key), cmp(needEqNeq(op, line), ifname(toks[k], line)));
      return k + 1;
    }
    case 'l4proto':
    case 'nfproto': {
      if (t !== 'meta') break;
      const [rawOp, k] = relOp(toks, j);
      const op = needEqNeq(rawOp, line);
      const v = toks[k];
      if (key === 'l4proto') {
        if (v === '{') throw new NftUnsupported('protocol sets', line);
        const p = L4PROTO[v ?? ''] ?? int(v, 255, 'protocol', line);
        c.exprs.push(meta('l4proto'), cmp(op, u8(p)));
        if (op === 'eq') c.l4proto = p;
      } else {
        if (v !== 'ipv4' && v !== 'ipv6') throw new NftUnsupported(`meta nfproto ${v ?? ''}`, line);
        c.exprs.push(meta('nfproto'), cmp(op, u8(v === 'ipv4' ? NFPROTO.ip : NFPROTO.ip6)));
        if (op === 'eq') c.nfproto = v === 'ipv4' ? 'ip' : 'ip6';
      }
      return k + 1;
    }
  }
  switch (t) {
    case 'ip':
    case 'ip6': {
      const dir = toks[i + 1];
      if (dir !== 'saddr' && dir !== 'daddr') throw new NftUnsupported(`${t} ${dir ?? ''}`, line);
      return addrMatch(c, toks, i + 2, t, dir);
    }
    case 'tcp':
    case 'udp': {
      const dir = toks[i + 1];
      if (dir !== 'sport' && dir !== 'dport') throw new NftUnsupported(`${t} ${dir ?? ''}`, line);
      return portMatch(c, toks, i + 2, L4PROTO[t]!, dir);
    }
    case 'ct': {
      const k = toks[i + 1];
      if (k === 'mark' && toks[i + 2] === 'set') {
        const [v, next] = setValue(c, toks, i + 3);
        loadValue(c, v);
        c.exprs.push({ type: 'ct', key: 'mark', sreg: REG });
        return next;
      }
      if (k === 'mark') return u32Match(c, toks, i + 2, { type: 'ct', key: 'mark', dreg: REG }, 'ct mark');
      if (k === 'zone' && toks[i + 2] === 'set') {
        c.exprs.push({ type: 'immediate', dreg: REG, data: u16(int(toks[i + 3], 0xffff, 'zone', line)) }, { type: 'ct', key: 'zone', sreg: REG });
        return i + 4;
      }
      if (k === 'state') {
        const [rawOp, j2] = relOp(toks, i + 2);
        const op = needEqNeq(rawOp, line);
        // `a,b,c` arrives as tokens a , b , c
        const names = [toks[j2] ?? ''];
        let end = j2 + 1;
        while (toks[end] === ',' && toks[end + 1] !== undefined) { names.push(toks[end + 1]!); end += 2; }
        let bits = 0;
        for (const n of names) {
          const b = CT_STATE[n];
          if (b === undefined) throw new NftUnsupported(`ct state ${n}`, line);
          bits |= b;
        }
        c.exprs.push({ type: 'ct', key: 'state', dreg: REG }, { type: 'bitwise', sreg: REG, dreg: REG, mask: u32(bits), xor: u32(0) },
          cmp(op === 'eq' ? 'neq' : 'eq', u32(0)));
        return end;
      }
      throw new NftUnsupported(`ct ${k ?? ''}`, line);
    }
    case 'counter':
      if (toks[i + 1] === 'packets' || toks[i + 1] === 'name') throw new NftUnsupported('counter with values or a name', line);
      c.exprs.push({ type: 'counter' });
      return i + 1;
    case 'jump':
    case 'goto': {
      const target = toks[i + 1];
      if (target === undefined || !/^[A-Za-z_][A-Za-z0-9_./-]*$/.test(target)) throw new NftUnsupported(`${t} target`, line);
      c.exprs.push({ type: 'immediate', dreg: VERDICT_REG, key: t, chain: target });
      return i + 2;
    }
    case 'redirect': {
      if (toks[i + 1] !== 'to') {
        c.exprs.push({ type: 'redir' });
        return i + 1;
      }
      const m = /^:(\d+)$/.exec(toks[i + 2] ?? '');
      if (!m) throw new NftUnsupported(`redirect to ${toks[i + 2] ?? ''}`, line);
      c.exprs.push({ type: 'immediate', dreg: REG, data: u16be(port(m[1], line)) },
        { type: 'redir', regPort: REG, flags: NF_NAT_RANGE_PROTO_SPECIFIED });
      return i + 3;
    }
    case 'snat':
    case 'dnat': {
      let j2 = i + 1;
      let fam: 'ip' | 'ip6' | undefined;
      if (toks[j2] === 'ip' || toks[j2] === 'ip6') fam = toks[j2++] as 'ip' | 'ip6';
      if (toks[j2] !== 'to') throw new NftUnsupported(`${t} without "to"`, line);
      const v = toks[j2 + 1] ?? '';
      let p;
      try { p = parsePrefix(v); } catch { throw new NftUnsupported(`${t} to ${v} (address only)`, line); }
      if (p.prefixLen !== p.bytes.length * 8) throw new NftUnsupported(`${t} to a prefix`, line);
      const af = p.family === 4 ? 'ip' : 'ip6';
      if (fam !== undefined && fam !== af) throw new NftUnsupported(`${t} ${fam} to an address of the other family`, line);
      // In inet tables nft takes the family from an earlier ip/ip6 match; without one we let nft decide.
      const ctxFam = c.family === NFPROTO.inet ? c.nfproto : c.family === NFPROTO.ip ? 'ip' : 'ip6';
      if (ctxFam !== af) throw new NftUnsupported(`${t} without a matching ${af} match before it`, line);
      c.exprs.push({ type: 'immediate', dreg: REG, data: p.bytes },
        { type: 'nat', key: t, family: af === 'ip' ? NFPROTO.ip : NFPROTO.ip6, regAddr: REG });
      return j2 + 2;
    }
    case 'tproxy': {
      let j2 = i + 1;
      let fam: 'ip' | 'ip6' | undefined;
      if (toks[j2] === 'ip' || toks[j2] === 'ip6') fam = toks[j2++] as 'ip' | 'ip6';
      const m = toks[j2] === 'to' ? /^:(\d+)$/.exec(toks[j2 + 1] ?? '') : null;
      if (!m) throw new NftUnsupported('tproxy other than "to :PORT"', line);
      const ctxFam = c.family === NFPROTO.inet ? c.nfproto : c.family === NFPROTO.ip ? 'ip' : 'ip6';
      if (fam === undefined || ctxFam !== fam) throw new NftUnsupported('tproxy without an explicit family matching an earlier ip/ip6 match', line);
      if (c.l4proto !== L4PROTO.tcp && c.l4proto !== L4PROTO.udp) throw new NftUnsupported('tproxy without a tcp/udp match', line);
      c.exprs.push({ type: 'immediate', dreg: REG, data: u16be(port(m[1], line)) },
        { type: 'tproxy', family: fam === 'ip' ? NFPROTO.ip : NFPROTO.ip6, regPort: REG });
      return j2 + 2;
    }
  }
  if (VERDICTS.has(t)) {
    c.exprs.push({ type: 'immediate', dreg: VERDICT_REG, key: t });
    return i + 1;
  }
  throw new NftUnsupported(`statement ${JSON.stringify(toks.slice(i, i + 3).join(' '))}`, line);
}

/** Lowers one rule body. Anonymous sets it needs come back as commands to send before it. */
export function lowerRule(
  toks: string[], family: number, line: number,
  setOf: Ctx['setOf'], newSetId: () => number,
): { exprs: NftExpr[]; anonSets: NftCommand[] } {
  const c: Ctx = { family, line, exprs: [], anonSets: [], setOf, newSetId };
  if (family === NFPROTO.ip) c.nfproto = 'ip';
  if (family === NFPROTO.ip6) c.nfproto = 'ip6';
  let i = 0;
  while (i < toks.length) i = statement(c, toks, i);
  return { exprs: c.exprs, anonSets: c.anonSets };
}
