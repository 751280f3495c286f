// iptables-restore input for one family, in Istio's layout (spec §6.4):
// tables alphabetically (empty ones left out); per table `-N` for each own
// chain in order of its first rule, then `-N` for jump targets not declared
// yet, then every rule in insertion order, then COMMIT. Fed to
// `iptables-restore --noflush`.
import { IPTABLES_BUILTINS, rulesOf, type Family, type Match, type Rule, type RuleModel, type Target } from './model.js';

const hex = (n: number) => `0x${n.toString(16)}`;
const num = (n: number, asHex?: boolean) => (asHex ? hex(n) : String(n));
const bang = (not?: boolean) => (not ? '! ' : '');
const markText = (value: number, mask: number | undefined, asHex?: boolean) =>
  mask === undefined ? num(value, asHex) : `${num(value, asHex)}/${hex(mask)}`;

function matchText(m: Match): string {
  switch (m.kind) {
    case 'addr': return `${bang(m.not)}${m.dir === 'src' ? '-s' : '-d'} ${m.cidr}`;
    case 'iface': return `${bang(m.not)}${m.dir === 'in' ? '-i' : '-o'} ${m.name}`;
    case 'proto': return m.module ? `-p ${m.proto} -m ${m.proto}` : `-p ${m.proto}`;
    case 'port': {
      if (m.ports.length > 1) return `-m multiport ${bang(m.not)}--${m.dir[0]}ports ${m.ports.join(',')}`;
      const p = `${bang(m.not)}--${m.dir[0]}port ${m.ports[0]}`;
      return m.module ? `-m ${m.proto} ${p}` : p;
    }
    case 'mark': return `-m mark ${bang(m.not)}--mark ${markText(m.value, m.mask, m.hex)}`;
    case 'connmark': return `-m connmark ${bang(m.not)}--mark ${markText(m.value, m.mask, m.hex)}`;
    case 'owner': return `-m owner ${bang(m.not)}--${m.by}-owner ${m.id}`;
    case 'local-socket': return '-m owner --socket-exists';
    case 'set': return `-m set --match-set ${m.name} ${m.dir}`;
    case 'ctstate': return `-m conntrack --ctstate ${m.states.join(',')}`;
  }
}

function targetText(t: Target): string {
  switch (t.kind) {
    case 'jump': return `-j ${t.chain}`;
    case 'accept': return '-j ACCEPT';
    case 'return': return '-j RETURN';
    case 'drop': return '-j DROP';
    case 'redirect': return `-j REDIRECT ${t.toPortFlag ? '--to-port' : '--to-ports'} ${t.port}`;
    case 'tproxy': return `-j TPROXY --tproxy-mark ${t.mark}/${hex(t.mask)} --on-port ${t.port}`;
    case 'mark-set': return `-j MARK --set-mark ${num(t.value, t.hex)}`;
    case 'connmark-set': return `-j CONNMARK --set-xmark ${markText(t.value, t.mask, t.hex)}`;
    case 'connmark-save': return '-j CONNMARK --save-mark';
    case 'connmark-restore':
      return `-j CONNMARK --restore-mark${t.nfmask === undefined ? '' : ` --nfmask ${hex(t.nfmask)}`}${t.ctmask === undefined ? '' : ` --ctmask ${hex(t.ctmask)}`}`;
    case 'ct-zone': return `-j CT --zone ${t.zone}`;
    case 'snat': return `-j SNAT --to-source ${t.to}`;
  }
}

/** One rule as iptables arguments after `-t TABLE` (`-A CHAIN ...` / `-I CHAIN N ...`). */
export function iptablesRuleText(r: Rule): string {
  const head = r.insert === undefined ? `-A ${r.chain}` : `-I ${r.chain} ${r.insert}`;
  return [head, ...r.matches.map(matchText), targetText(r.target)].join(' ');
}

/** The restore input for `family` ('' when the model does not program that family). */
export function toIptablesRestore(model: RuleModel, family: Family): string {
  if (family !== 4 && family !== 6) throw new TypeError(`family must be 4 or 6, got ${JSON.stringify(family)}`);
  const rules = rulesOf(model, family);
  const lines = new Map<string, string[]>();
  const declared = new Set<string>();
  const declare = (table: string, chain: string) => {
    const key = `${chain}:${table}`;
    if (declared.has(key) || IPTABLES_BUILTINS.has(chain)) return;
    declared.add(key);
    lines.set(table, [...(lines.get(table) ?? []), `-N ${chain}`]);
  };
  for (const r of rules) declare(r.table, r.chain);
  for (const r of rules) if (r.target.kind === 'jump') declare(r.table, r.target.chain);
  for (const r of rules) lines.set(r.table, [...(lines.get(r.table) ?? []), iptablesRuleText(r)]);
  let out = '';
  for (const table of [...lines.keys()].sort()) out += `* ${table}\n${lines.get(table)!.join('\n')}\nCOMMIT\n`;
  return out;
}

/** What `podwire rules render --backend iptables` prints: IPv4 input, then IPv6 when enabled. */
export function toIptablesText(model: RuleModel): string {
  return model.families.map((f) => toIptablesRestore(model, f)).join('');
}
