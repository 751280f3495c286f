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
   * Runs fn holding every key at once. Keys are taken in sorted order, so two
   * callers with overlapping keys can never wait for each other in a cycle.
   */
  runAll<T>(keys: Iterable<string>, fn: () => Promise<T>): Promise<T> {
    const sorted = [...new Set(keys)].sort();
    const step = (i: number): Promise<T> => (i === sorted.length ? fn() : this.run(sorted[i]!, () => step(i + 1)));
    return step(0);
  }

  get size(): number {
    return this.tails.size;
  }
}
