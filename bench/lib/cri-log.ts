// Timestamps a benchmark compares across processes: the wall clock with sub-millisecond digits,
// and the CRI log format's (containerd stamps each line RFC 3339 with nanoseconds).
import { readFileSync } from 'node:fs';

/** Wall-clock milliseconds since the epoch, with µs digits (Date.now() has whole ms). */
export const nowMs = (): number => performance.timeOrigin + performance.now();

/** An RFC 3339 time with up to 9 fraction digits → ms since the epoch (µs kept; Date.parse keeps ms). */
export function rfc3339Ms(s: string): number {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(s);
  if (!m) throw new Error(`not an RFC 3339 time: ${JSON.stringify(s.slice(0, 40))}`);
  const whole = Date.parse(`${m[1]}${m[3]}`);
  const frac = m[2] ? Number(`0.${m[2]}`) * 1000 : 0;
  return whole + frac;
}

/** The time of the first line of a CRI container log (`<time> <stream> <tag> <text>`). */
export function criLogFirstLineMs(path: string): number {
  const text = readFileSync(path, 'utf8');
  const nl = text.indexOf('\n');
  if (nl < 0) throw new Error(`${path}: no complete line yet`);
  return rfc3339Ms(text.slice(0, nl).split(' ', 1)[0]!);
}
