// Which model each Netns's nf_tables state was last found clean against, at which ruleset
// generation (lib/net/nft/generation.ts: the kernel bumps it on every nf_tables commit in the
// netns, whoever makes it). While the generation is unchanged nothing in nf_tables can differ
// from what was compared, so the engine's reads (verify, and apply's state check) skip their
// dumps. One entry per Netns object, held weakly: it goes with the Netns.
import type { Netns } from '../net/netns/netns.js';
import { rulesetGeneration } from '../net/nft/generation.js';

export class GenerationCache {
  readonly #clean = new WeakMap<Netns, { key: object; tag: string; generation: number }>();

  /** The netns's generation now, and whether `key` (+ `tag`) was found clean at exactly that one. */
  async check(ns: Netns, key: object, tag = ''): Promise<{ generation: number; clean: boolean }> {
    const generation = await rulesetGeneration(ns);
    const e = this.#clean.get(ns);
    return { generation, clean: e !== undefined && e.key === key && e.tag === tag && e.generation === generation };
  }

  /**
   * After a full comparison that began at generation `before`: remembered when it found `key`
   * clean and nothing was committed while it ran; forgotten otherwise.
   */
  async settle(ns: Netns, key: object, tag: string, before: number, clean: boolean): Promise<void> {
    if (clean && (await rulesetGeneration(ns)) === before) this.#clean.set(ns, { key, tag, generation: before });
    else this.#clean.delete(ns);
  }
}
