// nftables through the `nft` binary, run in a child born inside the netns:
// apply a script (`nft -f -`), read the ruleset (`nft -j list`) as typed
// objects, delete a table that may be missing. This is the reference path the
// native nfnetlink encoder is tested against.
import type { Netns, SpawnResult } from '../netns/netns.js';
import { Transaction, validateTable, type NftFamily, type TableRef } from './transaction.js';
import { ToolError, toolCode, toolEnv, type ToolLocation } from '../tool-error.js';

export { Transaction } from './transaction.js';
export type * from './transaction.js';

/** nft's exit codes (`enum nftables_exit_codes`). */
const NFT_EXIT: Readonly<Record<number, string>> = {
  1: 'NFT_EXIT_FAILURE',
  2: 'NFT_EXIT_NOMEM',
  3: 'NFT_EXIT_NONL',
};

const DEFAULT_TIMEOUT_MS = 60_000;

export interface NftRule {
  family: NftFamily;
  table: string;
  chain: string;
  handle: number;
  comment?: string;
  /** The statements, in nft's JSON schema (`{ match: {...} }`, `{ counter: {...} }`, `{ accept: null }`). */
  expr: Array<Record<string, unknown>>;
}

export interface NftChain {
  family: NftFamily;
  table: string;
  name: string;
  handle: number;
  /** Base chains only. */
  type?: string;
  hook?: string;
  priority?: number | string;
  policy?: string;
  device?: string;
  comment?: string;
  rules: NftRule[];
}

export interface NftSetElement {
  /** The element in nft syntax: `10.0.0.1`, `10.0.0.0/8`, `1-5`, `10.0.0.1 . 80`. */
  key: string;
  /** For maps: the mapped value in nft syntax. */
  value?: string;
  comment?: string;
  /** Seconds. */
  timeout?: number;
  expires?: number;
}

export interface NftSet {
  family: NftFamily;
  table: string;
  name: string;
  handle: number;
  /** Key type; a concatenation is `ipv4_addr . inet_service`. */
  type: string;
  /** Maps: the value type. */
  map?: string;
  flags: string[];
  comment?: string;
  timeout?: number;
  size?: number;
  elements: NftSetElement[];
}

export interface NftTable {
  family: NftFamily;
  name: string;
  handle: number;
  flags?: string[];
  /** Absent when nft does not print it (1.0.6 leaves table comments out of its JSON). */
  comment?: string;
  chains: NftChain[];
  /** Sets and maps. */
  sets: NftSet[];
  /** Anything else the table holds (counters, quotas, flowtables, ...), as nft printed it. */
  objects: Array<Record<string, unknown>>;
}

export interface NftRuleset {
  /** The nft version that listed it. */
  version?: string;
  tables: NftTable[];
}

export interface ApplyOptions {
  /** Only check the script (`nft -c`): nothing is committed. */
  check?: boolean;
  timeoutMs?: number;
}

// `/dev/stdin:3:23-28: Error: ...`: file, line, first and last column.
const LOCATION = /^[^\n:]*:(\d+):(\d+)(?:-(\d+))?: Error: /m;

/** The script location nft blamed in its output, if any. */
export function nftErrorLocation(stderr: string): ToolLocation | undefined {
  const m = LOCATION.exec(stderr);
  if (!m) return undefined;
  const loc: ToolLocation = { line: Number(m[1]), column: Number(m[2]) };
  if (m[3] !== undefined) loc.columnEnd = Number(m[3]);
  return loc;
}

async function exec(ns: Netns, args: string[], opts: { timeoutMs?: number }, stdin?: string): Promise<SpawnResult> {
  const argv = ['nft', ...args];
  const r = await ns.spawn(argv, {
    env: toolEnv(),
    timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    ...(stdin === undefined ? {} : { stdin }),
  });
  if (r.code !== 0) {
    const location = nftErrorLocation(r.stderr);
    throw new ToolError({
      op: 'nft', code: toolCode(r, NFT_EXIT), argv, result: r,
      ...(stdin === undefined ? {} : { input: stdin }),
      ...(location ? { location } : {}),
    });
  }
  return r;
}

/**
 * Runs `nft -f -` inside the netns with the script (or a Transaction) on
 * stdin: one atomic transaction. Failure → ToolError (op `nft`, code
 * `NFT_EXIT_FAILURE`, ..., `line`/`column`/`columnEnd`/`lineText` of the
 * command nft blamed).
 */
export async function apply(ns: Netns, script: string | Transaction, opts: ApplyOptions = {}): Promise<void> {
  const text = script instanceof Transaction ? script.toString() : script;
  if (typeof text !== 'string') throw new TypeError('nft script must be a string or a Transaction');
  if (text.includes('\0')) throw new TypeError('nft script contains a NUL byte');
  const args = opts.check ? ['-c', '-f', '-'] : ['-f', '-'];
  await exec(ns, args, opts, text.endsWith('\n') || text === '' ? text : `${text}\n`);
}

function tableArgs(t: TableRef): [string, string] {
  const { family, name } = validateTable(t);   // the builder owns nft's naming rules
  return [family, name];
}

/**
 * The ruleset (or one table) as typed objects, from `nft -j list`. A table
 * that does not exist gives `{ tables: [] }`.
 */
export async function list(ns: Netns, opts: { table?: TableRef; timeoutMs?: number } = {}): Promise<NftRuleset> {
  if (opts.table === undefined) return parseRuleset((await exec(ns, ['-j', 'list', 'ruleset'], opts)).stdout);
  const [family, name] = tableArgs(opts.table);
  try {
    return parseRuleset((await exec(ns, ['-j', 'list', 'table', family, name], opts)).stdout);
  } catch (err) {
    // nft says "missing" only in text; ask for the table names instead.
    if (err instanceof ToolError && err.exitCode === 1) {
      const tables = parseRuleset((await exec(ns, ['-j', 'list', 'tables'], opts)).stdout).tables;
      if (!tables.some((t) => t.family === family && t.name === name)) return { tables: [] };
    }
    throw err;
  }
}

/**
 * nft's own text listing (`nft list ruleset` / `nft list table F N`), for
 * people; `handles: true` adds `# handle N` to every rule (`nft -a`). The one
 * producer of this text: a failure is a ToolError (a missing table is
 * `NFT_EXIT_FAILURE`), never an empty listing.
 */
export async function listText(ns: Netns, opts: { table?: TableRef; handles?: boolean; timeoutMs?: number } = {}): Promise<string> {
  const args = opts.table === undefined ? ['list', 'ruleset'] : ['list', 'table', ...tableArgs(opts.table)];
  return (await exec(ns, opts.handles ? ['-a', ...args] : args, opts)).stdout;
}

/** Deletes a table and everything in it; a missing table is fine. */
export async function deleteTable(ns: Netns, family: NftFamily, name: string, opts: { timeoutMs?: number } = {}): Promise<void> {
  await apply(ns, new Transaction().deleteTable({ family, name }, { missingOk: true }), opts);
}

// --- JSON → typed objects ---------------------------------------------------

type Json = Record<string, unknown>;

/** A value of nft's JSON expression schema in nft syntax. */
function valueText(v: unknown): string {
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return v.map(valueText).join(', ');
  if (v && typeof v === 'object') {
    const o = v as Json;
    if ('prefix' in o) {
      const p = o.prefix as { addr: unknown; len: unknown };
      return `${valueText(p.addr)}/${String(p.len)}`;
    }
    if ('range' in o) return (o.range as unknown[]).map(valueText).join('-');
    if ('concat' in o) return (o.concat as unknown[]).map(valueText).join(' . ');
    if ('set' in o) return `{ ${valueText(o.set)} }`;
    for (const verdict of ['jump', 'goto']) if (verdict in o) return `${verdict} ${String((o[verdict] as Json).target)}`;
    for (const verdict of ['accept', 'drop', 'continue', 'return']) if (verdict in o) return verdict;
  }
  return JSON.stringify(v);
}

function element(raw: unknown, isMap: boolean): NftSetElement {
  let v = raw;
  let value: string | undefined;
  if (isMap && Array.isArray(v)) {
    value = valueText(v[1]);
    v = v[0];
  }
  const out: NftSetElement = { key: '' };
  if (v && typeof v === 'object' && 'elem' in (v as Json)) {
    const e = (v as { elem: Json }).elem;
    if (typeof e.comment === 'string') out.comment = e.comment;
    if (typeof e.timeout === 'number') out.timeout = e.timeout;
    if (typeof e.expires === 'number') out.expires = e.expires;
    v = e.val;
  }
  out.key = valueText(v);
  if (value !== undefined) out.value = value;
  return out;
}

const typeText = (t: unknown) => (Array.isArray(t) ? t.map(String).join(' . ') : String(t));

/** Parses `nft -j list ...` output. */
export function parseRuleset(json: string): NftRuleset {
  const doc = JSON.parse(json) as { nftables?: Json[] };
  if (!doc || !Array.isArray(doc.nftables)) throw new TypeError('not nft JSON output (no "nftables" array)');
  const out: NftRuleset = { tables: [] };
  const tables = new Map<string, NftTable>();
  const chains = new Map<string, NftChain>();
  const tableOf = (o: Json): NftTable => {
    const key = `${String(o.family)} ${String(o.table)}`;
    let t = tables.get(key);
    if (!t) {
      // Listed objects always follow their table; this only guards odd input.
      t = { family: o.family as NftFamily, name: String(o.table), handle: 0, chains: [], sets: [], objects: [] };
      tables.set(key, t);
      out.tables.push(t);
    }
    return t;
  };
  for (const item of doc.nftables) {
    const [kind, body] = Object.entries(item)[0] ?? [];
    const o = body as Json;
    switch (kind) {
      case 'metainfo':
        out.version = String(o.version);
        break;
      case 'table': {
        const t = tableOf({ family: o.family, table: o.name });
        t.handle = Number(o.handle);
        if (o.flags !== undefined) t.flags = ([] as unknown[]).concat(o.flags).map(String);
        if (typeof o.comment === 'string') t.comment = o.comment;
        break;
      }
      case 'chain': {
        const c: NftChain = { family: o.family as NftFamily, table: String(o.table), name: String(o.name), handle: Number(o.handle), rules: [] };
        if (o.type !== undefined) c.type = String(o.type);
        if (o.hook !== undefined) c.hook = String(o.hook);
        if (o.prio !== undefined) c.priority = o.prio as number | string;
        if (o.policy !== undefined) c.policy = String(o.policy);
        if (o.dev !== undefined) c.device = String(o.dev);
        if (typeof o.comment === 'string') c.comment = o.comment;
        tableOf(o).chains.push(c);
        chains.set(`${c.family} ${c.table} ${c.name}`, c);
        break;
      }
      case 'rule': {
        const r: NftRule = { family: o.family as NftFamily, table: String(o.table), chain: String(o.chain), handle: Number(o.handle), expr: (o.expr as Json[]) ?? [] };
        if (typeof o.comment === 'string') r.comment = o.comment;
        const c = chains.get(`${r.family} ${r.table} ${r.chain}`);
        if (c) c.rules.push(r);
        else tableOf(o).objects.push({ rule: o });
        break;
      }
      case 'set':
      case 'map': {
        const isMap = kind === 'map';
        const s: NftSet = {
          family: o.family as NftFamily, table: String(o.table), name: String(o.name), handle: Number(o.handle),
          type: typeText(o.type), flags: o.flags === undefined ? [] : ([] as unknown[]).concat(o.flags).map(String),
          elements: Array.isArray(o.elem) ? o.elem.map((e) => element(e, isMap)) : [],
        };
        if (isMap) s.map = typeText(o.map);
        if (typeof o.comment === 'string') s.comment = o.comment;
        if (typeof o.timeout === 'number') s.timeout = o.timeout;
        if (typeof o.size === 'number') s.size = o.size;
        tableOf(o).sets.push(s);
        break;
      }
      default:
        if (kind !== undefined && o && typeof o === 'object' && 'table' in o) tableOf(o).objects.push({ [kind]: o });
    }
  }
  return out;
}

/** The functions of this module as one object: `nft.apply(ns, script)`. */
export const nft = { apply, list, listText, deleteTable, parseRuleset, nftErrorLocation };
