// Polling for a condition with a deadline, for tests, benchmarks and scripts that watch a
// system they do not control (a cluster, a child process): `check` is called every `everyMs`
// until it returns something truthy (returned) or `timeoutMs` has passed (an Error naming
// `what` and the last error `check` threw).
import { sleep } from './sleep.js';

export async function until<T>(what: string, check: () => T | Promise<T>, timeoutMs = 15_000, everyMs = 20): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await sleep(everyMs);
  }
}
