// Serialises work per key (a pod UID, a netns identity, a probe IP) while different keys run concurrently.
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const result = prev.then(fn, fn);
    const tail = result.then(() => undefined, () => undefined);
    this.tails.set(key, tail);
    // Drop the entry once nothing is queued behind this call.
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return result;
  }

  /**
   * Runs fn holding every key at once. The call queues behind every key in
   * one synchronous step, so any two callers are in the same order on every
   * key they share and can never wait for each other in a cycle; the cost is
   * O(keys), whatever their number (a restart's probe-set refill holds
   * thousands).
   */
  runAll<T>(keys: Iterable<string>, fn: () => Promise<T>): Promise<T> {
    const unique = [...new Set(keys)];
    const prev: Array<Promise<unknown>> = [];
    for (const k of unique) {
      const t = this.tails.get(k);
      if (t) prev.push(t);
    }
    const result = prev.length === 0 ? Promise.resolve().then(fn) : Promise.all(prev).then(fn);
    const tail = result.then(() => undefined, () => undefined);
    for (const k of unique) this.tails.set(k, tail);
    void tail.then(() => {
      for (const k of unique) if (this.tails.get(k) === tail) this.tails.delete(k);
    });
    return result;
  }

  get size(): number {
    return this.tails.size;
  }
}
