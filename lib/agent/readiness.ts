// The agent's readiness conditions (istio-cni.md §1.2, §3.7): /readyz is 200 only when every
// condition is set. Upstream has two flags (installReady, watchReady); podwire splits watchReady
// into the two things it waits for, so /readyz can say which one is missing, and adds one of its
// own: with the node readiness taint on, the agent is ready only once the taint is off the Node.

/** The conditions, in the order the agent sets them at start (`nodeUntainted` is set at once without the taint). */
export const READINESS_CONDITIONS = ['installed', 'informersSynced', 'snapshotReconciled', 'nodeUntainted'] as const;
export type ReadinessCondition = (typeof READINESS_CONDITIONS)[number];

export class Readiness {
  readonly #set = new Set<ReadinessCondition>();

  /** Set (true) or clear (false) one condition. */
  set(condition: ReadinessCondition, value = true): void {
    if (!(READINESS_CONDITIONS as readonly string[]).includes(condition)) {
      throw new TypeError(`unknown readiness condition ${JSON.stringify(condition)}`);
    }
    if (value) this.#set.add(condition);
    else this.#set.delete(condition);
  }

  clear(condition: ReadinessCondition): void {
    this.set(condition, false);
  }

  has(condition: ReadinessCondition): boolean {
    return this.#set.has(condition);
  }

  /** The conditions not set, in READINESS_CONDITIONS order. */
  unmet(): ReadinessCondition[] {
    return READINESS_CONDITIONS.filter((c) => !this.#set.has(c));
  }

  get ready(): boolean {
    return this.#set.size === READINESS_CONDITIONS.length;
  }
}
