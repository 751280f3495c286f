// The subset of nft script syntax podwire writes (its renderer, the
// Transaction builder, Istio's goldens), parsed into batch commands
// (lib/net/nft/ir.ts). Anything outside the subset raises NftUnsupported with
// the reason and line, and the caller falls back to `nft -f`: this parser
// never guesses.
import { NFPROTO, type NftCommand, type NftElem } from './ir.js';
import { lowerRule, RuleState, encodeElementKey, SET_TYPES, NftUnsupported } from './lower.js';

export { NftUnsupported } from './lower.js';

/** One parsed command and where it came from. */
export interface NftSourceCommand {
  /** 1-based line of the script. */
  line: number;
  text: string;
}

export interface ParsedScript {
  commands: NftCommand[];
  /** sources[i] describes commands[i]. */
  sources: NftSourceCommand[];
}

// --- tokens ---------------------------------------------------------------

/** Splits one command into tokens: words, "strings" (kept with quotes), { } , ; */
export function tokenize(text: string, line: number): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    if (ch === ' ' || ch === '\t' || ch === '\r') { i++; continue; }
    if (ch === '"') {
      const end = text.indexOf('"', i + 1);
      if (end < 0) throw new NftUnsupported('unterminated string', line);
      out.push(text.slice(i, end + 1));
      i = end + 1;
      continue;
    }
    if ('{},;'.includes(ch)) { out.push(ch); i++; continue; }
    let j = i;
    while (j < text.length && !' \t\r"{},;'.includes(text[j]!)) j++;
    out.push(text.slice(i, j));
    i = j;
  }
  return out;
}

/** Script → commands, one per line (top-level `;` also separates), `#` comments dropped. */
function splitCommands(script: string): NftSourceCommand[] {
  const out: NftSourceCommand[] = [];
  script.split('\n').forEach((raw, idx) => {
    const line = idx + 1;
    let inStr = false;
    let depth = 0;
    let start = 0;
    let text = raw;
    for (let i = 0; i < text.length; i++) {
      const ch = text[i];
      if (ch === '"') inStr = !inStr;
      else if (inStr) continue;
      else if (ch === '#') { text = text.slice(0, i); break; }
      else if (ch === '{') depth++;
      else if (ch === '}') depth--;
      else if (ch === ';' && depth === 0) {
        if (text.slice(start, i).trim()) out.push({ line, text: text.slice(start, i).trim() });
        start = i + 1;
      }
    }
    if (depth !== 0) throw new NftUnsupported('a block spanning lines (only one command per line is compiled)', line);
    const rest = text.slice(start).trim();
    if (rest) out.push({ line, text: rest });
  });
  return out;
}

// --- helpers ----------------------------------------------------------------

const NAME = /^[A-Za-z_][A-Za-z0-9_./-]*$/;

function ident(tok: string | undefined, what: string, line: number): string {
  if (tok === undefined) throw new NftUnsupported(`missing ${what}`, line);
  const v = tok.startsWith('"') ? tok.slice(1, -1) : tok;
  if (!NAME.test(v) || v.length > 255) throw new NftUnsupported(`${what} ${JSON.stringify(tok)} is not a plain name`, line);
  return v;
}

export function quoted(tok: string | undefined, what: string, line: number): string {
  if (tok === undefined || !tok.startsWith('"') || tok.length < 2) throw new NftUnsupported(`${what} must be a "string"`, line);
  const v = tok.slice(1, -1);
  if (Buffer.byteLength(v) > 127) throw new NftUnsupported(`${what} longer than 127 bytes`, line);
  return v;
}

function family(tok: string | undefined, line: number): number {
  if (tok === 'inet' || tok === 'ip' || tok === 'ip6') return NFPROTO[tok];
  throw new NftUnsupported(`family ${tok ?? '(none)'} (only ip, ip6, inet are compiled)`, line);
}

const HOOKS: Record<string, number> = { prerouting: 0, input: 1, forward: 2, output: 3, postrouting: 4 };
const NAMED_PRIO: Record<string, number> = { raw: -300, mangle: -150, dstnat: -100, filter: 0, security: 50, srcnat: 100 };
const TABLE_FLAGS: Record<string, number> = { dormant: 1 };
const SET_FLAGS: Record<string, number> = { constant: 0x2, timeout: 0x10, dynamic: 0x20 };

/** `1h30m`, `10s`, `500ms` or plain seconds → milliseconds. */
export function durationMs(tok: string | undefined, line: number): number {
  if (tok === undefined) throw new NftUnsupported('missing duration', line);
  if (/^\d+$/.test(tok)) return Number(tok) * 1000;
  const m = /^(?=\d)(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$/.exec(tok);
  if (!m) throw new NftUnsupported(`duration ${tok}`, line);
  const [d, h, mi, s, ms] = m.slice(1).map((x) => Number(x ?? 0)) as [number, number, number, number, number];
  return (((d * 24 + h) * 60 + mi) * 60 + s) * 1000 + ms;
}

/** Splits the tokens inside { ... } into `;`-separated clauses. */
function clauses(toks: string[], line: number): string[][] {
  if (toks[0] !== '{' || toks[toks.length - 1] !== '}') throw new NftUnsupported('expected { ... }', line);
  const out: string[][] = [[]];
  for (const t of toks.slice(1, -1)) {
    if (t === ';') out.push([]);
    else out[out.length - 1]!.push(t);
  }
  // `flags a,b` arrives as a , b: glue comma lists back into one word.
  return out.filter((c) => c.length > 0).map((c) => {
    const merged: string[] = [];
    for (let i = 0; i < c.length; i++) {
      if (c[i] === ',' && merged.length && c[i + 1] !== undefined) merged[merged.length - 1] += `,${c[++i]!}`;
      else merged.push(c[i]!);
    }
    return merged;
  });
}

// --- the parser ---------------------------------------------------------------

interface SetInfo {
  keyType: number;
  keyLen: number;
  type: string;
  setId: number;
}

/** Per-script state: sets known, chains whose rule list is known, ids. */
class ScriptState {
  readonly sets = new Map<string, SetInfo>();
  readonly rules = new RuleState();
  nextSetId = 1;
  key(fam: number, table: string, name: string): string {
    return `${fam} ${table} ${name}`;
  }
}

function parseTable(verb: string, toks: string[], st: ScriptState, line: number): NftCommand {
  const fam = family(toks[2], line);
  const table = ident(toks[3], 'table name', line);
  if (verb === 'flush') {
    if (toks.length !== 4) throw new NftUnsupported('flush table takes no options', line);
    st.rules.flushTable(fam, table);
    return { op: 'flushtable', family: fam, table };
  }
  if (verb === 'delete') {
    if (toks.length !== 4) throw new NftUnsupported('delete table takes no options', line);
    st.rules.flushTable(fam, table);
    for (const k of [...st.sets.keys()]) if (k.startsWith(`${fam} ${table} `)) st.sets.delete(k);
    return { op: 'deltable', family: fam, table };
  }
  if (verb !== 'add' && verb !== 'create') throw new NftUnsupported(`${verb} table`, line);
  const cmd: NftCommand = { op: 'newtable', family: fam, table, excl: verb === 'create' };
  if (toks.length > 4) {
    for (const c of clauses(toks.slice(4), line)) {
      if (c[0] === 'comment' && c.length === 2) cmd.comment = quoted(c[1], 'comment', line);
      else if (c[0] === 'flags' && c.length === 2) {
        cmd.tableFlags = 0;
        for (const f of c[1]!.split(',')) {
          const v = TABLE_FLAGS[f];
          if (v === undefined) throw new NftUnsupported(`table flag ${f}`, line);
          cmd.tableFlags |= v;
        }
      } else throw new NftUnsupported(`table option ${c.join(' ')}`, line);
    }
  }
  return cmd;
}

function priorityOf(c: string[], line: number): number {
  // `priority -100`, `priority filter`, `priority dstnat - 10`
  const [p, sign, off] = c;
  let v: number;
  if (p !== undefined && /^-?\d+$/.test(p)) v = Number(p);
  else if (p !== undefined && p in NAMED_PRIO) v = NAMED_PRIO[p]!;
  else throw new NftUnsupported(`priority ${p ?? '(none)'}`, line);
  if (sign === undefined) return v;
  if ((sign === '+' || sign === '-') && off !== undefined && /^\d+$/.test(off) && c.length === 3)
    return sign === '+' ? v + Number(off) : v - Number(off);
  throw new NftUnsupported(`priority ${c.join(' ')}`, line);
}

function parseChain(verb: string, toks: string[], st: ScriptState, line: number): NftCommand {
  const fam = family(toks[2], line);
  const table = ident(toks[3], 'table name', line);
  const name = ident(toks[4], 'chain name', line);
  const simple = (op: 'delchain' | 'flushchain'): NftCommand => {
    if (toks.length !== 5) throw new NftUnsupported(`${verb} chain takes no options`, line);
    return { op, family: fam, table, name };
  };
  if (verb === 'flush') { st.rules.flushChain(fam, table, name); return simple('flushchain'); }
  if (verb === 'delete') { st.rules.flushChain(fam, table, name); return simple('delchain'); }
  if (verb !== 'add' && verb !== 'create') throw new NftUnsupported(`${verb} chain`, line);
  const cmd: NftCommand = { op: 'newchain', family: fam, table, name, excl: verb === 'create' };
  if (toks.length > 5) {
    for (const c of clauses(toks.slice(5), line)) {
      if (c[0] === 'type') {
        // type T hook H [device D] priority P
        const [, type, hookKw, hook] = c;
        if (type !== 'filter' && type !== 'nat' && type !== 'route') throw new NftUnsupported(`chain type ${type ?? ''}`, line);
        if (hookKw !== 'hook' || hook === undefined || !(hook in HOOKS)) throw new NftUnsupported(`hook ${hook ?? ''}`, line);
        if (c[4] !== 'priority') throw new NftUnsupported(`base chain spec ${c.join(' ')}`, line);
        Object.assign(cmd, { base: true, chainType: type, hook: HOOKS[hook], priority: priorityOf(c.slice(5), line) });
      } else if (c[0] === 'policy' && c.length === 2) {
        if (c[1] === 'accept') cmd.policy = 1;
        else if (c[1] === 'drop') cmd.policy = 0;
        else throw new NftUnsupported(`policy ${c[1]}`, line);
      } else if (c[0] === 'comment' && c.length === 2) {
        cmd.comment = quoted(c[1], 'comment', line);
      } else throw new NftUnsupported(`chain option ${c.join(' ')}`, line);
    }
    if (cmd.policy !== undefined && !cmd.base) throw new NftUnsupported('policy on a regular chain', line);
  }
  return cmd;
}

function parseSet(verb: string, toks: string[], st: ScriptState, line: number): NftCommand {
  const fam = family(toks[2], line);
  const table = ident(toks[3], 'table name', line);
  const name = ident(toks[4], 'set name', line);
  const key = st.key(fam, table, name);
  if (verb === 'flush' || verb === 'delete') {
    if (toks.length !== 5) throw new NftUnsupported(`${verb} set takes no options`, line);
    if (verb === 'delete') st.sets.delete(key);
    return { op: verb === 'flush' ? 'flushset' : 'delset', family: fam, table, name };
  }
  if (verb !== 'add' && verb !== 'create') throw new NftUnsupported(`${verb} set`, line);
  const cmd: NftCommand = { op: 'newset', family: fam, table, name, excl: verb === 'create', setFlags: 0 };
  let info: SetInfo | undefined;
  for (const c of clauses(toks.slice(5), line)) {
    if (c[0] === 'type' && c.length === 2) {
      const t = SET_TYPES[c[1]!];
      if (!t) throw new NftUnsupported(`set type ${c[1]}`, line);
      info = { ...t, type: c[1]!, setId: st.nextSetId++ };
    } else if (c[0] === 'flags' && c.length === 2) {
      for (const f of c[1]!.split(',')) {
        const v = SET_FLAGS[f];
        if (v === undefined) throw new NftUnsupported(`set flag ${f}`, line);
        cmd.setFlags! |= v;
      }
    } else if (c[0] === 'comment' && c.length === 2) cmd.comment = quoted(c[1], 'comment', line);
    else if (c[0] === 'timeout' && c.length === 2) cmd.timeoutMs = durationMs(c[1], line);
    else if (c[0] === 'size' && c.length === 2 && /^\d+$/.test(c[1]!)) cmd.size = Number(c[1]);
    else throw new NftUnsupported(`set option ${c.join(' ')}`, line);
  }
  if (!info) throw new NftUnsupported('set without a type', line);
  if (cmd.timeoutMs !== undefined) cmd.setFlags! |= SET_FLAGS.timeout!;
  Object.assign(cmd, { keyType: info.keyType, keyLen: info.keyLen, setId: info.setId });
  st.sets.set(key, info);
  return cmd;
}

function parseElements(verb: string, toks: string[], st: ScriptState, line: number): NftCommand {
  const fam = family(toks[2], line);
  const table = ident(toks[3], 'table name', line);
  const name = ident(toks[4], 'set name', line);
  const info = st.sets.get(st.key(fam, table, name));
  // The key's encoding depends on the set's type, which only a listing could tell.
  if (!info) throw new NftUnsupported(`elements of set ${name}, which this script does not declare`, line);
  if (verb !== 'add' && verb !== 'delete' && verb !== 'create') throw new NftUnsupported(`${verb} element`, line);
  const body = toks.slice(5);
  if (body[0] !== '{' || body[body.length - 1] !== '}') throw new NftUnsupported('expected { elements }', line);
  const elems: NftElem[] = [];
  let cur: string[] = [];
  const flush = () => {
    if (cur.length === 0) throw new NftUnsupported('empty element', line);
    const el: NftElem = { key: encodeElementKey(info.type, cur[0]!, line) };
    for (let i = 1; i < cur.length; i += 2) {
      if (cur[i] === 'comment' && verb !== 'delete') el.comment = quoted(cur[i + 1], 'comment', line);
      else if (cur[i] === 'timeout' && verb !== 'delete') el.timeoutMs = durationMs(cur[i + 1], line);
      else throw new NftUnsupported(`element option ${cur.slice(i).join(' ')}`, line);
    }
    elems.push(el);
    cur = [];
  };
  for (const t of body.slice(1, -1)) {
    if (t === ',') flush();
    else cur.push(t);
  }
  flush();
  return { op: verb === 'delete' ? 'delelem' : 'newelem', family: fam, table, name, excl: verb === 'create', elems, setId: info.setId };
}

function parseRule(verb: string, toks: string[], st: ScriptState, line: number): NftCommand {
  if (verb !== 'add' && verb !== 'insert') throw new NftUnsupported(`${verb} rule`, line);
  const fam = family(toks[2], line);
  const table = ident(toks[3], 'table name', line);
  const chain = ident(toks[4], 'chain name', line);
  let i = 5;
  let index: number | undefined;
  let handle: number | undefined;
  if ((toks[i] === 'index' || toks[i] === 'handle' || toks[i] === 'position') && /^\d+$/.test(toks[i + 1] ?? '')) {
    if (toks[i] === 'index') index = Number(toks[i + 1]);
    else handle = Number(toks[i + 1]);
    i += 2;
  }
  const body = toks.slice(i);
  let comment: string | undefined;
  if (body.length >= 2 && body[body.length - 2] === 'comment') {
    comment = quoted(body[body.length - 1], 'comment', line);
    body.length -= 2;
  }
  if (body.length === 0) throw new NftUnsupported('empty rule', line);
  const lookupSet = (name: string) => st.sets.get(st.key(fam, table, name));
  const { exprs, anonSets } = lowerRule(body, fam, line, lookupSet, () => st.nextSetId++);
  for (const a of anonSets) a.table = table;
  const cmd: NftCommand = { op: 'newrule', family: fam, table, name: chain, exprs, append: verb === 'add' };
  if (comment !== undefined) cmd.comment = comment;
  if (handle !== undefined) cmd.position = handle;
  st.rules.place(cmd, fam, table, chain, index, line);
  // Anonymous sets go right before the rule that uses them.
  return Object.assign(cmd, { anonSets });
}

/**
 * Parses an nft script into batch commands. Throws NftUnsupported (with
 * `line`) for anything outside the compiled subset.
 */
export function parseScript(script: string): ParsedScript {
  if (typeof script !== 'string') throw new TypeError('nft script must be a string');
  if (script.includes('\0')) throw new TypeError('nft script contains a NUL byte');
  const st = new ScriptState();
  const commands: NftCommand[] = [];
  const sources: NftSourceCommand[] = [];
  for (const src of splitCommands(script)) {
    const toks = tokenize(src.text, src.line);
    const [verb, obj] = toks;
    let cmd: NftCommand & { anonSets?: NftCommand[] };
    switch (obj) {
      case 'table': cmd = parseTable(verb!, toks, st, src.line); break;
      case 'chain': cmd = parseChain(verb!, toks, st, src.line); break;
      case 'set': cmd = parseSet(verb!, toks, st, src.line); break;
      case 'element': cmd = parseElements(verb!, toks, st, src.line); break;
      case 'rule': cmd = parseRule(verb!, toks, st, src.line); break;
      default: throw new NftUnsupported(`command ${toks.slice(0, 2).join(' ')}`, src.line);
    }
    for (const extra of cmd.anonSets ?? []) {
      commands.push(extra);
      sources.push(src);
    }
    delete cmd.anonSets;
    commands.push(cmd);
    sources.push(src);
  }
  return { commands, sources };
}
