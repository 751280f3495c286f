// The redirection engine: apply, verify and remove a rule model in a netns.
// Routing first (routes, policy rules, addresses over rtnetlink; a failure
// stops before any rule is written), then the rules in one atomic step per
// backend: one nft transaction, or one iptables-restore per family. Every
// step reads the netns first and writes only what differs, so applying the
// same model twice executes nothing the second time. Work on one netns is
// serialised within this process.
import type { Netns } from '../net/netns/netns.js';
import { applyIptables, readIptables, removeIptables } from './engine-iptables.js';
import { applyNft, engineScript, readNft, removeNft } from './engine-nft.js';
import { applyRouting, diffRouting, removeRouting, routingDrift } from './engine-routes.js';
import { compileCached } from '../net/nft/batch.js';
import { KeyedLock } from '../util/keyed-lock.js';
import { GenerationCache } from './generation-cache.js';
import { iptablesClone, modelReference, nftReference } from './reference.js';
import { nativeNft, type ApplyResult, type Backend, type DriftReport, type EngineOptions, type RemoveResult } from './engine-types.js';
import type { RuleModel } from './model.js';

export type { ApplyResult, Backend, DriftReport, EngineOptions, IptablesRunner, NftSender, RemoveResult } from './engine-types.js';
export { execIptables, execNft, nativeNft } from './engine-types.js';

const BACKENDS: readonly Backend[] = ['nftables', 'iptables'];

function check(ns: unknown, model: unknown): asserts model is RuleModel {
  if (typeof ns !== 'object' || ns === null || typeof (ns as Netns).spawn !== 'function') throw new TypeError('ns must be a Netns');
  const m = model as RuleModel | null;
  if (typeof m !== 'object' || m === null || !Array.isArray(m.rules) || !Array.isArray(m.tables) || !Array.isArray(m.families))
    throw new TypeError('model must be a rule model (inpodRules(), hostProbeRules(), sidecarRules())');
}

function checkOpts(opts: Partial<EngineOptions> | undefined, required: boolean): void {
  if (opts === undefined && !required) return;
  if (typeof opts !== 'object' || opts === null) throw new TypeError('options must be an object with a backend');
  if (opts.backend === undefined && !required) return;
  if (!BACKENDS.includes(opts.backend as Backend)) throw new TypeError(`backend must be one of ${BACKENDS.join(', ')}, got ${JSON.stringify(opts.backend)}`);
  if (opts.iptablesMode !== undefined && opts.iptablesMode !== 'legacy' && opts.iptablesMode !== 'nft')
    throw new TypeError(`iptablesMode must be 'legacy' or 'nft', got ${JSON.stringify(opts.iptablesMode)}`);
}

// Engine operations on one netns (by identity) run one after another.
const locks = new KeyedLock();
const serialised = <T>(ns: Netns, fn: () => Promise<T>): Promise<T> => locks.run(ns.key, fn);

const ipt = (o: Partial<EngineOptions>) => ({ ...(o.iptablesMode ? { mode: o.iptablesMode } : {}), ...(o.iptables ? { runner: o.iptables } : {}) });

/**
 * Programs the model into the netns. Identical state → nothing is executed
 * (`changed: false`). Drift or an older rule set is reconciled without a
 * moment where traffic escapes capture unreported.
 */
export function apply(ns: Netns, model: RuleModel, opts: EngineOptions): Promise<ApplyResult> {
  check(ns, model);
  checkOpts(opts, true);
  return serialised(ns, async () => {
    // Both reads at once; then routing is written before any rule.
    const sender = opts.nft ?? nativeNft;
    const [routing, rules] = await Promise.all([
      diffRouting(ns, model),
      opts.backend === 'iptables' ? readIptables(ns, model, ipt(opts), true) : readNft(ns, model, sender, true),
    ]);
    const actions = await applyRouting(ns, routing);
    if (opts.backend === 'iptables') {
      actions.push(...await applyIptables(ns, model, rules as Awaited<ReturnType<typeof readIptables>>, ipt(opts)));
    } else {
      actions.push(...await applyNft(ns, model, rules as Awaited<ReturnType<typeof readNft>>, sender));
    }
    return { changed: actions.length > 0, actions };
  });
}

/** Which backend holds the model's rules here: nftables when one of its tables exists, else iptables. */
async function detect(ns: Netns, model: RuleModel, opts: Partial<EngineOptions>): Promise<Backend> {
  const rs = await (opts.nft ?? nativeNft).list(ns);
  return model.tables.some((t) => rs.tables.some((x) => x.family === 'inet' && x.name === t.nft)) ? 'nftables' : 'iptables';
}

/**
 * Compares the netns with the model: every missing or foreign rule, chain,
 * table, route, policy rule and address, one line each. Without a backend,
 * the one holding the model's tables is checked.
 */
export function verify(ns: Netns, model: RuleModel, opts: Partial<EngineOptions> = {}): Promise<DriftReport> {
  check(ns, model);
  checkOpts(opts, false);
  return serialised(ns, async () => {
    const backend = opts.backend ?? await detect(ns, model, opts);
    const drift = routingDrift(await diffRouting(ns, model));
    if (backend === 'iptables') {
      for (const st of await readIptables(ns, model, ipt(opts), true)) drift.push(...st.drift);
    } else {
      drift.push(...await nftDrift(ns, model, opts.nft ?? nativeNft));
    }
    return { ok: drift.length === 0, drift };
  });
}

/** nf_tables state found clean per Netns (the dataplane keeps one Netns per pod). */
const nftClean = new GenerationCache();

/**
 * The nftables part of verify. While the netns's ruleset generation still equals the one of the
 * last clean verify of this model, nothing can have changed and the dumps are skipped (one small
 * request instead of about ten dumps and their decoding: what makes the drift check cheaper than
 * apply).
 */
async function nftDrift(ns: Netns, model: RuleModel, sender: NonNullable<EngineOptions['nft']>): Promise<string[]> {
  if (sender !== nativeNft) return (await readNft(ns, model, sender, true)).drift;
  if (await nftClean.clean(ns, model)) return [];
  let drift: string[] = [];
  await nftClean.compare(ns, model, '', async () => (drift = (await readNft(ns, model, sender, true)).drift).length === 0);
  return drift;
}

/**
 * Deletes what podwire owns for this model (our tables, chains, jumps,
 * routes, policy rules, addresses), whatever part of it is there, and says
 * what it removed. Rules go first, then routing (as Istio).
 *
 * Matching is by value: in places podwire shares with others — rules in the
 * built-in iptables chains (our jumps, the DROP guardrails), routes, policy
 * rules and addresses — only entries equal to the model's are deleted, and
 * foreign ones there are left alone (nothing is deleted by position or by
 * handle). What podwire owns by name goes whole, whatever it holds: its
 * iptables chains (`ISTIO_*`, flushed then deleted), its nft tables (in-pod
 * and sidecar), and its chains in the host table (whose sets stay).
 */
export function remove(ns: Netns, model: RuleModel, opts: EngineOptions): Promise<RemoveResult> {
  check(ns, model);
  checkOpts(opts, true);
  return serialised(ns, async () => {
    const removed: string[] = [];
    const errors: unknown[] = [];
    try {
      if (opts.backend === 'iptables') {
        removed.push(...await removeIptables(ns, await readIptables(ns, model, ipt(opts)), ipt(opts)));
      } else {
        const sender = opts.nft ?? nativeNft;
        removed.push(...await removeNft(ns, model, await readNft(ns, model, sender), sender));
      }
    } catch (err) {
      errors.push(err);   // still remove the routing, then report
    }
    try {
      removed.push(...await removeRouting(ns, await diffRouting(ns, model)));
    } catch (err) {
      errors.push(err);
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, 'remove failed');
    return { removed };
  });
}


/**
 * Builds once what the engine compares pods against (the model loaded into
 * a scratch netns and read back; the compiled nft batch; the iptables-nft
 * capture), so that the first pod does not pay for it. Optional: everything
 * is built on first use otherwise.
 */
export async function prepare(model: RuleModel, opts: EngineOptions): Promise<void> {
  checkOpts(opts, true);
  if (opts.backend === 'iptables') {
    const mode = opts.iptablesMode;
    await Promise.all([
      iptablesClone(model, mode),
      ...model.families.map((f) => modelReference(model, f, mode)),
    ]);
  } else {
    const script = engineScript(model);
    compileCached(script);
    await nftReference(script);
  }
}
