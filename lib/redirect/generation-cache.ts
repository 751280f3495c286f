// Which model each Netns's nf_tables state was last found clean against, at which ruleset
// generation (lib/net/nft/generation.ts: the kernel bumps it on every nf_tables commit in the
// netns, whoever makes it). While the generation is unchanged nothing in nf_tables can differ
// from what was compared, so the engine's reads (verify, and apply's state check) skip their
// dumps. One entry per Netns object, held weakly: it goes with the Netns.
import type { Netns } from '../net/netns/netns.js';
import { rulesetGeneration } from '../net/nft/generation.js';

export class GenerationCache {
  readonly #clean = new WeakMap<Netns, { key: object; tag: string; generation: number }>();

  /**
   * Whether `key` (+ `tag`) was found clean in this Netns at the generation it has now. Without
   * such a record nothing is asked of the kernel (a new pod's apply pays no extra request).
   */
  async clean(ns: Netns, key: object, tag = ''): Promise<boolean> {
    const e = this.#clean.get(ns);
    if (e === undefined || e.key !== key || e.tag !== tag) return false;
    return (await rulesetGeneration(ns)) === e.generation;
  }

  /**
   * Runs a full comparison (`compare` resolves true when clean) between two generation reads:
   * remembered when clean and nothing was committed while it ran, forgotten otherwise.
   */
  async compare(ns: Netns, key: object, tag: string, compare: () => Promise<boolean>): Promise<boolean> {
    const before = await rulesetGeneration(ns);
    const ok = await compare();
    if (ok && (await rulesetGeneration(ns)) === before) this.#clean.set(ns, { key, tag, generation: before });
    else this.#clean.delete(ns);
    return ok;
  }
}
