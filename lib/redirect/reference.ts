// What the kernel prints back for a model: the model is loaded once into a
// scratch netns and read back with the same tools verify uses on a pod
// (`iptables-save`, `nft -j list ruleset`). Comparing against that instead
// of our own canonical form makes verify exact for every iptables variant
// and nft version. Results are cached per rendered text; the scratch netns
// is unmounted at once and lives only as long as its open fd.
import { iptables, parseSave, type IptablesMode, type SavedTable } from '../net/xtables/iptables.js';
import { captureNft, type NftClone } from '../net/nft/clone.js';
import { Netns } from '../net/netns/netns.js';
import { nft, type NftRuleset } from '../net/nft/tool.js';
import { execNft } from './engine-types.js';
import type { Family, RuleModel } from './model.js';
import { rulesOf } from './model.js';
import { nftTableCount } from './pristine.js';
import { toIptablesRestore } from './render-iptables.js';

/** Runs `fn` in a new netns nobody else can see (it has no name; gone when closed). */
export async function withScratchNetns<T>(fn: (ns: Netns) => Promise<T>): Promise<T> {
  const ns = await Netns.createAnonymous();
  try {
    return await fn(ns);
  } finally {
    ns.close();
  }
}

/** The ipsets `-m set` matches of a model need (they must exist before a restore can name them). */
export function ipsetsOf(model: RuleModel, family: Family): string[] {
  const names = new Set<string>();
  for (const r of rulesOf(model, family)) for (const m of r.matches) if (m.kind === 'set') names.add(m.name);
  return [...names];
}

// The engine treats models as immutable (one per configuration, shared by its pods, as
// engine-nft does): what it derives from one is derived once, not per pod.
const perModel = new WeakMap<RuleModel, Map<string, unknown>>();

function once<T>(model: RuleModel, key: string, make: () => T): T {
  let m = perModel.get(model);
  if (!m) perModel.set(model, (m = new Map()));
  if (!m.has(key)) m.set(key, make());
  return m.get(key) as T;
}

/** toIptablesRestore of a model the engine uses, rendered once per family. */
export const restoreTextOf = (model: RuleModel, family: Family): string =>
  once(model, `restore ${family}`, () => toIptablesRestore(model, family));

/** iptablesReference for a model's family, looked up once per model, family and mode. */
export const modelReference = (model: RuleModel, family: Family, mode: IptablesMode | undefined): Promise<SavedTable[]> =>
  once(model, `reference ${family} ${mode ?? ''}`, () => {
    const ref = iptablesReference(restoreTextOf(model, family), family, mode, ipsetsOf(model, family));
    ref.catch(() => perModel.get(model)?.delete(`reference ${family} ${mode ?? ''}`));  // a failure is not kept
    return ref;
  });

const iptCache = new Map<string, Promise<SavedTable[]>>();
const nftCache = new Map<string, Promise<NftReference>>();

/** iptables-save (parsed) of a netns holding only `text` for `family`. */
export function iptablesReference(text: string, family: Family, mode: IptablesMode | undefined, ipsets: string[]): Promise<SavedTable[]> {
  const key = `${mode ?? 'default'}\0${family}\0${ipsets.join(',')}\0${text}`;
  let hit = iptCache.get(key);
  if (!hit) {
    hit = withScratchNetns(async (ns) => {
      if (ipsets.length > 0) {
        const nl = await ns.netlink();
        for (const name of ipsets) await nl.ipset.create(name, { type: 'hash:ip', family, comment: true });
      }
      const m = mode ? { mode } : {};
      await iptables.restore(ns, text, { family, noflush: true, ...m });
      return parseSave(await iptables.saveText(ns, { family, ...m }));
    });
    iptCache.set(key, hit);
    hit.catch(() => iptCache.delete(key));
  }
  return hit;
}

export interface NftReference {
  ruleset: NftRuleset;
  /** `nft -a list ruleset` of the scratch netns. */
  text: string;
}

/** The ruleset of a netns holding only `script`. */
export function nftReference(script: string): Promise<NftReference> {
  let hit = nftCache.get(script);
  if (!hit) {
    hit = withScratchNetns(async (ns) => {
      await nft.apply(ns, script);
      const [ruleset, text] = await Promise.all([nft.list(ns), execNft.listText(ns)]);
      return { ruleset, text };
    });
    nftCache.set(script, hit);
    hit.catch(() => nftCache.delete(script));
  }
  return hit;
}

const cloneCache = new Map<string, Promise<NftClone | undefined>>();

/**
 * The model's iptables rules for all its families as one replayable
 * nf_tables batch: restored with the real `iptables-restore` in a scratch
 * netns, then captured over netlink. Undefined when that iptables writes
 * legacy xtables (nothing to capture) or the model needs ipsets (xt `set`
 * matches carry the set's per-netns index, so they cannot be copied).
 */
export function iptablesClone(model: RuleModel, mode: IptablesMode | undefined): Promise<NftClone | undefined> {
  const key = `clone ${mode ?? ''}`;
  return once(model, key, () => {
    const clone = cloneOf(model, mode);
    clone.catch(() => perModel.get(model)?.delete(key));
    return clone;
  });
}

function cloneOf(model: RuleModel, mode: IptablesMode | undefined): Promise<NftClone | undefined> {
  if (mode === 'legacy' || model.families.some((f) => ipsetsOf(model, f).length > 0)) return Promise.resolve(undefined);
  const texts = model.families.map((f) => restoreTextOf(model, f));
  const key = `${mode ?? 'default'}\0${model.families.join(',')}\0${texts.join('\0')}`;
  let hit = cloneCache.get(key);
  if (!hit) {
    hit = withScratchNetns(async (ns) => {
      const m = mode ? { mode } : {};
      for (const [i, family] of model.families.entries()) {
        await iptables.restore(ns, texts[i]!, { family, noflush: true, ...m });
      }
      return (await nftTableCount(ns)) === 0 ? undefined : captureNft(ns);
    });
    cloneCache.set(key, hit);
    hit.catch(() => cloneCache.delete(key));
  }
  return hit;
}
