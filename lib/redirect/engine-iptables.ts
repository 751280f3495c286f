// The iptables backend of the engine: read a netns's rules with
// iptables-save, compare them with what the same model prints back in a
// scratch netns, and write with one `iptables-restore --noflush` per family.
// A netns with no residue gets exactly Istio's restore text. Residue that
// differs (drift, an older rule set) is reconciled Istio's way (spec §6.5):
// DROP guardrails in filter INPUT/FORWARD/OUTPUT, then one restore per family
// that deletes our old jumps and leftover ISTIO_* chains, flushes our chains
// and refills them (each table is swapped atomically by the kernel), then the
// guardrails go, even when the restore failed (the error is thrown).
import { parseSave, type IptablesMode, type SavedRule, type SavedTable } from '../net/xtables/iptables.js';
import type { Netns } from '../net/netns/netns.js';
import { execIptables, famText, type IptablesRunner } from './engine-types.js';
import { rulesOf, type Family, type RuleModel } from './model.js';
import { GenerationCache } from './generation-cache.js';
import { packetFilterEmpty } from './pristine.js';
import { iptablesClone, modelReference, restoreTextOf } from './reference.js';
import { captureNft, NftCloneUnsupported, replayNft } from '../net/nft/clone.js';
import { iptablesRuleText } from './render-iptables.js';

const TABLES = ['filter', 'mangle', 'nat', 'raw'];
/** Chains named ISTIO_* are ours even when the model no longer has them (Istio's rule for residue). */
const OWNED_PREFIX = 'ISTIO_';
export const GUARD_COMMENT = 'podwire-guardrail';
const GUARDS = ['INPUT', 'FORWARD', 'OUTPUT'].flatMap((chain) => ['tcp', 'udp'].map((p) => ({ chain, spec: `-p ${p} -m comment --comment ${GUARD_COMMENT} -j DROP` })));

export interface IptablesOptions {
  mode?: IptablesMode;
  runner?: IptablesRunner;
}

interface TablePlan {
  /** Our user chains in the model (declared with `:C - [0:0]`, which creates or flushes them). */
  ownChains: string[];
  /** Chains of ours present but not in the model (`-F`, `-X`). */
  foreignChains: string[];
  /** Our rules present in builtin chains (`-D`). */
  builtinRules: Array<{ chain: string; spec: string }>;
  /** Chains of ours present at all (for remove). */
  presentChains: string[];
}

export interface FamilyState {
  family: Family;
  /** The netns held no packet-filter state at all when read (a new pod). */
  pristine: boolean;
  drift: string[];
  /** Something of ours is present (chains, jumps, guardrails). */
  residue: boolean;
  tables: Map<string, TablePlan>;
  staleGuards: Array<{ chain: string; spec: string }>;
}

function jumpTarget(r: SavedRule): string | undefined {
  const i = r.args.findIndex((a) => a === '-j' || a === '-g');
  return i >= 0 ? r.args[i + 1] : undefined;
}

const isGuard = (r: SavedRule) => {
  const i = r.args.indexOf('--comment');
  return i >= 0 && r.args[i + 1] === GUARD_COMMENT;
};

/** Multiset difference of two ordered rule lists, and whether only the order differs. */
function compare(want: string[], have: string[]): { missing: string[]; foreign: string[]; misordered: boolean } {
  const left = [...have];
  const missing: string[] = [];
  for (const w of want) {
    const i = left.indexOf(w);
    if (i >= 0) left.splice(i, 1);
    else missing.push(w);
  }
  return { missing, foreign: left, misordered: missing.length === 0 && left.length === 0 && want.join('\n') !== have.join('\n') };
}

/** Compares a family's live tables with the reference of the model. */
export function diffFamily(family: Family, ref: SavedTable[], live: SavedTable[]): FamilyState {
  const st: FamilyState = { family, pristine: false, drift: [], residue: false, tables: new Map(), staleGuards: [] };
  const names = new Set([...ref, ...live].map((t) => t.name).filter((n) => TABLES.includes(n)));
  for (const tname of [...names].sort()) {
    const refT = ref.find((t) => t.name === tname);
    const liveT = live.find((t) => t.name === tname);
    const plan: TablePlan = { ownChains: [], foreignChains: [], builtinRules: [], presentChains: [] };
    const refOwn = (refT?.chains ?? []).filter((c) => c.policy === null);
    plan.ownChains = refOwn.map((c) => c.name);
    const owned = (name: string | undefined) => name !== undefined && (plan.ownChains.includes(name) || name.startsWith(OWNED_PREFIX));
    const where = (chain: string) => `${famText(family)} ${tname} ${chain}`;
    for (const c of refOwn) {
      const lc = liveT?.chains.find((x) => x.name === c.name);
      if (!lc) {
        st.drift.push(`missing chain: ${where(c.name)}`);
        for (const r of c.rules) st.drift.push(`missing rule: ${where(c.name)} ${r.spec}`);
        continue;
      }
      plan.presentChains.push(c.name);
      const d = compare(c.rules.map((r) => r.spec), lc.rules.map((r) => r.spec));
      for (const s of d.missing) st.drift.push(`missing rule: ${where(c.name)} ${s}`);
      for (const s of d.foreign) st.drift.push(`foreign rule: ${where(c.name)} ${s}`);
      if (d.misordered) st.drift.push(`misordered chain: ${where(c.name)}`);
    }
    for (const lc of liveT?.chains ?? []) {
      if (lc.policy !== null || !owned(lc.name) || plan.ownChains.includes(lc.name)) continue;
      plan.foreignChains.push(lc.name);
      plan.presentChains.push(lc.name);
      st.drift.push(`foreign chain: ${where(lc.name)} (${lc.rules.length} rules)`);
    }
    const builtins = new Set([...(refT?.chains ?? []), ...(liveT?.chains ?? [])].filter((c) => c.policy !== null).map((c) => c.name));
    for (const b of builtins) {
      const want = (refT?.chains.find((c) => c.name === b)?.rules ?? []).map((r) => r.spec);
      const liveRules = liveT?.chains.find((c) => c.name === b)?.rules ?? [];
      for (const r of liveRules.filter(isGuard)) {
        st.staleGuards.push({ chain: b, spec: r.spec });
        st.drift.push(`leftover guardrail: ${where(b)} ${r.spec}`);
      }
      const ours = liveRules.filter((r) => !isGuard(r) && (want.includes(r.spec) || owned(jumpTarget(r))));
      plan.builtinRules.push(...ours.map((r) => ({ chain: b, spec: r.spec })));
      const d = compare(want, ours.map((r) => r.spec));
      for (const s of d.missing) st.drift.push(`missing rule: ${where(b)} ${s}`);
      for (const s of d.foreign) st.drift.push(`foreign rule: ${where(b)} ${s}`);
      if (d.misordered) st.drift.push(`misordered rules: ${where(b)}`);
    }
    if (plan.presentChains.length > 0 || plan.builtinRules.length > 0) st.residue = true;
    st.tables.set(tname, plan);
  }
  if (st.staleGuards.length > 0) st.residue = true;
  return st;
}

/** The live state of every family of the model, compared with its reference. */
export async function readIptables(ns: Netns, model: RuleModel, opts: IptablesOptions = {}, quick = false): Promise<FamilyState[]> {
  const runner = opts.runner ?? execIptables;
  const same = () => model.families.map((family): FamilyState => ({ family, pristine: false, drift: [], residue: true, tables: new Map(), staleGuards: [] }));
  // `quick` (apply and verify; not remove, which needs the plan): nf_tables unchanged since the
  // netns was last found to hold exactly the model's iptables-nft rules — nothing to read.
  const fast = quick && !opts.runner;
  const tag = opts.mode ?? '';
  if (fast && await iptClean.clean(ns, model, tag)) return same();
  // A netns with no packet-filter state at all (a new pod) has nothing to read back.
  const empty = await packetFilterEmpty(ns, model.families);
  // Or a netns whose nf_tables state is exactly those rules, confirmed by one dump.
  if (fast && !empty && await iptClean.compare(ns, model, tag, () => sameAsReference(ns, model, opts.mode))) return same();
  return Promise.all(model.families.map(async (family) => {
    const m = opts.mode ? { mode: opts.mode } : {};
    const [ref, liveText] = await Promise.all([
      modelReference(model, family, opts.mode),
      empty ? '' : runner.saveText(ns, { family, ...m }),
    ]);
    return empty ? pristineState(family, ref) : { ...diffFamily(family, ref, parseSave(liveText)), pristine: false };
  }));
}

// A new pod's state against a reference is always the same: diffed once per reference
// (references are cached and never changed), handed out as a copy.
const pristine = new WeakMap<SavedTable[], FamilyState>();

function pristineState(family: Family, ref: SavedTable[]): FamilyState {
  let st = pristine.get(ref);
  if (!st) pristine.set(ref, (st = { ...diffFamily(family, ref, []), pristine: true }));
  return { ...st, drift: [...st.drift], tables: new Map(st.tables), staleGuards: [] };
}

/** Netns whose nf_tables state was found to be the model's iptables-nft replay (per model and mode). */
const iptClean = new GenerationCache();

/** True when the netns's whole nf_tables state is the replay of the model's iptables-nft rules. */
async function sameAsReference(ns: Netns, model: RuleModel, mode: IptablesMode | undefined): Promise<boolean> {
  const clone = await iptablesClone(model, mode);
  if (!clone) return false;
  try {
    return (await captureNft(ns)).batch.equals(clone.batch);
  } catch (err) {
    if (err instanceof NftCloneUnsupported) return false;  // sets: someone else's state too
    throw err;
  }
}

function guardText(add: boolean, stale: Array<{ chain: string; spec: string }>): string {
  const lines = ['*filter', ...stale.map((g) => `-D ${g.chain} ${g.spec}`)];
  for (const g of GUARDS) lines.push(add ? `-I ${g.chain} 1 ${g.spec}` : `-D ${g.chain} ${g.spec}`);
  return `${lines.join('\n')}\nCOMMIT\n`;
}

/** One restore that cleans our residue out of every table and refills it with the model. */
export function reconcileText(model: RuleModel, st: FamilyState): string {
  const rules = rulesOf(model, st.family);
  let out = '';
  for (const [tname, plan] of st.tables) {
    const mine = rules.filter((r) => r.table === tname);
    if (mine.length === 0 && plan.presentChains.length === 0 && plan.builtinRules.length === 0 && plan.ownChains.length === 0) continue;
    const lines = [`*${tname}`, ...plan.ownChains.map((c) => `:${c} - [0:0]`)];
    for (const r of plan.builtinRules) lines.push(`-D ${r.chain} ${r.spec}`);
    for (const c of plan.foreignChains) lines.push(`-F ${c}`);
    for (const c of plan.foreignChains) lines.push(`-X ${c}`);
    for (const r of mine) lines.push(iptablesRuleText(r));
    out += `${lines.join('\n')}\nCOMMIT\n`;
  }
  return out;
}

/** Writes the model's rules (nothing when every family already matches). Returns what was run. */
export async function applyIptables(ns: Netns, model: RuleModel, states: FamilyState[], opts: IptablesOptions = {}): Promise<string[]> {
  const runner = opts.runner ?? execIptables;
  const m = opts.mode ? { mode: opts.mode } : {};
  const actions: string[] = [];
  const todo = states.filter((s) => s.drift.length > 0);
  // A netns with no packet-filter state at all (a new pod): replay the rules
  // iptables-nft-restore wrote into a scratch netns, every family in one
  // atomic nf_tables transaction (the same objects, without two execs).
  if (todo.length > 0 && states.every((s) => s.pristine) && !opts.runner) {
    const clone = await iptablesClone(model, opts.mode);
    if (clone) {
      await replayNft(ns, clone);
      return [`nf_tables batch (iptables-nft rules, ${states.map((s) => famText(s.family)).join('+')})`];
    }
  }
  // A netns without any residue of ours: Istio's own restore text.
  for (const st of todo.filter((s) => !s.residue)) {
    await runner.restore(ns, restoreTextOf(model, st.family), { family: st.family, ...m });
    actions.push(`iptables-restore ${famText(st.family)}`);
  }
  const dirty = todo.filter((s) => s.residue);
  if (dirty.length === 0) return actions;
  const guarded: typeof dirty = [];
  try {
    for (const st of dirty) {
      await runner.restore(ns, guardText(true, st.staleGuards), { family: st.family, ...m });
      guarded.push(st);
      actions.push(`guardrails up ${famText(st.family)}`);
    }
    for (const st of dirty) {
      await runner.restore(ns, reconcileText(model, st), { family: st.family, ...m });
      actions.push(`iptables-restore ${famText(st.family)} (reconcile)`);
    }
  } finally {
    const errors: unknown[] = [];
    for (const st of guarded) {
      try {
        await runner.restore(ns, guardText(false, []), { family: st.family, ...m });
        actions.push(`guardrails down ${famText(st.family)}`);
      } catch (err) {
        errors.push(err);
      }
    }
    // A guardrail that cannot be removed leaves the pod dropping traffic: say so.
    if (errors.length > 0) throw new AggregateError(errors, 'iptables: could not remove the guardrails');
  }
  return actions;
}

/** Deletes our jumps, rules and chains (and stray guardrails); what is not there is skipped. */
export async function removeIptables(ns: Netns, states: FamilyState[], opts: IptablesOptions = {}): Promise<string[]> {
  const runner = opts.runner ?? execIptables;
  const m = opts.mode ? { mode: opts.mode } : {};
  const removed: string[] = [];
  for (const st of states) {
    if (!st.residue) continue;
    let text = '';
    const what: string[] = [];
    for (const [tname, plan] of st.tables) {
      const guards = tname === 'filter' ? st.staleGuards : [];
      if (plan.presentChains.length + plan.builtinRules.length + guards.length === 0) continue;
      const lines = [`*${tname}`];
      for (const r of [...plan.builtinRules, ...guards]) {
        lines.push(`-D ${r.chain} ${r.spec}`);
        what.push(`rule ${famText(st.family)} ${tname} ${r.chain} ${r.spec}`);
      }
      for (const c of plan.presentChains) lines.push(`-F ${c}`);
      for (const c of plan.presentChains) {
        lines.push(`-X ${c}`);
        what.push(`chain ${famText(st.family)} ${tname} ${c}`);
      }
      text += `${lines.join('\n')}\nCOMMIT\n`;
    }
    if (text === '') continue;
    await runner.restore(ns, text, { family: st.family, ...m });
    removed.push(...what);
  }
  return removed;
}
