// The reinstall throttle (spec §3.5): a token bucket of 0.2 tokens/s with a burst of 1, used the
// way golang.org/x/time/rate's Reserve is — every attempt takes a token, going into debt when
// none is there, and the debt is the delay. A delayed attempt sleeps min(delay, 1 s) and counts
// a hit; hits reset when a token was there at once. More than 5 hits in a row means something
// keeps undoing the installer's work (the caller warns).
import { stopped } from './watch.js';
import { sleep } from '../util/sleep.js';

export interface ThrottleOptions {
  /** Tokens per second (0.2: one reinstall per 5 s without delay). */
  ratePerSecond?: number;
  burst?: number;
  /** The longest sleep of one delayed attempt (1 s). */
  maxSleepMs?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

export interface ThrottleResult {
  /** Consecutive delayed attempts, this one included (0: not delayed). */
  hits: number;
  /** How long this attempt slept. */
  sleptMs: number;
}

/** More hits in a row than this and the installer warns about a component reverting its work. */
export const REVERT_WARN_HITS = 5;

export class InstallThrottle {
  readonly #rate: number;
  readonly #burst: number;
  readonly #maxSleepMs: number;
  readonly #now: () => number;
  #tokens: number;
  #last: number;
  #hits = 0;

  constructor(opts: ThrottleOptions = {}) {
    this.#rate = opts.ratePerSecond ?? 0.2;
    this.#burst = opts.burst ?? 1;
    this.#maxSleepMs = opts.maxSleepMs ?? 1000;
    this.#now = opts.now ?? (() => performance.now());
    if (!(this.#rate > 0) || !(this.#burst >= 1)) throw new RangeError('the throttle needs a positive rate and a burst of at least 1');
    this.#tokens = this.#burst;
    this.#last = this.#now();
  }

  get hits(): number {
    return this.#hits;
  }

  /** Reserves a token: the delay until it is there, in ms (0: at once). */
  reserve(): number {
    const now = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) / 1000) * this.#rate);
    this.#last = now;
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens / this.#rate) * 1000;
  }

  /** One attempt: at once, or after min(delay, maxSleep) counting a hit. ERR_STOPPED on abort. */
  async throttle(signal?: AbortSignal): Promise<ThrottleResult> {
    const delay = this.reserve();
    if (delay === 0) {
      this.#hits = 0;
      return { hits: 0, sleptMs: 0 };
    }
    this.#hits++;
    const ms = Math.min(delay, this.#maxSleepMs);
    await sleep(ms, signal);
    if (signal?.aborted) throw stopped('watch');
    return { hits: this.#hits, sleptMs: ms };
  }
}


