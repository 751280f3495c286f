// nft script (`nft -f` syntax) for a rule model, as Istio's knftables
// transactions write it (spec §7): per table that has rules, `add table`,
// `flush table` (so re-applying rewrites it atomically), the chains that
// have rules or are jumped to (in the table's declared order), then the
// rules in insertion order. Everything is family inet; v4 and v6 address
// rules sit side by side.
import type { ChainDef, Match, Rule, RuleModel, TableDef, Target } from './model.js';
import { cidrFamily } from './validate.js';

const hex = (n: number) => `0x${n.toString(16)}`;
const num = (n: number, asHex?: boolean) => (asHex ? hex(n) : String(n));
const neq = (not?: boolean) => (not ? '!= ' : '');

function ipKw(rule: Rule, hint?: string): 'ip' | 'ip6' {
  if (rule.family === 4) return 'ip';
  if (rule.family === 6) return 'ip6';
  if (hint !== undefined) return cidrFamily(hint) === 4 ? 'ip' : 'ip6';
  throw new TypeError(`nft: rule in ${rule.chain} needs a family for its address match`);
}

function markText(prefix: string, m: { value: number; mask?: number; not?: boolean; hex?: boolean }, spelling = 'mark'): string {
  const v = num(m.value, m.hex);
  if (m.mask === undefined) return `${prefix} ${neq(m.not)}${v}`;
  const op = m.not ? '!=' : '==';
  switch (spelling) {
    case 'wide': return `mark and ${hex(m.mask)}  ${op} ${v}`;
    case 'meta': return `meta mark and ${hex(m.mask)} ${op} ${v}`;
    case 'meta-amp': return `meta mark & ${hex(m.mask)} ${op} ${v}`;
    default: return `${prefix} and ${hex(m.mask)} ${op} ${v}`;
  }
}

function matchText(m: Match, rule: Rule): string {
  switch (m.kind) {
    case 'addr': return `${ipKw(rule, m.cidr)} ${m.dir[0]}addr ${neq(m.not)}${m.cidr}`;
    case 'iface': return `${m.dir === 'in' ? 'iifname' : 'oifname'} ${neq(m.not)}${m.name}`;
    case 'proto': {
      // `tcp dport …` already implies the protocol.
      const implied = rule.matches.some((o) => o.kind === 'port' && o.proto === m.proto);
      return implied ? '' : `meta l4proto ${m.proto}`;
    }
    case 'port': {
      const ports = m.ports.length > 1 ? `{ ${m.ports.join(', ')} }` : String(m.ports[0]);
      return `${m.proto} ${m.dir[0]}port ${neq(m.not)}${ports}`;
    }
    case 'mark': return markText('mark', m, m.nft);
    case 'connmark': return markText('ct mark', m);
    case 'owner': return `${m.by === 'uid' ? 'skuid' : 'skgid'} ${neq(m.not)}${m.id}`;
    case 'local-socket':
      if (m.nftUid === undefined) throw new TypeError('nft has no --socket-exists: the host probe rule needs kubeletUid for nftables');
      return `skuid ${m.nftUid}`;
    case 'set': return `${ipKw(rule)} ${m.dir[0]}addr @${m.name}`;
    case 'ctstate': return `ct state ${m.states.map((s) => s.toLowerCase()).join(',')}`;
  }
}

function targetText(t: Target, rule: Rule, chains: ChainDef[]): string {
  switch (t.kind) {
    case 'jump': {
      const c = chains.find((d) => d.name === t.chain);
      if (!c?.nft) throw new TypeError(`nft: no nft chain for jump target ${t.chain}`);
      return `jump ${c.nft}`;
    }
    case 'accept': return 'accept';
    case 'return': return 'return';
    case 'drop': return 'drop';
    case 'redirect': return `redirect to :${t.port}`;
    case 'tproxy': {
      // iptables' TPROXY sets the mark and ends the chain; nft spells both out.
      const addr = rule.matches.find((m) => m.kind === 'addr');
      const kw = ipKw(rule, addr?.kind === 'addr' ? addr.cidr : undefined);
      const mark = t.mask === 0xffffffff ? String(t.mark) : `${t.mark} and ${hex(t.mask)}`;
      return `tproxy ${kw} to :${t.port} meta mark set ${mark} accept`;
    }
    case 'mark-set': return `meta mark set ${num(t.value, t.hex)}`;
    // --set-xmark V/M = keep the bits outside M, set V. (Istio's text has the double space.)
    case 'connmark-set': return `ct mark set ct mark & ${hex(~t.mask >>> 0)} |  ${num(t.value, t.hex)}`;
    case 'connmark-save': return 'ct mark set mark';
    case 'connmark-restore':
      if ((t.nfmask ?? 0xffffffff) !== 0xffffffff || (t.ctmask ?? 0xffffffff) !== 0xffffffff) {
        throw new RangeError('nft: CONNMARK --restore-mark with partial masks is not supported');
      }
      return 'meta mark set ct mark';
    case 'ct-zone': return `ct zone set ${t.zone}`;
    case 'snat': return `snat to ${t.to}`;
  }
}

/** The rule body after `add rule inet TABLE CHAIN `. */
export function nftRuleText(rule: Rule, chains: ChainDef[]): string {
  const order = rule.nft?.order ?? rule.matches.map((_, i) => i);
  if (order.length !== rule.matches.length) throw new RangeError(`nft: order of rule in ${rule.chain} does not cover its matches`);
  const parts = order.map((i) => matchText(rule.matches[i]!, rule)).filter((s) => s !== '');
  if (rule.nft?.counter !== false) parts.push('counter');
  parts.push(targetText(rule.target, rule, chains));
  return parts.join(' ');
}

function tableScript(table: TableDef, rules: Rule[]): string[] {
  const chainOf = (name: string) => table.chains.find((c) => c.name === name);
  const own = rules.filter((r) => {
    const c = chainOf(r.chain);
    if (!c) throw new TypeError(`nft: chain ${r.chain} is not part of table ${table.name}`);
    return c.nft !== null;
  });
  if (own.length === 0) return [];
  const used = new Set<string>();
  for (const r of own) {
    used.add(r.chain);
    if (r.target.kind === 'jump') used.add(r.target.chain);
  }
  const t = `inet ${table.nft}`;
  const out = [`add table ${t}`, `flush table ${t}`];
  for (const c of table.chains) {
    if (!used.has(c.name) || c.nft === null) continue;
    out.push(c.base
      ? `add chain ${t} ${c.nft} { type ${c.base.type} hook ${c.base.hook} priority ${c.base.priority} ; }`
      : `add chain ${t} ${c.nft}`);
  }
  // An insert (iptables -I N) becomes `insert … index N-1` while the chain
  // already has that many rules, else an append (knftables does the same).
  const count = new Map<string, number>();
  for (const r of own) {
    const n = count.get(r.chain) ?? 0;
    const body = nftRuleText(r, table.chains);
    const at = r.insert === undefined ? undefined : r.insert - 1;
    out.push(at !== undefined && at < n
      ? `insert rule ${t} ${chainOf(r.chain)!.nft} index ${at} ${body}`
      : `add rule ${t} ${chainOf(r.chain)!.nft} ${body}`);
    count.set(r.chain, n + 1);
  }
  return out;
}

/** The whole nft script for the model (one transaction). */
export function toNft(model: RuleModel): string {
  const lines: string[] = [];
  for (const table of model.tables) lines.push(...tableScript(table, model.rules.filter((r) => r.table === table.name)));
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}
