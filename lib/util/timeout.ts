// The one validator for timeout and interval options. Node's timers take a
// signed 32-bit delay: anything ≥ 2^31 ms (about 24.8 days) is silently
// replaced by 1 ms, so a "very long" timeout would fire at once (an ack
// timeout of 2**31 dropped every connection; a keepalive interval spun).
// Fractions are refused too: they are truncated by the timer anyway, and an
// option written as 0.5 is more likely a unit mistake (seconds for ms).

/** The longest delay setTimeout honours (2^31 - 1 ms). */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export interface TimeoutRule {
  /** Whether 0 is allowed (default false: the value must be > 0). */
  allowZero?: boolean;
}

/**
 * Checks a timeout/interval given in ms: an integer, > 0 (or ≥ 0 with
 * allowZero), at most MAX_TIMEOUT_MS. Throws a RangeError naming `name`.
 */
export function checkTimeout(value: unknown, name: string, rule: TimeoutRule = {}): number {
  const min = rule.allowZero ? 0 : 1;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_TIMEOUT_MS) {
    const shown = typeof value === 'number' ? String(value) : typeof value;
    throw new RangeError(`${name} must be an integer number of ms in ${min}..${MAX_TIMEOUT_MS}, got ${shown}`);
  }
  return value;
}

/** checkTimeout for an optional value: undefined gives `dflt` (which may itself be undefined). */
export function optionalTimeout<D extends number | undefined>(value: unknown, name: string, dflt: D, rule: TimeoutRule = {}): number | D {
  return value === undefined ? dflt : checkTimeout(value, name, rule);
}
