// The keyed work queue (spec §5.4): client-go workqueue semantics (dedupe, one run per key at a
// time, re-run after a re-add during processing), the rate limiter Istio's ambient queue uses
// (max(exponential 5 ms → 5 s, bucket 10 qps burst 100)), retry budget, NonRetryable, bounded
// concurrency and shutdown. All time is a fake clock: no test sleeps.
import { describe, expect, it } from 'vitest';
import {
  BucketRateLimiter, ItemExponentialFailureRateLimiter, NonRetryable, WorkQueue, defaultControllerRateLimiter,
  type Clock, type DropReason, type WorkQueueOptions,
} from '../../lib/kube/work-queue.js';

/** Manual clock: timers fire only in advance(), in time order, with promise jobs flushed between. */
class FakeClock implements Clock {
  #now = 0;
  #seq = 0;
  #timers = new Map<number, { at: number; seq: number; fn: () => void }>();
  now(): number {
    return this.#now;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), seq: id, fn });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.#timers.delete(h as number);
  }
  get pending(): number {
    return this.#timers.size;
  }
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    await flush();
    for (;;) {
      let next: [number, { at: number; seq: number; fn: () => void }] | undefined;
      for (const e of this.#timers) {
        if (e[1].at <= target && (!next || e[1].at < next[1].at || (e[1].at === next[1].at && e[1].seq < next[1].seq))) next = e;
      }
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = next[1].at;
      next[1].fn();
      await flush();
    }
    this.#now = target;
    await flush();
  }
}

// Drains every pending promise job (setImmediate runs after the microtask queue is empty).
const flush = () => new Promise<void>((r) => setImmediate(r));

/** A promise you settle by hand: a run that stays in flight until the test says so. */
function gate() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function harness(opts: Partial<WorkQueueOptions<string>> & { impl?: (key: string) => Promise<void> } = {}) {
  const clock = new FakeClock();
  const runs: Array<{ key: string; at: number }> = [];
  const drops: Array<{ key: string; reason: DropReason; attempts: number; err: unknown }> = [];
  let active = 0;
  let maxActive = 0;
  const activePerKey = new Map<string, number>();
  let maxPerKey = 0;
  const { impl, ...rest } = opts;
  const q = new WorkQueue<string>({
    clock,
    onDrop: (key, err, reason, attempts) => drops.push({ key, reason, attempts, err }),
    ...rest,
    process: async (key) => {
      runs.push({ key, at: clock.now() });
      active++;
      maxActive = Math.max(maxActive, active);
      const n = (activePerKey.get(key) ?? 0) + 1;
      activePerKey.set(key, n);
      maxPerKey = Math.max(maxPerKey, n);
      try {
        await (impl ?? (async () => {}))(key);
      } finally {
        active--;
        activePerKey.set(key, activePerKey.get(key)! - 1);
      }
    },
  });
  return {
    q, clock, runs, drops,
    keys: () => runs.map((r) => r.key),
    get maxActive() { return maxActive; },
    get maxPerKey() { return maxPerKey; },
  };
}

describe('WorkQueue: keys', () => {
  it('dedupes a key that is already queued', async () => {
    const h = harness();
    h.q.add('a');
    h.q.add('b');
    h.q.add('a');
    h.q.add('a');
    expect(h.q.stats().queued).toBe(2);
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['a', 'b']);
    expect(h.q.stats()).toMatchObject({ queued: 0, inFlight: 0, processed: 2 });
  });

  it('never runs one key twice at once; a re-add during its run runs it exactly once more', async () => {
    const gates: Array<ReturnType<typeof gate>> = [];
    const h = harness({ concurrency: 4, impl: () => { const g = gate(); gates.push(g); return g.promise; } });
    h.q.add('a');
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['a']);
    // Three re-adds while 'a' is in flight: with 4 workers free, none may start a second run.
    h.q.add('a');
    h.q.add('a');
    h.q.add('a');
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['a']);
    expect(h.q.stats()).toMatchObject({ inFlight: 1, queued: 0 });
    gates[0]!.resolve();
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['a', 'a']);
    gates[1]!.resolve();
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['a', 'a']);
    expect(h.maxPerKey).toBe(1);
    expect(h.q.stats()).toMatchObject({ inFlight: 0, queued: 0, processed: 2 });
  });

  it('has(): queued, in flight and waiting keys have work pending; a finished one has none', async () => {
    const gates: Array<ReturnType<typeof gate>> = [];
    const h = harness({ impl: () => { const g = gate(); gates.push(g); return g.promise; } });
    expect(h.q.has('a')).toBe(false);
    h.q.add('a');
    expect(h.q.has('a')).toBe(true);  // queued
    await h.clock.advance(0);
    expect(h.q.stats().inFlight).toBe(1);
    expect(h.q.has('a')).toBe(true);  // in flight
    gates[0]!.resolve();
    await h.clock.advance(0);
    expect(h.q.has('a')).toBe(false);
    h.q.addAfter('b', 1_000);
    expect(h.q.has('b')).toBe(true);  // waiting
    await h.clock.advance(1_000);
    gates[1]!.resolve();
    await h.clock.advance(0);
    expect(h.q.has('b')).toBe(false);
  });

  it('runs keys in FIFO order with the default single worker', async () => {
    const h = harness();
    for (const k of ['c', 'a', 'b']) h.q.add(k);
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['c', 'a', 'b']);
    expect(h.maxActive).toBe(1);
  });

  it('honours the concurrency bound', async () => {
    const gates = new Map<string, ReturnType<typeof gate>>();
    const h = harness({ concurrency: 3, impl: (k) => { const g = gate(); gates.set(k, g); return g.promise; } });
    for (let i = 0; i < 10; i++) h.q.add(`k${i}`);
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['k0', 'k1', 'k2']);
    expect(h.q.stats()).toMatchObject({ inFlight: 3, queued: 7 });
    gates.get('k1')!.resolve();
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['k0', 'k1', 'k2', 'k3']);
    for (let i = 0; i < 10; i++) {
      gates.get(`k${i}`)?.resolve();
      await h.clock.advance(0);
    }
    expect(h.keys()).toHaveLength(10);
    expect(h.maxActive).toBe(3);
  });

  it('rejects bad options', () => {
    const process = async () => {};
    expect(() => new WorkQueue({ process, concurrency: 0 })).toThrow(RangeError);
    expect(() => new WorkQueue({ process, concurrency: 1.5 })).toThrow(RangeError);
    expect(() => new WorkQueue({ process, maxAttempts: 0 })).toThrow(RangeError);
    expect(() => new WorkQueue({} as never)).toThrow(TypeError);
  });
});

describe('rate limiters', () => {
  it('per-item backoff doubles from 5 ms and caps at 5 s; forget resets it', () => {
    const rl = new ItemExponentialFailureRateLimiter<string>(5, 5_000);
    const got = Array.from({ length: 14 }, () => rl.when('a'));
    expect(got).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5000, 5000, 5000, 5000]);
    expect(rl.numRequeues('a')).toBe(14);
    expect(rl.when('b')).toBe(5); // per item
    rl.forget('a');
    expect(rl.numRequeues('a')).toBe(0);
    expect(rl.when('a')).toBe(5);
    // Huge failure counts stay at the cap (2^n overflows to Infinity).
    for (let i = 0; i < 1100; i++) rl.when('c');
    expect(rl.when('c')).toBe(5000);
  });

  it('token bucket: 100 at once, then one per 100 ms; refills at 10 qps up to the burst', async () => {
    const clock = new FakeClock();
    const b = new BucketRateLimiter<string>(10, 100, clock);
    const first = Array.from({ length: 100 }, (_, i) => b.when(`k${i}`));
    expect(first.every((d) => d === 0)).toBe(true);
    expect(b.when('x')).toBeCloseTo(100, 6);
    expect(b.when('y')).toBeCloseTo(200, 6);
    await clock.advance(200); // pays back the two borrowed tokens
    expect(b.when('z')).toBeCloseTo(100, 6);
    await clock.advance(60_000); // refills to the burst, not beyond
    const again = Array.from({ length: 101 }, (_, i) => b.when(`r${i}`));
    expect(again.filter((d) => d === 0)).toHaveLength(100);
    expect(again[100]).toBeCloseTo(100, 6);
  });

  it('default limiter is the max of both', async () => {
    const clock = new FakeClock();
    const rl = defaultControllerRateLimiter<string>({ clock });
    expect(rl.when('a')).toBe(5);
    expect(rl.when('a')).toBe(10);
    for (let i = 0; i < 98; i++) rl.when(`k${i}`); // bucket now empty (100 reservations)
    expect(rl.when('a')).toBeCloseTo(100, 6); // bucket (100 ms) beats per-item (20 ms)
    expect(rl.numRequeues('a')).toBe(3);
    rl.forget('a');
    expect(rl.numRequeues('a')).toBe(0);
  });
});

describe('WorkQueue: retries', () => {
  it('a failing key is retried after 5, 10, 20, 40 … ms, capped at 5 s', async () => {
    const h = harness({ impl: async () => { throw new Error('boom'); } });
    h.q.add('a');
    await h.clock.advance(0);
    await h.clock.advance(30_000);
    const at = h.runs.map((r) => r.at);
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    expect(gaps.slice(0, 13)).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5000, 5000, 5000]);
    expect(h.q.stats().retries).toBe(h.runs.length); // the last failure is waiting too
    expect(h.q.stats().waiting).toBe(1);
    expect(h.drops).toEqual([]); // unlimited attempts by default (spec §5.4)
  });

  it('success forgets the failures: the next failure backs off from 5 ms again', async () => {
    let fail = 3;
    const h = harness({ impl: async () => { if (fail-- > 0) throw new Error('boom'); } });
    h.q.add('a');
    await h.clock.advance(100);
    expect(h.runs.map((r) => r.at)).toEqual([0, 5, 15, 35]);
    expect(h.q.numRequeues('a')).toBe(0);
    fail = 1;
    h.q.add('a');
    await h.clock.advance(100);
    expect(h.runs.map((r) => r.at)).toEqual([0, 5, 15, 35, 100, 105]);
  });

  it('forget(key) resets the backoff of a failing key', async () => {
    const h = harness({ impl: async () => { throw new Error('boom'); } });
    h.q.add('a');
    await h.clock.advance(35); // runs at 0, 5, 15, 35; next would be +40
    expect(h.q.numRequeues('a')).toBe(4);
    h.q.forget('a');
    expect(h.q.numRequeues('a')).toBe(0);
    h.q.addRateLimited('b'); // unrelated key is unaffected by forget('a')
    h.q.addRateLimited('a'); // 5 ms: earlier than the pending +40, so it moves the entry
    await h.clock.advance(5);
    expect(h.runs.filter((r) => r.key === 'a').map((r) => r.at)).toEqual([0, 5, 15, 35, 40]);
    expect(h.runs.filter((r) => r.key === 'b').map((r) => r.at)).toEqual([40]);
  });

  it('addRateLimited goes through the token bucket: a burst of 102 keys runs 100 now, then 1 per 100 ms', async () => {
    const h = harness({ concurrency: 200 });
    for (let i = 0; i < 102; i++) h.q.addRateLimited(`k${i}`);
    await h.clock.advance(5);
    expect(h.runs).toHaveLength(100); // each waited its per-item 5 ms
    expect(h.runs.every((r) => r.at === 5)).toBe(true);
    await h.clock.advance(94);
    expect(h.runs).toHaveLength(100);
    await h.clock.advance(1);
    expect(h.runs.map((r) => r.at).slice(100)).toEqual([100]);
    await h.clock.advance(100);
    expect(h.runs.map((r) => r.at).slice(100)).toEqual([100, 200]);
  });

  it('drops a key after maxAttempts runs and reports it', async () => {
    const err = new Error('still broken');
    const h = harness({ maxAttempts: 5, impl: async () => { throw err; } });
    h.q.add('a');
    await h.clock.advance(60_000);
    expect(h.runs.map((r) => r.at)).toEqual([0, 5, 15, 35, 75]);
    expect(h.drops).toEqual([{ key: 'a', reason: 'max-attempts', attempts: 5, err }]);
    expect(h.q.stats()).toMatchObject({ retries: 4, dropped: 1, waiting: 0, queued: 0 });
    expect(h.q.numRequeues('a')).toBe(0); // forgotten: a later add starts a fresh budget
    h.q.add('a');
    await h.clock.advance(60_000);
    expect(h.runs).toHaveLength(10);
    expect(h.drops).toHaveLength(2);
  });

  it('maxAttempts 1 never retries', async () => {
    const h = harness({ maxAttempts: 1, impl: async () => { throw new Error('x'); } });
    h.q.add('a');
    await h.clock.advance(1_000);
    expect(h.runs).toHaveLength(1);
    expect(h.drops.map((d) => d.reason)).toEqual(['max-attempts']);
  });

  it('a NonRetryable error is not retried, and is reported', async () => {
    const err = new NonRetryable('no netns');
    const retried: string[] = [];
    const h = harness({ impl: async () => { throw err; }, onRetry: (k) => retried.push(k) });
    h.q.add('a');
    await h.clock.advance(60_000);
    expect(h.runs).toHaveLength(1);
    expect(retried).toEqual([]);
    expect(h.drops).toEqual([{ key: 'a', reason: 'non-retryable', attempts: 1, err }]);
    expect(h.q.stats()).toMatchObject({ retries: 0, dropped: 1, waiting: 0 });
    expect(h.clock.pending).toBe(0);
  });

  it('a NonRetryable after retried failures reports every run as an attempt', async () => {
    const err = new NonRetryable('gave up');
    let n = 0;
    const h = harness({ impl: async () => { if (++n < 3) throw new Error('transient'); throw err; } });
    h.q.add('a');
    await h.clock.advance(60_000);
    expect(h.runs).toHaveLength(3);
    expect(h.drops).toEqual([{ key: 'a', reason: 'non-retryable', attempts: 3, err }]);
    expect(h.q.numRequeues('a')).toBe(0);
  });

  it('a synchronous throw from process is handled like a rejection', async () => {
    const clock = new FakeClock();
    const at: number[] = [];
    const q = new WorkQueue<string>({ clock, maxAttempts: 2, process: (() => { at.push(clock.now()); throw new Error('sync'); }) as never });
    q.add('a');
    await clock.advance(100);
    expect(at).toEqual([0, 5]);
    expect(q.stats().dropped).toBe(1);
  });

  it('a throwing onRetry/onDrop does not break the queue', async () => {
    const h = harness({
      maxAttempts: 2,
      impl: async () => { throw new Error('x'); },
      onRetry: () => { throw new Error('cb'); },
      onDrop: () => { throw new Error('cb'); },
    });
    h.q.add('a');
    await h.clock.advance(100);
    expect(h.runs).toHaveLength(2);
    expect(h.q.stats()).toMatchObject({ inFlight: 0, dropped: 1, retries: 1 });
  });
});

describe('WorkQueue: shutdown', () => {
  it('stops taking work and waits for in-flight runs', async () => {
    const gates = new Map<string, ReturnType<typeof gate>>();
    const h = harness({ concurrency: 2, impl: (k) => { const g = gate(); gates.set(k, g); return g.promise; } });
    for (const k of ['a', 'b', 'c']) h.q.add(k);
    h.q.addAfter('d', 50);
    await h.clock.advance(0);
    let result: unknown;
    const done = h.q.shutdown({ timeoutMs: 1_000 }).then((r) => { result = r; });
    h.q.add('e');
    await h.clock.advance(0);
    expect(result).toBeUndefined(); // still waiting for a and b
    gates.get('a')!.resolve();
    await h.clock.advance(0);
    expect(result).toBeUndefined();
    gates.get('b')!.reject(new Error('late failure')); // not requeued after shutdown
    await h.clock.advance(0);
    await done;
    expect(result).toEqual({ drained: true, inFlight: 0, discarded: 2 }); // c queued, d waiting
    await h.clock.advance(10_000);
    expect(h.keys()).toEqual(['a', 'b']);
    expect(h.q.stats()).toMatchObject({ queued: 0, waiting: 0, inFlight: 0, retries: 0 });
  });

  it('gives up waiting after its bound', async () => {
    const g = gate();
    const h = harness({ impl: () => g.promise });
    h.q.add('a');
    await h.clock.advance(0);
    let result: unknown;
    void h.q.shutdown({ timeoutMs: 500 }).then((r) => { result = r; });
    await h.clock.advance(499);
    expect(result).toBeUndefined();
    await h.clock.advance(1);
    expect(result).toEqual({ drained: false, inFlight: 1, discarded: 0 });
    g.resolve();
    await h.clock.advance(0);
    expect(h.q.stats().inFlight).toBe(0);
  });

  it('returns at once when idle, and a re-add during the last run is not run after shutdown', async () => {
    const g = gate();
    const h = harness({ impl: () => g.promise });
    h.q.add('a');
    await h.clock.advance(0);
    h.q.add('a'); // dirty: would run again after this run
    const p = h.q.shutdown();
    g.resolve();
    expect(await p).toEqual({ drained: true, inFlight: 0, discarded: 0 });
    await h.clock.advance(1_000);
    expect(h.keys()).toEqual(['a']);
    expect(await h.q.shutdown()).toEqual({ drained: true, inFlight: 0, discarded: 0 });
  });
});

describe('WorkQueue: delayed adds', () => {
  it('addAfter keeps the earliest time for a key and schedules it once', async () => {
    const h = harness();
    h.q.addAfter('a', 100);
    h.q.addAfter('a', 30);
    h.q.addAfter('a', 200);
    expect(h.q.stats().waiting).toBe(1);
    await h.clock.advance(1_000);
    expect(h.runs).toEqual([{ key: 'a', at: 30 }]);
  });

  it('a delayed add of a key already queued is deduped', async () => {
    const g = gate();
    const h = harness({ impl: (k) => (k === 'block' ? g.promise : Promise.resolve()) });
    h.q.add('block');
    h.q.add('a');
    h.q.addAfter('a', 10);
    await h.clock.advance(10); // 'a' is still queued behind 'block' when its timer fires
    expect(h.q.stats()).toMatchObject({ queued: 1, waiting: 0 });
    g.resolve();
    await h.clock.advance(0);
    expect(h.keys()).toEqual(['block', 'a']);
  });
});

describe('WorkQueue: resource exhaustion is retried, never dropped', () => {
  // What a proc scan or a netns open throws when the agent is out of fds (Node's errno is negative).
  const emfile = () => Object.assign(new Error('EMFILE: too many open files, open /host/proc/1/cgroup'), { code: 'EMFILE', errno: -24, syscall: 'open' });

  it('a NonRetryable whose cause is EMFILE is retried, and the key then succeeds', async () => {
    let n = 0;
    const h = harness({ impl: async () => { if (++n === 1) throw new NonRetryable('pod x: netns failed', { cause: emfile() }); } });
    h.q.add('a');
    await h.clock.advance(1_000);
    expect(h.runs.map((r) => r.at)).toEqual([0, 5]);
    expect(h.drops).toEqual([]);
    expect(h.q.stats()).toMatchObject({ retries: 1, dropped: 0, waiting: 0, queued: 0 });
  });

  it('exhaustion does not spend maxAttempts: 10 EMFILE runs under maxAttempts 2, then success', async () => {
    let n = 0;
    const h = harness({ maxAttempts: 2, impl: async () => { if (++n <= 10) throw emfile(); } });
    h.q.add('a');
    await h.clock.advance(120_000);
    expect(h.runs).toHaveLength(11);
    expect(h.drops).toEqual([]);
    // Backoff still applies (5 ms doubling, capped at 5 s), so a flood is not a busy loop.
    const gaps = h.runs.slice(1).map((r, i) => r.at - h.runs[i]!.at);
    expect(gaps).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560]);
  });

  it('after exhaustion, ordinary failures still get their full budget, and then the key is dropped', async () => {
    let n = 0;
    const err = new Error('really broken');
    const h = harness({ maxAttempts: 3, impl: async () => { throw ++n <= 4 ? emfile() : err; } });
    h.q.add('a');
    await h.clock.advance(120_000);
    expect(h.runs).toHaveLength(4 + 3);
    expect(h.drops).toMatchObject([{ key: 'a', reason: 'max-attempts', err }]);
  });

  it('ENFILE, ENOMEM and a NetError-like positive errno count; EACCES does not', async () => {
    const cases: unknown[] = [
      Object.assign(new Error('x'), { code: 'ENFILE' }),
      new NonRetryable('wrapped', { cause: new Error('mid', { cause: Object.assign(new Error('y'), { code: 'ENOMEM', errno: 12 }) }) }),
      new NonRetryable('netlink', { cause: Object.assign(new Error('z'), { code: 'DUMP_INTERRUPTED', errno: 24 }) }),
    ];
    for (const c of cases) {
      let n = 0;
      const h = harness({ maxAttempts: 1, impl: async () => { if (++n === 1) throw c; } });
      h.q.add('a');
      await h.clock.advance(1_000);
      expect(h.runs, String(c)).toHaveLength(2);
      expect(h.drops).toEqual([]);
    }
    const h = harness({ impl: async () => { throw new NonRetryable('denied', { cause: Object.assign(new Error('w'), { code: 'EACCES', errno: -13 }) }); } });
    h.q.add('a');
    await h.clock.advance(1_000);
    expect(h.runs).toHaveLength(1);
    expect(h.drops.map((d) => d.reason)).toEqual(['non-retryable']);
  });
});
