// A builder for `nft -f` transactions. Every name and value is validated here
// (TypeError/RangeError) and rendered in the exact shape knftables writes (the
// shape of Istio's nft goldens), so no caller concatenates nft text by hand.
// Rule bodies are nft statements and pass through verbatim, after checks that
// they cannot end the command early or spill into the next one.

export type NftFamily = 'ip' | 'ip6' | 'inet' | 'arp' | 'bridge' | 'netdev';
export type NftChainType = 'filter' | 'nat' | 'route';
export type NftHook = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting' | 'ingress' | 'egress';
export type NftPolicy = 'accept' | 'drop';
export type NftSetFlag = 'constant' | 'interval' | 'timeout' | 'dynamic';

export interface TableRef {
  family: NftFamily;
  name: string;
}

export interface TableOptions {
  comment?: string;
  /** `dormant` (or `owner`, `persist` on newer kernels). */
  flags?: string[];
}

export interface ChainOptions {
  /** Base chains: type, hook and priority together. */
  type?: NftChainType;
  hook?: NftHook;
  /** A number or a standard name (`filter`, `dstnat - 10`, ...). */
  priority?: number | string;
  policy?: NftPolicy;
  /** For netdev ingress/egress hooks. */
  device?: string;
  comment?: string;
}

export interface RuleOptions {
  comment?: string;
  /** Place relative to the rule with this handle (after it for add, before it for insert). */
  handle?: number;
  /** Place relative to the rule at this 0-based index. */
  index?: number;
}

/** A set element: a key (`10.0.0.1`, `10.0.0.0/8`, a range, a port), or parts of a concatenation. */
export type NftElement = string | string[] | { key: string | string[]; comment?: string; timeout?: number | string };

export interface SetOptions {
  /** `ipv4_addr`, `ipv6_addr`, `inet_service`, `ipv4_addr . inet_service`, ... */
  type: string;
  flags?: NftSetFlag[];
  /** Default element timeout: seconds, or an nft duration (`1h30m`). */
  timeout?: number | string;
  size?: number;
  policy?: 'performance' | 'memory';
  comment?: string;
  /** Added right after the set (one `add element` command). */
  elements?: NftElement[];
}

const FAMILIES = new Set<string>(['ip', 'ip6', 'inet', 'arp', 'bridge', 'netdev']);
const CHAIN_TYPES = new Set<string>(['filter', 'nat', 'route']);
const HOOKS = new Set<string>(['prerouting', 'input', 'forward', 'output', 'postrouting', 'ingress', 'egress']);
const SET_FLAGS = new Set<string>(['constant', 'interval', 'timeout', 'dynamic']);
const TABLE_FLAGS = new Set<string>(['dormant', 'owner', 'persist']);
// nft's identifier token (letters, digits, `_`, `.`, `/`, `-`), not starting with a digit.
const NAME = /^[A-Za-z_][A-Za-z0-9_./-]*$/;
const NAME_MAX = 255;                 // NFT_NAME_MAXLEN minus the NUL
const COMMENT_MAX = 128;              // NFTNL_UDATA_COMMENT_MAXLEN
const NAMED_PRIORITY = /^(raw|mangle|dstnat|filter|security|srcnat|out)( [+-] \d+)?$/;
const DURATION = /^(?=\d)(\d+d)?(\d+h)?(\d+m(?!s))?(\d+s)?(\d+ms)?$/;
const SET_TYPE = /^[a-z][a-z0-9_]*( \. [a-z][a-z0-9_]*)*$/;
const ELEMENT_PART = /^(?:[A-Za-z0-9_.:/\-[\]]+|"[^"\\\n\r\0]*")$/;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

function name(kind: string, value: unknown): string {
  if (typeof value !== 'string' || !NAME.test(value) || value.length > NAME_MAX)
    throw new TypeError(`invalid nft ${kind} name ${JSON.stringify(value)} (letters, digits, _ . / -, not starting with a digit, ≤ ${NAME_MAX})`);
  return value;
}

/** Checks a table reference (family and name) and returns a clean copy. */
export function validateTable(t: unknown): TableRef {
  const ref = t as Partial<TableRef> | null;
  if (typeof ref !== 'object' || ref === null) throw new TypeError('table must be { family, name }');
  if (typeof ref.family !== 'string' || !FAMILIES.has(ref.family)) throw new TypeError(`invalid nft family ${JSON.stringify(ref.family)}`);
  return { family: ref.family, name: name('table', ref.name) };
}

function table(t: unknown): string {
  const ref = validateTable(t);
  return `${ref.family} ${ref.name}`;
}

function quoted(kind: string, value: unknown, max: number): string {
  if (typeof value !== 'string' || /["\\\n\r\0]/.test(value))
    throw new TypeError(`invalid nft ${kind} ${JSON.stringify(value)} (a string without quotes, backslashes or line breaks)`);
  if (Buffer.byteLength(value) > max) throw new RangeError(`nft ${kind} is longer than ${max} bytes`);
  return `"${value}"`;
}

const comment = (value: unknown) => quoted('comment', value, COMMENT_MAX);

function integer(kind: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new TypeError(`nft ${kind} must be an integer, not ${String(value)}`);
  if (value < min || value > max) throw new RangeError(`nft ${kind} ${value} is outside ${min}..${max}`);
  return value;
}

function duration(value: unknown): string {
  if (typeof value === 'number') return `${integer('timeout', value, 0, INT32_MAX)}s`;
  if (typeof value !== 'string' || !DURATION.test(value)) throw new TypeError(`invalid nft duration ${JSON.stringify(value)}`);
  return value;
}

function priority(value: unknown): string {
  if (typeof value === 'number') return String(integer('priority', value, INT32_MIN, INT32_MAX));
  if (typeof value !== 'string' || !NAMED_PRIORITY.test(value)) throw new TypeError(`invalid nft priority ${JSON.stringify(value)}`);
  return value;
}

/**
 * Checks a rule body (nft statements). Outside "strings" it may not contain
 * `;` or `#` (they end the command / start a comment) and its braces must
 * balance; nowhere a line break or NUL. Spacing is kept as given.
 */
function ruleBody(value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') throw new TypeError('nft rule must be a non-empty string');
  if (/[\n\r\0]/.test(value)) throw new TypeError(`nft rule ${JSON.stringify(value)} contains a line break or NUL`);
  let inString = false;
  let depth = 0;
  for (const ch of value) {
    if (ch === '"') inString = !inString;
    else if (inString) continue;
    else if (ch === ';' || ch === '#') throw new TypeError(`nft rule ${JSON.stringify(value)} contains ${JSON.stringify(ch)} outside a string`);
    else if (ch === '{') depth++;
    else if (ch === '}' && --depth < 0) break;
  }
  if (inString) throw new TypeError(`nft rule ${JSON.stringify(value)} has an unterminated string`);
  if (depth !== 0) throw new TypeError(`nft rule ${JSON.stringify(value)} has unbalanced braces`);
  return value;
}

function elementKey(key: unknown): string {
  const parts = Array.isArray(key) ? key : [key];
  if (parts.length === 0) throw new TypeError('nft element key must not be empty');
  for (const p of parts)
    if (typeof p !== 'string' || !ELEMENT_PART.test(p)) throw new TypeError(`invalid nft element ${JSON.stringify(p)}`);
  return parts.join(' . ');
}

function element(e: unknown): string {
  if (typeof e === 'string' || Array.isArray(e)) return elementKey(e);
  const o = e as { key?: unknown; comment?: unknown; timeout?: unknown } | null;
  if (typeof o !== 'object' || o === null) throw new TypeError('nft element must be a string, string[] or { key, comment?, timeout? }');
  let out = elementKey(o.key);
  if (o.timeout !== undefined) out += ` timeout ${duration(o.timeout)}`;
  if (o.comment !== undefined) out += ` comment ${comment(o.comment)}`;
  return out;
}

function position(opts: RuleOptions): string {
  if (opts.handle !== undefined && opts.index !== undefined) throw new TypeError('give a rule either handle or index, not both');
  if (opts.handle !== undefined) return ` handle ${integer('handle', opts.handle, 1, 2 ** 53 - 1)}`;
  if (opts.index !== undefined) return ` index ${integer('index', opts.index, 0, INT32_MAX)}`;
  return '';
}

export class Transaction {
  readonly #lines: string[] = [];

  /** The commands so far, one per line. */
  get commands(): readonly string[] {
    return [...this.#lines];
  }

  get length(): number {
    return this.#lines.length;
  }

  /** The `nft -f` script: one command per line, each ending in a newline. */
  toString(): string {
    return this.#lines.map((l) => `${l}\n`).join('');
  }

  // --- tables ---

  addTable(t: TableRef, opts: TableOptions = {}): this {
    return this.#table('add', t, opts);
  }

  /** Like addTable, but the transaction fails if the table exists. */
  createTable(t: TableRef, opts: TableOptions = {}): this {
    return this.#table('create', t, opts);
  }

  /** Removes every rule of every chain and every element of every set, keeping the objects. */
  flushTable(t: TableRef): this {
    return this.#push(`flush table ${table(t)}`);
  }

  /**
   * Deletes the table and all it holds. With `missingOk`, a missing table is
   * not an error: an `add table` first makes the delete always valid (nft
   * 1.0.6 has no `destroy`), all in the same atomic transaction.
   */
  deleteTable(t: TableRef, opts: { missingOk?: boolean } = {}): this {
    const ref = table(t);
    if (opts.missingOk) this.#push(`add table ${ref}`);
    return this.#push(`delete table ${ref}`);
  }

  #table(verb: string, t: TableRef, opts: TableOptions): this {
    const ref = table(t);
    const body: string[] = [];
    if (opts.flags !== undefined) {
      if (!Array.isArray(opts.flags) || opts.flags.length === 0 || opts.flags.some((f) => !TABLE_FLAGS.has(f)))
        throw new TypeError(`invalid nft table flags ${JSON.stringify(opts.flags)}`);
      body.push(`flags ${opts.flags.join(',')} ;`);
    }
    if (opts.comment !== undefined) body.push(`comment ${comment(opts.comment)} ;`);
    return this.#push(`${verb} table ${ref}${body.length ? ` { ${body.join(' ')} }` : ''}`);
  }

  // --- chains ---

  /** A regular chain, or a base chain when `type`, `hook` and `priority` are given. */
  addChain(t: TableRef, chain: string, opts: ChainOptions = {}): this {
    return this.#chain('add', t, chain, opts);
  }

  createChain(t: TableRef, chain: string, opts: ChainOptions = {}): this {
    return this.#chain('create', t, chain, opts);
  }

  flushChain(t: TableRef, chain: string): this {
    return this.#push(`flush chain ${table(t)} ${name('chain', chain)}`);
  }

  deleteChain(t: TableRef, chain: string): this {
    return this.#push(`delete chain ${table(t)} ${name('chain', chain)}`);
  }

  #chain(verb: string, t: TableRef, chain: string, opts: ChainOptions): this {
    const head = `${verb} chain ${table(t)} ${name('chain', chain)}`;
    const base = [opts.type, opts.hook, opts.priority].filter((v) => v !== undefined).length;
    if (base !== 0 && base !== 3) throw new TypeError('a base chain needs type, hook and priority together');
    const body: string[] = [];
    if (base === 3) {
      if (!CHAIN_TYPES.has(opts.type as string)) throw new TypeError(`invalid nft chain type ${JSON.stringify(opts.type)}`);
      if (!HOOKS.has(opts.hook as string)) throw new TypeError(`invalid nft hook ${JSON.stringify(opts.hook)}`);
      const device = opts.device === undefined ? '' : ` device ${quoted('device', opts.device, 15)}`;
      body.push(`type ${opts.type} hook ${opts.hook}${device} priority ${priority(opts.priority)} ;`);
    } else if (opts.device !== undefined || opts.policy !== undefined) {
      throw new TypeError('device and policy belong to base chains (give type, hook and priority)');
    }
    if (opts.policy !== undefined) {
      if (opts.policy !== 'accept' && opts.policy !== 'drop') throw new TypeError(`invalid nft chain policy ${JSON.stringify(opts.policy)}`);
      body.push(`policy ${opts.policy} ;`);
    }
    if (opts.comment !== undefined) body.push(`comment ${comment(opts.comment)} ;`);
    return this.#push(body.length ? `${head} { ${body.join(' ')} }` : head);
  }

  // --- rules ---

  /** Appends a rule (or places it after `handle` / at `index`). */
  addRule(t: TableRef, chain: string, rule: string, opts: RuleOptions = {}): this {
    return this.#rule('add', t, chain, rule, opts);
  }

  /** Prepends a rule (or places it before `handle` / at `index`). */
  insertRule(t: TableRef, chain: string, rule: string, opts: RuleOptions = {}): this {
    return this.#rule('insert', t, chain, rule, opts);
  }

  replaceRule(t: TableRef, chain: string, handle: number, rule: string, opts: { comment?: string } = {}): this {
    return this.#rule('replace', t, chain, rule, { ...opts, handle });
  }

  deleteRule(t: TableRef, chain: string, handle: number): this {
    return this.#push(`delete rule ${table(t)} ${name('chain', chain)}${position({ handle })}`);
  }

  #rule(verb: string, t: TableRef, chain: string, rule: string, opts: RuleOptions): this {
    const head = `${verb} rule ${table(t)} ${name('chain', chain)}${position(opts)}`;
    const tail = opts.comment === undefined ? '' : ` comment ${comment(opts.comment)}`;
    return this.#push(`${head} ${ruleBody(rule)}${tail}`);
  }

  // --- sets and elements ---

  addSet(t: TableRef, set: string, opts: SetOptions): this {
    return this.#set('add', t, set, opts);
  }

  createSet(t: TableRef, set: string, opts: SetOptions): this {
    return this.#set('create', t, set, opts);
  }

  flushSet(t: TableRef, set: string): this {
    return this.#push(`flush set ${table(t)} ${name('set', set)}`);
  }

  deleteSet(t: TableRef, set: string): this {
    return this.#push(`delete set ${table(t)} ${name('set', set)}`);
  }

  /** One `add element` command holding all the given elements. */
  addElement(t: TableRef, set: string, elements: NftElement | NftElement[]): this {
    return this.#elements('add', t, set, elements);
  }

  deleteElement(t: TableRef, set: string, elements: NftElement | NftElement[]): this {
    return this.#elements('delete', t, set, elements);
  }

  #set(verb: string, t: TableRef, set: string, opts: SetOptions): this {
    const head = `${verb} set ${table(t)} ${name('set', set)}`;
    if (typeof opts !== 'object' || opts === null) throw new TypeError('set options must be an object with a type');
    if (typeof opts.type !== 'string' || !SET_TYPE.test(opts.type)) throw new TypeError(`invalid nft set type ${JSON.stringify(opts.type)}`);
    const body = [`type ${opts.type} ;`];
    if (opts.flags !== undefined) {
      if (!Array.isArray(opts.flags) || opts.flags.length === 0 || opts.flags.some((f) => !SET_FLAGS.has(f)))
        throw new TypeError(`invalid nft set flags ${JSON.stringify(opts.flags)}`);
      body.push(`flags ${opts.flags.join(',')} ;`);
    }
    if (opts.timeout !== undefined) body.push(`timeout ${duration(opts.timeout)} ;`);
    if (opts.size !== undefined) body.push(`size ${integer('set size', opts.size, 1, 2 ** 32 - 1)} ;`);
    if (opts.policy !== undefined) {
      if (opts.policy !== 'performance' && opts.policy !== 'memory') throw new TypeError(`invalid nft set policy ${JSON.stringify(opts.policy)}`);
      body.push(`policy ${opts.policy} ;`);
    }
    if (opts.comment !== undefined) body.push(`comment ${comment(opts.comment)} ;`);
    // Validate the elements before anything is recorded, so a bad call leaves no half.
    const elements = opts.elements === undefined || (Array.isArray(opts.elements) && opts.elements.length === 0)
      ? undefined : this.#renderElements(opts.elements);
    this.#push(`${head} { ${body.join(' ')} }`);
    if (elements) this.#push(`${verb === 'create' ? 'add' : verb} element ${table(t)} ${set} { ${elements} }`);
    return this;
  }

  #renderElements(elements: NftElement | NftElement[]): string {
    // A bare string[] is ambiguous (list or concatenation): treat it as a list.
    const list = Array.isArray(elements) ? elements : [elements];
    if (list.length === 0) throw new TypeError('no nft elements given');
    return list.map(element).join(', ');
  }

  #elements(verb: string, t: TableRef, set: string, elements: NftElement | NftElement[]): this {
    const head = `${verb} element ${table(t)} ${name('set', set)}`;
    return this.#push(`${head} { ${this.#renderElements(elements)} }`);
  }

  #push(line: string): this {
    this.#lines.push(line);
    return this;
  }
}
