// Go's time.ParseDuration (Istio's duration settings are Go durations): "90s", "1m30s",
// "1.5h", "250ms"; "0" alone may omit the unit. Returns milliseconds; throws RangeError.
const UNIT_MS: Record<string, number> = {
  ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000,
};
const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

export function parseGoDuration(text: string): number {
  let s = text;
  let sign = 1;
  if (s.startsWith('-') || s.startsWith('+')) {
    if (s[0] === '-') sign = -1;
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') throw new RangeError(`${JSON.stringify(text)} is not a duration`);
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < s.length) {
    const at = PART.lastIndex;
    const m = PART.exec(s);
    if (!m || m.index !== at) {
      const hint = /^\d+(\.\d*)?$/.test(s) ? ' (a unit is required: ms, s, m, h)' : '';
      throw new RangeError(`${JSON.stringify(text)} is not a duration${hint}`);
    }
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
  }
  return sign * total;
}

/** Inverse for display: whole hours/minutes/seconds/ms as Go prints them ("1m0s" → "1m"). */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)}${unit}`);
      rest %= size;
    }
  }
  if (rest > 0) parts.push(`${rest}ms`);
  return parts.join('');
}
