// The nftables backend of the engine. Reading: one nf_tables table dump over
// netlink (listTables); a netns with no table (a new pod) is not read further;
// an unchanged one is confirmed by a native dump compared with the compiled
// batch (nft verify); otherwise the model's tables (family inet) are read
// with `nft -j list ruleset` and compared with what the same script prints
// back in a scratch netns. Writing: one transaction — per table `add table` +
// `flush table` + chains + rules, with chains that are foreign or whose hook
// changed deleted inside it, so the pod is never between two states — sent
// through an NftSender: by default (nativeNft) the script compiled once into
// an nfnetlink batch and sent through the netns's netfilter socket, with
// `nft -f` only for what the compiler does not cover (reported).
import type { Netns } from '../net/netns/netns.js';
import { compileCached, verify as nftVerify } from '../net/nft/batch.js';
import { listTables } from '../net/nft/dump.js';
import { NFPROTO_INET } from '../net/nl/nfnl.js';
import type { NftChain, NftRule, NftRuleset, NftTable } from '../net/nft/tool.js';
import { nativeNft, type NftSender } from './engine-types.js';
import type { RuleModel } from './model.js';
import { nftReference, type NftReference } from './reference.js';
import { toNft } from './render-nft.js';

interface TablePlan {
  name: string;
  /** In the model's output (it has rules). */
  wanted: boolean;
  present: boolean;
  /** Present chains to delete before they are (re)declared or because the model has none of that name. */
  dropChains: string[];
  /** Present chains that the model also has (for remove). */
  ownChains: string[];
}

export interface NftState {
  drift: string[];
  residue: boolean;
  tables: TablePlan[];
}

/** The script the engine sends: the rendered rules, plus the sets a host rule names (created empty if missing). */
// Models are immutable and reused per configuration: render each once.
const scripts = new WeakMap<RuleModel, string>();
const declaredCache = new WeakMap<RuleModel, Set<string>>();

/** The inet tables the engine script of a model adds. */
function declaredTables(model: RuleModel): Set<string> {
  let set = declaredCache.get(model);
  if (!set) {
    set = new Set(engineScript(model).split('\n').map((l) => /^add table inet (\S+)$/.exec(l)?.[1]).filter((x): x is string => !!x));
    declaredCache.set(model, set);
  }
  return set;
}

export function engineScript(model: RuleModel): string {
  let script = scripts.get(model);
  if (script === undefined) {
    script = renderEngineScript(model);
    scripts.set(model, script);
  }
  return script;
}

function renderEngineScript(model: RuleModel): string {
  const lines = toNft(model).split('\n').filter((l) => l !== '');
  const out: string[] = [];
  for (const line of lines) {
    out.push(line);
    const m = /^add table inet (\S+)$/.exec(line);
    if (!m) continue;
    const table = model.tables.find((t) => t.nft === m[1]);
    const sets = new Map<string, string>();
    for (const r of model.rules) {
      if (r.table !== table?.name) continue;
      for (const x of r.matches) if (x.kind === 'set') sets.set(x.name, r.family === 6 ? 'ipv6_addr' : 'ipv4_addr');
    }
    // `add set` keeps an existing set and its elements (the probe set owns them).
    for (const [name, type] of sets) out.push(`add set inet ${m[1]} ${name} { type ${type} ; }`);
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

/** A rule's statements with counter values dropped (they change with traffic). */
const ruleKey = (r: NftRule) => JSON.stringify(r.expr.map((e) => ('counter' in e ? { counter: null } : e)));
const chainDef = (c: NftChain) => (c.hook === undefined ? 'regular' : `type ${c.type} hook ${c.hook} priority ${String(c.priority)} policy ${c.policy ?? 'accept'}`);

/** `nft -a list ruleset` → rule text by `table chain handle`. */
export function ruleTexts(listing: string): Map<string, string> {
  const out = new Map<string, string>();
  let table = '';
  let chain = '';
  for (const line of listing.split('\n')) {
    const t = /^table (\S+) (\S+) \{/.exec(line);
    if (t) { table = `${t[1]} ${t[2]}`; chain = ''; continue; }
    const c = /^\s*chain (\S+) \{/.exec(line);
    if (c) { chain = c[1]!; continue; }
    if (/^\s*(set|map|flowtable|counter|quota) \S+ \{/.test(line)) { chain = ''; continue; }
    const r = /^\s*(.*\S)\s+# handle (\d+)$/.exec(line);
    if (r && chain) out.set(`${table} ${chain} ${r[2]}`, r[1]!.replace(/counter packets \d+ bytes \d+/, 'counter'));
  }
  return out;
}

// A reference is built once per script and never changed: parse its listing once.
const refTextCache = new WeakMap<NftReference, Map<string, string>>();

function referenceTexts(ref: NftReference): Map<string, string> {
  let texts = refTextCache.get(ref);
  if (!texts) {
    texts = ruleTexts(ref.text);
    refTextCache.set(ref, texts);
  }
  return texts;
}

function findTable(rs: NftRuleset, name: string): NftTable | undefined {
  return rs.tables.find((t) => t.family === 'inet' && t.name === name);
}

/** Compares the live ruleset with the model's reference. */
export async function diffNft(model: RuleModel, live: NftRuleset, liveText: () => Promise<string>): Promise<NftState> {
  const ref = await nftReference(engineScript(model));
  const refTexts = referenceTexts(ref);
  const st: NftState = { drift: [], residue: false, tables: [] };
  const pending: Array<{ kind: 'missing' | 'foreign'; where: string; key: string; text?: string }> = [];
  for (const def of model.tables) {
    const refT = findTable(ref.ruleset, def.nft);
    const liveT = findTable(live, def.nft);
    const plan: TablePlan = { name: def.nft, wanted: refT !== undefined, present: liveT !== undefined, dropChains: [], ownChains: [] };
    st.tables.push(plan);
    if (liveT) st.residue = true;
    const tref = `inet ${def.nft}`;
    if (!refT) {
      if (liveT) st.drift.push(`foreign table: ${tref} (the configuration has no rules there)`);
      continue;
    }
    if (!liveT) {
      st.drift.push(`missing table: ${tref}`);
      continue;
    }
    for (const rc of refT.chains) {
      const lc = liveT.chains.find((c) => c.name === rc.name);
      const where = `${tref} ${rc.name}`;
      if (!lc) {
        st.drift.push(`missing chain: ${where}`);
        for (const r of rc.rules) st.drift.push(`missing rule: ${where} ${refTexts.get(`${tref} ${rc.name} ${r.handle}`) ?? ruleKey(r)}`);
        continue;
      }
      plan.ownChains.push(rc.name);
      if (chainDef(lc) !== chainDef(rc)) {
        st.drift.push(`changed chain: ${where} (${chainDef(lc)}, want ${chainDef(rc)})`);
        plan.dropChains.push(rc.name);
      }
      const left = [...lc.rules];
      let missing = 0;
      for (const r of rc.rules) {
        const i = left.findIndex((x) => ruleKey(x) === ruleKey(r));
        if (i >= 0) {
          left.splice(i, 1);
        } else {
          missing++;
          pending.push({ kind: 'missing', where, key: ruleKey(r), text: refTexts.get(`${tref} ${rc.name} ${r.handle}`) });
        }
      }
      for (const r of left) pending.push({ kind: 'foreign', where, key: `${tref} ${rc.name} ${r.handle}` });
      if (left.length === 0 && missing === 0 && lc.rules.map(ruleKey).join() !== rc.rules.map(ruleKey).join()) {
        st.drift.push(`misordered chain: ${where}`);
      }
    }
    for (const lc of liveT.chains) {
      if (refT.chains.some((c) => c.name === lc.name)) continue;
      st.drift.push(`foreign chain: ${tref} ${lc.name} (${lc.rules.length} rules)`);
      plan.dropChains.push(lc.name);
    }
  }
  if (pending.length > 0) {
    // Name foreign rules the way nft prints them (only read when there is drift).
    const texts = pending.some((p) => p.kind === 'foreign') ? ruleTexts(await liveText()) : new Map<string, string>();
    for (const p of pending) {
      st.drift.push(p.kind === 'missing'
        ? `missing rule: ${p.where} ${p.text ?? p.key}`
        : `foreign rule: ${p.where} ${texts.get(p.key) ?? `(handle ${p.key.split(' ').pop()})`}`);
    }
  }
  return st;
}

/**
 * The netns's state against the model. `quick` (apply and verify; not
 * remove, which needs the full plan) lets an unchanged netns be confirmed
 * with one native netlink dump instead of listing it with `nft`.
 */
export async function readNft(ns: Netns, model: RuleModel, sender: NftSender = nativeNft, quick = false): Promise<NftState> {
  const tables = await listTables(ns);
  // No nf_tables table at all (a new pod): nothing to list back.
  if (tables.length === 0) return diffNft(model, { tables: [] }, async () => '');
  if (quick && sender === nativeNft && await unchanged(ns, model, tables)) return { drift: [], residue: true, tables: [] };
  return diffNft(model, await sender.list(ns), () => sender.listText(ns));
}

/** True when the netns holds exactly the model's tables, chains and rules (native dump and compare). */
async function unchanged(ns: Netns, model: RuleModel, tables: Array<{ family: number; name: string }>): Promise<boolean> {
  const compiled = compileCached(engineScript(model));
  if (compiled.path !== 'netlink') return false;
  // Our tables the script does not declare (an older configuration's) are drift the dump compare would not look at.
  const declared = declaredTables(model);
  if (tables.some((t) => t.family === NFPROTO_INET && !declared.has(t.name) && model.tables.some((d) => d.nft === t.name))) return false;
  return (await nftVerify(ns, compiled, { tables })).ok;  // the tables just listed: no second table dump
}

/** A table of ours the configuration no longer has rules in (the host table stays: the probe set lives there). */
const tableDropped = (model: RuleModel, t: TablePlan) => t.present && !t.wanted && model.kind !== 'hostprobe';

/** The reconcile transaction: the engine script with our stale chains and tables deleted inside it. */
export function reconcileScript(model: RuleModel, st: NftState): string {
  const script = engineScript(model);
  // Nothing to delete (a new pod): the engine script itself, the same string
  // object each time, so compileCached finds it without hashing a new one.
  if (script !== '' && !st.tables.some((t) => t.dropChains.length > 0 || tableDropped(model, t))) return script;
  const out: string[] = [];
  for (const line of script.split('\n').filter((l) => l !== '')) {
    out.push(line);
    const m = /^flush table inet (\S+)$/.exec(line);
    const plan = m && st.tables.find((t) => t.name === m[1]);
    // Flushed first, so no rule of ours still jumps to them.
    if (plan) for (const c of plan.dropChains) out.push(`delete chain inet ${plan.name} ${c}`);
  }
  for (const t of st.tables) if (tableDropped(model, t)) out.push(`delete table inet ${t.name}`);
  return `${out.join('\n')}\n`;
}

export async function applyNft(ns: Netns, model: RuleModel, st: NftState, sender: NftSender = nativeNft): Promise<string[]> {
  if (st.drift.length === 0) return [];
  await sender.applyScript(ns, reconcileScript(model, st));
  return [st.residue ? 'nft transaction (reconcile)' : 'nft transaction'];
}

/**
 * Deletes our tables (one transaction). The host table keeps its sets (the
 * probe set lives there): only our chains go, as Istio's host delete does.
 */
export async function removeNft(ns: Netns, model: RuleModel, st: NftState, sender: NftSender = nativeNft): Promise<string[]> {
  const lines: string[] = [];
  const removed: string[] = [];
  for (const t of st.tables) {
    if (!t.present) continue;
    if (model.kind === 'hostprobe') {
      const chains = [...t.ownChains];
      for (const c of chains) lines.push(`flush chain inet ${t.name} ${c}`);
      for (const c of chains) {
        lines.push(`delete chain inet ${t.name} ${c}`);
        removed.push(`chain inet ${t.name} ${c}`);
      }
    } else {
      lines.push(`delete table inet ${t.name}`);
      removed.push(`table inet ${t.name}`);
    }
  }
  if (lines.length > 0) await sender.applyScript(ns, `${lines.join('\n')}\n`);
  return removed;
}
