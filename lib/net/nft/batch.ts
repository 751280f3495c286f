// nftables without nft on the hot path: an nft script (or a Transaction) is
// compiled once into one nfnetlink batch; `send` pushes those bytes into a
// netns through its cached NETLINK_NETFILTER socket as one atomic
// transaction (a failing pod keeps its previous rules); `verify` dumps the
// tables back and reports any drift. Scripts outside the compiled subset go
// through `nft -f -` inside the netns, and say so (onFallback / the result).
import { native } from '../binding.js';
import { NetError } from '../errors.js';
import type { Netns } from '../netns/netns.js';
import { apply as nftApply, list as nftList, listText as nftListText } from './tool.js';
import { Transaction } from './transaction.js';
import { NFT_MSG, type NftCommand, type NftObject } from './ir.js';
import { NftUnsupported, parseScript, type NftSourceCommand } from './parse.js';
import { dumpRecords, type NftTableId } from './dump.js';
import { decodeRecords, recordText, type NftRecord } from './records.js';
import type { NlTransport } from '../nl/transport.js';

export { NftUnsupported } from './parse.js';

export interface Fallback {
  reason: string;
  /** 1-based script line that could not be compiled. */
  line?: number;
}

export interface CompileOptions {
  /** Told once, at compile time, when the script must go through `nft -f`. */
  onFallback?: (f: Fallback) => void;
}

export interface SendOptions {
  /** Told on every send that goes through `nft -f` (default: a process warning, once per compiled script). */
  onFallback?: (f: Fallback) => void;
  timeoutMs?: number;
}

export interface SendResult {
  path: 'netlink' | 'exec';
  reason?: string;
}

/** A script compiled for sending to many netns. Immutable; reuse it. */
export class CompiledNft {
  readonly path: 'netlink' | 'exec';
  readonly script: string;
  /** Why the script goes through `nft -f` (path 'exec'). */
  readonly fallback?: Fallback;
  /** The batch commands (path 'netlink'). */
  readonly commands: readonly NftCommand[];
  readonly sources: readonly NftSourceCommand[];
  /** @internal */ readonly batch?: Buffer;
  /** @internal message index → command index (-1 for batch begin/end). */
  readonly msgCommand?: Int32Array;
  #expected?: NftObject[];
  #warned = false;

  /** @internal use compile() */
  constructor(script: string, parsed: { commands: NftCommand[]; sources: NftSourceCommand[] } | Fallback) {
    this.script = script;
    if ('reason' in parsed) {
      this.path = 'exec';
      this.fallback = parsed;
      this.commands = [];
      this.sources = [];
      return;
    }
    this.path = 'netlink';
    this.commands = parsed.commands;
    this.sources = parsed.sources;
    if (parsed.commands.length > 0) {
      const { batch, msgCommand } = native().nftEncode(parsed.commands, { ackEach: false });
      this.batch = batch;
      this.msgCommand = msgCommand;
    }
  }

  /** Size of the batch in bytes (0 when empty or exec). */
  get size(): number {
    return this.batch?.length ?? 0;
  }

  /** The batch's own messages decoded (what verify expects to find). */
  expected(): NftObject[] {
    // The decoder's objects are this IR (native/nft/nft_decode.cc builds them; lib/native.ts types them loosely).
    if (!this.#expected) this.#expected = this.batch ? native().nftDecode(this.batch) as NftObject[] : [];
    return this.#expected;
  }

  /** @internal whether the default warning was already printed. */
  warnOnce(): boolean {
    if (this.#warned) return false;
    this.#warned = true;
    return true;
  }
}

/**
 * Compiles an nft script or Transaction. Never throws for unsupported syntax:
 * the result's `path` is then 'exec' and `fallback` says why.
 */
export function compile(input: string | Transaction, opts: CompileOptions = {}): CompiledNft {
  const script = input instanceof Transaction ? input.toString() : input;
  if (typeof script !== 'string') throw new TypeError('nft.compile: expected a script string or a Transaction');
  let compiled: CompiledNft;
  try {
    compiled = new CompiledNft(script, parseScript(script));
  } catch (err) {
    if (err instanceof NftUnsupported) {
      compiled = new CompiledNft(script, { reason: err.reason, line: err.line });
    } else if (err instanceof TypeError && (err as { code?: unknown }).code === 'NFT_ENCODE') {
      // The encoder refused a value the parser let through (a bound it checks): exec handles it.
      compiled = new CompiledNft(script, { reason: err.message });
    } else {
      throw err;
    }
  }
  if (compiled.fallback) opts.onFallback?.(compiled.fallback);
  return compiled;
}

/** A kernel error for one command of a batch: which command and script line caused it. */
export class NftBatchError extends NetError {
  /** Index of the failing command in `compiled.commands`. */
  readonly command: number;
  readonly line: number;
  readonly lineText: string;

  constructor(cause: NetError, command: number, source: NftSourceCommand, op: string) {
    super(`${op} failed at line ${source.line} (${source.text}): ${cause.code}${cause.extack ? ` (${cause.extack})` : ''}`, {
      errno: cause.errno, op, code: cause.code,
      ...(cause.extack !== undefined ? { extack: cause.extack } : {}),
      ...(cause.extackOffset !== undefined ? { extackOffset: cause.extackOffset } : {}),
      ...(cause.index !== undefined ? { index: cause.index } : {}),
      cause,
    });
    this.command = command;
    this.line = source.line;
    this.lineText = source.text;
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'NftBatchError', enumerable: false });
  }
}

const MSG_NAMES: Record<string, string> = {
  newtable: 'NFT_MSG_NEWTABLE', deltable: 'NFT_MSG_DELTABLE', flushtable: 'NFT_MSG_DELRULE',
  newchain: 'NFT_MSG_NEWCHAIN', delchain: 'NFT_MSG_DELCHAIN', flushchain: 'NFT_MSG_DELRULE',
  newrule: 'NFT_MSG_NEWRULE', newset: 'NFT_MSG_NEWSET', delset: 'NFT_MSG_DELSET',
  flushset: 'NFT_MSG_DELSETELEM', newelem: 'NFT_MSG_NEWSETELEM', delelem: 'NFT_MSG_DELSETELEM',
};

function defaultWarn(compiled: CompiledNft, f: Fallback): void {
  if (!compiled.warnOnce()) return;
  process.emitWarning(`nft script sent with nft -f: ${f.reason}${f.line ? ` (line ${f.line})` : ''}`, { code: 'PODWIRE_NFT_EXEC' });
}

/**
 * Sends a compiled script into the netns: one sendmsg of the whole batch
 * through the netns's cached netfilter socket; all or nothing. A kernel
 * error becomes an NftBatchError naming the command and line. Scripts that
 * did not compile run as `nft -f -` inside the netns (reported through
 * onFallback and the result).
 */
export async function send(ns: Netns, compiled: CompiledNft, opts: SendOptions = {}): Promise<SendResult> {
  if (!(compiled instanceof CompiledNft)) throw new TypeError('nft.send: expected a CompiledNft (from nft.compile)');
  if (compiled.path === 'exec') {
    const f = compiled.fallback!;
    if (opts.onFallback) opts.onFallback(f);
    else defaultWarn(compiled, f);
    await nftApply(ns, compiled.script, opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs });
    return { path: 'exec', reason: f.reason };
  }
  if (!compiled.batch) return { path: 'netlink' };
  await sendOn((await ns.netlink()).nfnetlink, compiled);
  return { path: 'netlink' };
}

/** Sends a compiled batch through a given NETLINK_NETFILTER transport (the socket decides the netns). */
export async function sendOn(nf: NlTransport, compiled: CompiledNft): Promise<void> {
  if (compiled.path !== 'netlink') throw new TypeError(`nft.sendOn: the script is not compiled (${compiled.fallback?.reason ?? ''})`);
  if (!compiled.batch) return;
  try {
    await nf.request(compiled.batch, 'NFNL_MSG_BATCH', true);
  } catch (err) {
    throw mapBatchError(compiled, err);
  }
}

function mapBatchError(compiled: CompiledNft, err: unknown): unknown {
  if (!(err instanceof NetError) || err.index === undefined || !compiled.msgCommand) return err;
  const cmd = compiled.msgCommand[err.index];
  if (cmd === undefined || cmd < 0) return err;
  const c = compiled.commands[cmd]!;
  return new NftBatchError(err, cmd, compiled.sources[cmd]!, MSG_NAMES[c.op] ?? 'NFNL_MSG_BATCH');
}

// --- verify --------------------------------------------------------------------

export interface Drift {
  kind: 'missing-table' | 'unexpected-table' | 'missing-chain' | 'chain-differs' | 'extra-chain'
    | 'missing-rule' | 'extra-rule' | 'missing-set' | 'set-differs';
  family: number;
  table: string;
  chain?: string;
  set?: string;
  /** Expected / actual expression lines of a rule, or attributes of a chain/set. */
  expected?: string;
  actual?: string;
  /** Kernel handle of the rule or chain found. */
  handle?: bigint;
}

export interface VerifyResult {
  ok: boolean;
  drift: Drift[];
}

interface ChainModel {
  attrs?: string;      // undefined: not declared by the script (exists already)
  rules: string[];
  known: boolean;      // the script emptied it first: extra rules are drift
}

interface TableModel {
  family: number;
  name: string;
  present: boolean;
  flushed: boolean;
  chains: Map<string, ChainModel>;
  sets: Map<string, string>;
}

/** What the batch leaves behind in the tables it touches. */
function expectedModel(objs: NftObject[], records: NftRecord[]): Map<string, TableModel> {
  // Both decoded from the same batch: record i is object i.
  if (records.length !== objs.length) throw new Error(`nft.verify: ${records.length} records for ${objs.length} objects`);
  const tables = new Map<string, TableModel>();
  const rulesById = new Map<number, { chain: ChainModel; text: string }>();
  const table = (o: NftObject): TableModel => {
    const k = `${o.family} ${o.table}`;
    let t = tables.get(k);
    if (!t) tables.set(k, (t = { family: o.family, name: o.table, present: true, flushed: false, chains: new Map(), sets: new Map() }));
    return t;
  };
  const chain = (t: TableModel, name: string): ChainModel => {
    let c = t.chains.get(name);
    if (!c) t.chains.set(name, (c = { rules: [], known: t.flushed }));
    return c;
  };
  objs.forEach((o, i) => {
    const t = table(o);
    switch (o.kind) {
      case 'table': t.present = true; break;
      case 'deltable': t.present = false; t.flushed = true; t.chains.clear(); t.sets.clear(); break;
      case 'delrule':
        if (o.name) { const c = chain(t, o.name); c.rules = []; c.known = true; }
        else { t.flushed = true; for (const c of t.chains.values()) { c.rules = []; c.known = true; } }
        break;
      case 'chain': chain(t, o.name).attrs = records[i]!.shape; break;
      case 'delchain': t.chains.delete(o.name); break;
      case 'rule': {
        const c = chain(t, o.name);
        const text = recordText(records[i]!);
        const ref = o.positionId ? rulesById.get(o.positionId) : undefined;
        // nlFlags & NLM_F_APPEND (0x800): after the reference (or at the end); else before it (or at the start).
        const append = (o.nlFlags & 0x800) !== 0;
        if (ref && ref.chain === c) {
          const at = c.rules.indexOf(ref.text);
          c.rules.splice(append ? at + 1 : at, 0, text);
        } else if (append) c.rules.push(text);
        else c.rules.unshift(text);
        if (o.ruleId) rulesById.set(o.ruleId, { chain: c, text });
        break;
      }
      case 'set': if (!o.name.startsWith('__set')) t.sets.set(o.name, records[i]!.shape); break;
      case 'delset': t.sets.delete(o.name); break;
      default: break;
    }
  });
  return tables;
}

/** Each compiled batch's expected model, built on its first verify (verify only reads it). */
const models = new WeakMap<CompiledNft, Map<string, TableModel>>();

function modelOf(compiled: CompiledNft): Map<string, TableModel> {
  let m = models.get(compiled);
  if (!m) models.set(compiled, (m = expectedModel(compiled.expected(), compiled.size > 0 ? decodeRecords(compiled.batch!) : [])));
  return m;
}

export interface VerifyOptions {
  /**
   * The netns's tables, when the caller has just listed them (`listTables`):
   * saves the table dump.
   */
  tables?: readonly NftTableId[];
}

type TableDumps = [NftRecord[], NftRecord[], NftRecord[]];

/**
 * The chains, rules and sets of each table to compare. Where two or more of
 * them share a family (the in-pod model's three inet tables), that family is
 * dumped once for all (three dumps per netns instead of three per table: the
 * restart verifies every pod); a lone table is dumped by name, so the host's
 * other tables of its family (a firewall's) are not read.
 */
function tableContents(nf: NlTransport, tables: readonly TableModel[]): (t: TableModel) => Promise<TableDumps> {
  const perFamily = new Map<number, number>();
  for (const t of tables) perFamily.set(t.family, (perFamily.get(t.family) ?? 0) + 1);
  // Sets are compared only where the model declares some (the in-pod model has none): no set dump otherwise.
  const setsOf = new Set(tables.filter((t) => t.sets.size > 0).map((t) => t.family));
  const byFamily = new Map<number, Promise<TableDumps>>();
  const dumps = (family: number, table?: string): Promise<TableDumps> => Promise.all([
    dumpRecords(nf, NFT_MSG.GETCHAIN, family, table),
    dumpRecords(nf, NFT_MSG.GETRULE, family, table),
    setsOf.has(family) ? dumpRecords(nf, NFT_MSG.GETSET, family, table) : [],
  ]);
  return (t) => {
    if (perFamily.get(t.family)! < 2) return dumps(t.family, t.name);
    let p = byFamily.get(t.family);
    if (!p) byFamily.set(t.family, (p = dumps(t.family)));
    return p;
  };
}

/**
 * Dumps the tables the compiled batch touches and compares them with what
 * the batch leaves behind (handles and counter values ignored): missing or
 * changed chains and rules, rules someone else added to our chains, missing
 * sets, tables that should be gone. Set elements are not compared (they
 * change at run time).
 */
export async function verify(ns: Netns, compiled: CompiledNft, opts: VerifyOptions = {}): Promise<VerifyResult> {
  if (!(compiled instanceof CompiledNft)) throw new TypeError('nft.verify: expected a CompiledNft');
  if (compiled.path !== 'netlink') throw new TypeError(`nft.verify: the script is not compiled (${compiled.fallback?.reason ?? ''}); compare nft.list output instead`);
  if (opts.tables !== undefined && !Array.isArray(opts.tables)) throw new TypeError('nft.verify: tables must be an array of { family, name }');
  const model = modelOf(compiled);
  const nf = (await ns.netlink()).nfnetlink;
  const drift: Drift[] = [];
  const actualTables = opts.tables
    ?? (await dumpRecords(nf, NFT_MSG.GETTABLE, 0)).filter((o) => o.kind === 'table').map((o) => ({ family: o.family, name: o.table }));
  const present: TableModel[] = [];
  for (const t of model.values()) {
    const exists = actualTables.some((o) => o.family === t.family && o.name === t.name);
    if (!t.present) {
      if (exists) drift.push({ kind: 'unexpected-table', family: t.family, table: t.name });
      continue;
    }
    if (!exists) { drift.push({ kind: 'missing-table', family: t.family, table: t.name }); continue; }
    present.push(t);
  }
  const contents = tableContents(nf, present);
  for (const t of present) {
    const [chains, rules, sets] = await contents(t);
    const mine = (l: NftRecord[]) => l.filter((o) => o.family === t.family && o.table === t.name);
    const base = { family: t.family, table: t.name };
    const ourChains = mine(chains).filter((c) => c.kind === 'chain');
    const ourRules = mine(rules).filter((r) => r.kind === 'rule');
    for (const [name, exp] of t.chains) {
      const act = ourChains.find((c) => c.name === name);
      if (!act) { drift.push({ ...base, kind: 'missing-chain', chain: name }); continue; }
      if (exp.attrs !== undefined && exp.attrs !== act.shape)
        drift.push({ ...base, kind: 'chain-differs', chain: name, expected: exp.attrs, actual: act.shape, handle: act.handle });
      const got = ourRules.filter((r) => r.name === name);
      let k = 0;
      for (const want of exp.rules) {
        const at = got.findIndex((r, idx) => idx >= k && recordText(r) === want);
        if (at < 0) { drift.push({ ...base, kind: 'missing-rule', chain: name, expected: want }); continue; }
        if (exp.known) for (const extra of got.slice(k, at)) drift.push({ ...base, kind: 'extra-rule', chain: name, actual: recordText(extra), handle: extra.handle });
        k = at + 1;
      }
      if (exp.known) for (const extra of got.slice(k)) drift.push({ ...base, kind: 'extra-rule', chain: name, actual: recordText(extra), handle: extra.handle });
    }
    if (t.flushed) {
      // Chains the script did not declare but the flush emptied: rules there, or a hook, are drift.
      for (const c of ourChains) {
        if (t.chains.has(c.name)) continue;
        const n = ourRules.filter((r) => r.name === c.name);
        if (c.shape !== 'regular' || n.length) drift.push({ ...base, kind: 'extra-chain', chain: c.name, actual: `${c.shape}, ${n.length} rules`, handle: c.handle });
      }
    }
    for (const [name, attrs] of t.sets) {
      const act = mine(sets).find((x) => x.kind === 'set' && x.name === name);
      if (!act) drift.push({ ...base, kind: 'missing-set', set: name });
      else if (act.shape !== attrs) drift.push({ ...base, kind: 'set-differs', set: name, expected: attrs, actual: act.shape });
    }
  }
  return { ok: drift.length === 0, drift };
}

/** The module's functions as one object: `nftNative.compile(script)`. */
export const nftNative = { compile, send, verify };

// --- a drop-in for the redirect engine's nft seam -----------------------------

const CACHE_MAX = 64;
const cache = new Map<string, CompiledNft>();

/** The compiled form of a script, built once and reused (the per-pod script has no per-pod values). */
export function compileCached(script: string): CompiledNft {
  let c = cache.get(script);
  if (c) {
    cache.delete(script);  // most recently used goes last
  } else {
    c = compile(script);
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as string);
  }
  cache.set(script, c);
  return c;
}

/**
 * The shape of lib/redirect's `NftSender`: scripts go through the native
 * batch path (compiled once per distinct script); reads use `nft`.
 */
export const nativeNftSender = {
  async applyScript(ns: Netns, script: string): Promise<void> {
    await send(ns, compileCached(script));
  },
  list: (ns: Netns) => nftList(ns),
  /** `nft -a list ruleset` (handles included, for naming rules in drift reports); failures throw ToolError. */
  listText: (ns: Netns) => nftListText(ns, { handles: true }),
};
