// A keyed work queue with client-go workqueue semantics, as Istio's pkg/kube/controllers queue
// uses it for the ambient node agent (spec §5.4, `informers.go`):
//
// - `add(key)`: a key already waiting (queued, not yet started) is not queued twice; a key being
//   processed that is added again is marked dirty and queued once more when its run ends, so one
//   key never runs twice at once (client-go's queue/dirty/processing sets).
// - `addAfter(key, ms)`: client-go's delaying queue; a key already waiting for a later time is
//   moved to the earlier time, never scheduled twice. A direct `add` does not cancel a delayed
//   entry (as in client-go): the delayed entry still fires, and dedupes if the key is queued then.
// - `addRateLimited(key)`: `addAfter(key, limiter.when(key))`. The limiter is what the spec says
//   Istio's ambient queue uses: max(per-item exponential 5 ms → 5 s, token bucket 10 qps burst
//   100). Note this differs from client-go's DefaultControllerRateLimiter, whose per-item cap is
//   1000 s; both are options of `DefaultControllerRateLimiter` below.
// - the worker: success → `forget(key)`; an error → requeue with backoff unless the retry budget
//   is spent (Istio's `WithMaxAttempts`: a key is dropped when `numRequeues + 1 >= maxAttempts`,
//   i.e. maxAttempts counts runs). The ambient queue has unlimited attempts (the default here,
//   `Infinity`); the repair controller uses 5 (spec §4). A `NonRetryable` error is never
//   retried (upstream handles `ErrNonRetryableAdd` inside the reconciler by returning nil).
// - resource exhaustion (EMFILE, ENFILE, ENOMEM, ENOBUFS, EAGAIN on the error or its causes:
//   lib/util/resource-errors.ts) is a state of the node, not of the key: such a run is always
//   retried with the backoff, even wrapped in NonRetryable, and does not count against
//   maxAttempts (a flood that exhausts fds must not make the queue give up on its keys).
// - one worker by default (spec: "single worker"); `concurrency` raises the bound.
//
// Time comes from an injectable `Clock` (real timers by default). No global state.
import { isResourceExhaustion } from '../util/resource-errors.js';
import { optionalTimeout } from '../util/timeout.js';

/** Time source and timers; the default uses Date.now and the real setTimeout. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** Throw (or reject with) this from a process function to drop the key without retry. */
export class NonRetryable extends Error {
  override readonly name = 'NonRetryable';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export function isNonRetryable(err: unknown): err is NonRetryable {
  return err instanceof NonRetryable;
}

/** client-go's TypedRateLimiter. */
export interface RateLimiter<K> {
  /** Delay before the key may be processed again; counts one failure of the key. */
  when(key: K): number;
  forget(key: K): void;
  numRequeues(key: K): number;
}

/** client-go ItemExponentialFailureRateLimiter: base * 2^failures, capped at max. */
export class ItemExponentialFailureRateLimiter<K> implements RateLimiter<K> {
  readonly #failures = new Map<K, number>();
  constructor(readonly baseMs: number, readonly maxMs: number) {
    checkPositive(baseMs, 'baseMs');
    checkPositive(maxMs, 'maxMs');
  }
  when(key: K): number {
    const exp = this.#failures.get(key) ?? 0;
    this.#failures.set(key, exp + 1);
    // client-go: backoff = base * 2^exp, overflow or > max → max.
    const backoff = this.baseMs * 2 ** exp;
    return Number.isFinite(backoff) && backoff <= this.maxMs ? backoff : this.maxMs;
  }
  forget(key: K): void {
    this.#failures.delete(key);
  }
  numRequeues(key: K): number {
    return this.#failures.get(key) ?? 0;
  }
}

/**
 * client-go BucketRateLimiter over golang.org/x/time/rate: one bucket shared by all keys,
 * starting full. Every `when` reserves a token (tokens may go negative); the delay is the time
 * until the reservation's token exists.
 */
export class BucketRateLimiter<K> implements RateLimiter<K> {
  #tokens: number;
  #last: number;
  constructor(readonly qps: number, readonly burst: number, private readonly clock: Clock = realClock) {
    checkPositive(qps, 'qps');
    checkPositive(burst, 'burst');
    this.#tokens = burst;
    this.#last = clock.now();
  }
  when(_key: K): number {
    const now = this.clock.now();
    if (now > this.#last) {
      this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#last) * this.qps) / 1000);
      this.#last = now;
    }
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens * 1000) / this.qps;
  }
  forget(_key: K): void {}
  numRequeues(_key: K): number {
    return 0;
  }
}

/** client-go MaxOfRateLimiter: asks every limiter (so each records the failure), takes the max. */
export class MaxOfRateLimiter<K> implements RateLimiter<K> {
  readonly #limiters: RateLimiter<K>[];
  constructor(...limiters: RateLimiter<K>[]) {
    if (limiters.length === 0) throw new RangeError('MaxOfRateLimiter needs at least one limiter');
    this.#limiters = limiters;
  }
  when(key: K): number {
    let max = 0;
    for (const l of this.#limiters) max = Math.max(max, l.when(key));
    return max;
  }
  forget(key: K): void {
    for (const l of this.#limiters) l.forget(key);
  }
  numRequeues(key: K): number {
    let max = 0;
    for (const l of this.#limiters) max = Math.max(max, l.numRequeues(key));
    return max;
  }
}

export interface ControllerRateLimiterOptions {
  /** Per-item base delay; 5 ms. */
  baseMs?: number;
  /** Per-item cap; 5 s per spec §5.4 (client-go's own default is 1000 s). */
  maxMs?: number;
  /** Overall token bucket; 10 qps, burst 100. */
  qps?: number;
  burst?: number;
  clock?: Clock;
}

/** The ambient queue's limiter (spec §5.4): max(exponential 5 ms → 5 s, bucket 10 qps / 100). */
export function defaultControllerRateLimiter<K>(opts: ControllerRateLimiterOptions = {}): RateLimiter<K> {
  return new MaxOfRateLimiter<K>(
    new ItemExponentialFailureRateLimiter<K>(opts.baseMs ?? 5, opts.maxMs ?? 5_000),
    new BucketRateLimiter<K>(opts.qps ?? 10, opts.burst ?? 100, opts.clock ?? realClock),
  );
}

export type DropReason = 'max-attempts' | 'non-retryable';

export interface WorkQueueOptions<K> {
  /** Queue name (Istio: `ambient`), for logs/metrics of the caller. */
  name?: string;
  /** Called for each key taken from the queue; a rejection requeues it rate-limited. */
  process: (key: K) => Promise<void>;
  /** Workers running at once (different keys); 1 (the spec's single worker). */
  concurrency?: number;
  /** Runs per key before it is dropped (Istio WithMaxAttempts); Infinity (unlimited). */
  maxAttempts?: number;
  /** Rate limiter for `addRateLimited`; default `defaultControllerRateLimiter({ clock })`. */
  rateLimiter?: RateLimiter<K>;
  clock?: Clock;
  /** A failed run that will be retried after `delayMs`. `attempt` counts runs so far. */
  onRetry?: (key: K, err: unknown, attempt: number, delayMs: number) => void;
  /** A key given up on: retry budget spent, or a NonRetryable error. */
  onDrop?: (key: K, err: unknown, reason: DropReason, attempts: number) => void;
}

export interface WorkQueueStats {
  /** Keys ready to run (not started). */
  queued: number;
  /** Keys waiting for a delay (backoff / addAfter). */
  waiting: number;
  /** Runs in progress. */
  inFlight: number;
  /** Runs finished so far (success or failure). */
  processed: number;
  /** Failed runs requeued with backoff, total. */
  retries: number;
  /** Keys given up on, total (max attempts or NonRetryable). */
  dropped: number;
}

export interface ShutdownResult {
  /** True if every in-flight run ended within the bound. */
  drained: boolean;
  /** Runs still in flight when shutdown returned. */
  inFlight: number;
  /** Queued or waiting keys discarded (never run). */
  discarded: number;
}

export class WorkQueue<K = string> {
  readonly name: string;
  readonly #process: (key: K) => Promise<void>;
  readonly #concurrency: number;
  readonly #maxAttempts: number;
  readonly #limiter: RateLimiter<K>;
  readonly #clock: Clock;
  readonly #onRetry: WorkQueueOptions<K>['onRetry'];
  readonly #onDrop: WorkQueueOptions<K>['onDrop'];

  // client-go Type: FIFO of ready keys, keys needing a run (dirty), keys being processed.
  #queue: K[] = [];
  #head = 0;
  readonly #dirty = new Set<K>();
  readonly #processing = new Set<K>();
  // client-go delayingType: one pending timer per key, at its earliest ready time.
  readonly #waiting = new Map<K, { readyAt: number; timer: unknown }>();
  // Runs per key that failed for resource exhaustion since its last forget: not part of its attempts.
  readonly #exhausted = new Map<K, number>();

  #shuttingDown = false;
  #pumpScheduled = false;
  #processed = 0;
  #retries = 0;
  #dropped = 0;
  #idleWaiters: Array<() => void> = [];

  constructor(opts: WorkQueueOptions<K>) {
    if (typeof opts?.process !== 'function') throw new TypeError('WorkQueue: process must be a function');
    const concurrency = opts.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`WorkQueue: concurrency must be an integer >= 1, got ${concurrency}`);
    }
    const maxAttempts = opts.maxAttempts ?? Infinity;
    if (!(maxAttempts === Infinity || (Number.isInteger(maxAttempts) && maxAttempts >= 1))) {
      throw new RangeError(`WorkQueue: maxAttempts must be an integer >= 1 or Infinity, got ${maxAttempts}`);
    }
    this.name = opts.name ?? 'queue';
    this.#process = opts.process;
    this.#concurrency = concurrency;
    this.#maxAttempts = maxAttempts;
    this.#clock = opts.clock ?? realClock;
    this.#limiter = opts.rateLimiter ?? defaultControllerRateLimiter<K>({ clock: this.#clock });
    this.#onRetry = opts.onRetry;
    this.#onDrop = opts.onDrop;
  }

  /** Queues key unless it is already queued; a key in flight runs once more after its run. */
  add(key: K): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    if (this.#processing.has(key)) return; // re-queued by #done
    this.#queue.push(key);
    this.#schedulePump();
  }

  /** Adds key after delayMs (<= 0: now). A key already waiting keeps the earlier time. */
  addAfter(key: K, delayMs: number): void {
    if (this.#shuttingDown) return;
    if (!(delayMs > 0)) {
      this.add(key);
      return;
    }
    const readyAt = this.#clock.now() + delayMs;
    const prev = this.#waiting.get(key);
    if (prev) {
      if (prev.readyAt <= readyAt) return;
      this.#clock.clearTimeout(prev.timer);
    }
    const timer = this.#clock.setTimeout(() => {
      const cur = this.#waiting.get(key);
      if (cur?.timer !== timer) return;
      this.#waiting.delete(key);
      this.add(key);
    }, delayMs);
    this.#waiting.set(key, { readyAt, timer });
  }

  /** Adds key after the rate limiter's delay (counts one failure of the key). */
  addRateLimited(key: K): void {
    if (this.#shuttingDown) return;
    this.addAfter(key, this.#limiter.when(key));
  }

  /** Clears the key's failure count (its next backoff starts at the base again). */
  forget(key: K): void {
    this.#limiter.forget(key);
    this.#exhausted.delete(key);
  }

  numRequeues(key: K): number {
    return this.#limiter.numRequeues(key);
  }

  /** Whether the key has work pending: queued, in flight, or waiting for a delayed (retry) add. */
  has(key: K): boolean {
    return this.#dirty.has(key) || this.#processing.has(key) || this.#waiting.has(key);
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  stats(): WorkQueueStats {
    return {
      queued: this.#queue.length - this.#head,
      waiting: this.#waiting.size,
      inFlight: this.#processing.size,
      processed: this.#processed,
      retries: this.#retries,
      dropped: this.#dropped,
    };
  }

  /**
   * Stops taking work: later adds are ignored, queued and waiting keys are discarded, no new run
   * starts, failed runs are not requeued. Waits for in-flight runs, at most `timeoutMs` (10 s)
   * on the queue's clock. Idempotent.
   */
  async shutdown(opts: { timeoutMs?: number } = {}): Promise<ShutdownResult> {
    const timeoutMs = optionalTimeout(opts.timeoutMs, 'timeoutMs', 10_000);
    let discarded = 0;
    if (!this.#shuttingDown) {
      this.#shuttingDown = true;
      discarded = this.#queue.length - this.#head + this.#waiting.size;
      for (const w of this.#waiting.values()) this.#clock.clearTimeout(w.timer);
      this.#waiting.clear();
      this.#queue = [];
      this.#head = 0;
      for (const k of this.#dirty) if (!this.#processing.has(k)) this.#dirty.delete(k);
      this.#exhausted.clear();
    }
    if (this.#processing.size > 0) {
      let timer: unknown;
      await new Promise<void>((resolve) => {
        this.#idleWaiters.push(resolve);
        timer = this.#clock.setTimeout(resolve, timeoutMs);
      });
      this.#clock.clearTimeout(timer);
    }
    const inFlight = this.#processing.size;
    return { drained: inFlight === 0, inFlight, discarded };
  }

  #schedulePump(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    // Runs start from a microtask, never inside the caller's add().
    queueMicrotask(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    while (!this.#shuttingDown && this.#processing.size < this.#concurrency && this.#head < this.#queue.length) {
      const key = this.#queue[this.#head++]!;
      if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
        this.#queue = this.#queue.slice(this.#head);
        this.#head = 0;
      }
      this.#processing.add(key);
      this.#dirty.delete(key);
      void this.#run(key);
    }
  }

  async #run(key: K): Promise<void> {
    let failed = false;
    let error: unknown;
    try {
      await this.#process(key);
    } catch (err) {
      failed = true;
      error = err;
    }
    this.#processed++;
    const exhausted = failed && isResourceExhaustion(error);
    if (!failed) {
      this.forget(key);
    } else if (isNonRetryable(error) && !exhausted) {
      const attempts = this.#limiter.numRequeues(key) + 1;  // counted before forget() resets it
      this.forget(key);
      this.#drop(key, error, 'non-retryable', attempts);
    } else {
      // Istio processNextItem: retryCount = NumRequeues + 1; retry while < maxAttempts.
      const attempt = this.#limiter.numRequeues(key) + 1;
      const spent = this.#exhausted.get(key) ?? 0;
      if (exhausted) this.#exhausted.set(key, spent + 1);
      const withinBudget = exhausted || attempt - spent < this.#maxAttempts;
      if (withinBudget && !this.#shuttingDown) {
        const delay = this.#limiter.when(key);
        this.#retries++;
        this.addAfter(key, delay);
        this.#notify(() => this.#onRetry?.(key, error, attempt, delay));
      } else if (!withinBudget) {
        this.forget(key);
        this.#drop(key, error, 'max-attempts', attempt);
      }
    }
    this.#done(key);
  }

  #drop(key: K, err: unknown, reason: DropReason, attempts: number): void {
    this.#dropped++;
    this.#notify(() => this.#onDrop?.(key, err, reason, attempts));
  }

  // A throwing callback must not break the queue's bookkeeping.
  #notify(fn: () => void): void {
    try {
      fn();
    } catch {
      /* ignored */
    }
  }

  #done(key: K): void {
    this.#processing.delete(key);
    if (this.#dirty.has(key)) {
      if (this.#shuttingDown) this.#dirty.delete(key);
      else this.#queue.push(key);
    }
    if (this.#processing.size === 0 && this.#idleWaiters.length > 0) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const w of waiters) w();
    }
    this.#schedulePump();
  }
}

function checkPositive(v: number, what: string): void {
  if (!(typeof v === 'number' && v > 0)) throw new RangeError(`${what} must be a number > 0, got ${v}`);
}
