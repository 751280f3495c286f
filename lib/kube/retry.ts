// A short, bounded retry for reads. Only transient failures are retried (5xx,
// 429, our timeout, connection errors): a 4xx is the server's verdict and
// asking again cannot change it. The total is bounded by attempts × (request
// timeout + delay), so a caller on the pod-start path knows its worst case.
import { isTransient } from './errors.js';

export interface RetryOptions {
  /** Total attempts including the first (default 3). */
  attempts?: number;
  /** Delay before the 2nd attempt, doubled each time (default 100 ms). */
  delayMs?: number;
  /** Cap on one delay (default 1 000 ms). */
  maxDelayMs?: number;
  /** Stops retrying (the last error is thrown). */
  signal?: AbortSignal;
}

export async function withRetry<T>(fn: (attempt: number) => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const attempts = Math.max(1, opts.attempts ?? 3);
  let delay = opts.delayMs ?? 100;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (attempt >= attempts || !isTransient(err) || opts.signal?.aborted) throw err;
      // ±20 % jitter so agents on many nodes do not retry in lockstep.
      await sleep(Math.min(delay, opts.maxDelayMs ?? 1000) * (0.8 + Math.random() * 0.4), opts.signal);
      delay *= 2;
    }
  }
}

import { sleep } from '../util/sleep.js';

export { sleep };
