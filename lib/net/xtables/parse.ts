// Pure parsing for the iptables tools: `iptables-save` output into tables,
// chains and rules, argument tokenizing with iptables-save's quoting, and the
// input line iptables-restore blames when it fails.

export interface SavedCounters {
  packets: number;
  bytes: number;
}

export interface SavedRule {
  chain: string;
  /** Everything after `-A CHAIN`, verbatim (`-p tcp -j ACCEPT`). */
  spec: string;
  /** `spec` split into arguments, quotes removed (`--comment "a b"` → `a b`). */
  args: string[];
  /** Present when saved with counters (`-c`). */
  counters?: SavedCounters;
}

export interface SavedChain {
  name: string;
  /** Built-in chains have a policy (`ACCEPT`, `DROP`); user chains have null. */
  policy: string | null;
  counters: SavedCounters;
  rules: SavedRule[];
}

export interface SavedTable {
  name: string;
  chains: SavedChain[];
}

/**
 * Splits an iptables argument string. iptables-save quotes arguments that
 * contain spaces or quotes with "..." and escapes `"` and `\` inside them.
 */
export function splitArgs(spec: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let quoted = false;
  for (let i = 0; i < spec.length; i++) {
    const ch = spec[i]!;
    if (quoted) {
      if (ch === '\\' && (spec[i + 1] === '"' || spec[i + 1] === '\\')) cur += spec[++i];
      else if (ch === '"') quoted = false;
      else cur += ch;
    } else if (ch === '"') {
      quoted = true;
      inWord = true;
    } else if (ch === ' ' || ch === '\t') {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += ch;
      inWord = true;
    }
  }
  if (quoted) throw new TypeError(`unterminated quote in ${JSON.stringify(spec)}`);
  if (inWord) out.push(cur);
  return out;
}

const COUNTERS = /^\[(\d+):(\d+)\]$/;

function counters(text: string, line: number): SavedCounters {
  const m = COUNTERS.exec(text);
  if (!m) throw new TypeError(`iptables-save line ${line}: bad counters ${JSON.stringify(text)}`);
  return { packets: Number(m[1]), bytes: Number(m[2]) };
}

/** Parses `iptables-save` / `ip6tables-save` output (with or without `-c`). Malformed input → TypeError. */
export function parseSave(text: string): SavedTable[] {
  const tables: SavedTable[] = [];
  let table: SavedTable | undefined;
  let chains = new Map<string, SavedChain>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      if (table) throw new TypeError(`iptables-save line ${n}: table ${line} starts before COMMIT of ${table.name}`);
      table = { name: line.slice(1).trim(), chains: [] };
      chains = new Map();
      continue;
    }
    if (!table) throw new TypeError(`iptables-save line ${n}: ${JSON.stringify(line)} outside a table`);
    if (line === 'COMMIT') {
      tables.push(table);
      table = undefined;
      continue;
    }
    if (line.startsWith(':')) {
      const [name, policy, count] = line.slice(1).split(/\s+/);
      if (!name || !policy || !count) throw new TypeError(`iptables-save line ${n}: bad chain ${JSON.stringify(line)}`);
      const chain: SavedChain = { name, policy: policy === '-' ? null : policy, counters: counters(count, n), rules: [] };
      table.chains.push(chain);
      chains.set(name, chain);
      continue;
    }
    let rest = line;
    let ruleCounters: SavedCounters | undefined;
    if (rest.startsWith('[')) {
      const end = rest.indexOf(']');
      ruleCounters = counters(rest.slice(0, end + 1), n);
      rest = rest.slice(end + 1).trimStart();
    }
    const m = /^-A\s+(\S+)\s*(.*)$/.exec(rest);
    if (!m) throw new TypeError(`iptables-save line ${n}: unexpected ${JSON.stringify(line)}`);
    const chain = chains.get(m[1]!);
    if (!chain) throw new TypeError(`iptables-save line ${n}: rule for undeclared chain ${m[1]}`);
    const rule: SavedRule = { chain: chain.name, spec: m[2]!, args: splitArgs(m[2]!) };
    if (ruleCounters) rule.counters = ruleCounters;
    chain.rules.push(rule);
  }
  if (table) throw new TypeError(`iptables-save output ends inside table ${table.name} (no COMMIT)`);
  return tables;
}

// The ways iptables-restore (legacy and nft, 1.6–1.8) names the input line it
// stopped at: "Error occurred at line: N" (parse errors), "line N failed"
// (commit errors), "COMMIT expected at line N" (truncated input).
const LINE_PATTERNS = [/Error occurred at line: (\d+)/, /\bline (\d+) failed\b/, /COMMIT expected at line (\d+)/];

/** The 1-based input line iptables-restore blamed in its output, if any. */
export function restoreErrorLine(output: string): number | undefined {
  for (const re of LINE_PATTERNS) {
    const m = re.exec(output);
    if (m) return Number(m[1]);
  }
  return undefined;
}
