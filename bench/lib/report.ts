// Shared benchmark plumbing: timing, statistics, and the committed results
// (bench/results/NAME.json plus an SVG bar chart of the medians).
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpus, release } from 'node:os';

export interface Series {
  /** What was measured, e.g. "route add+del via podwire". */
  label: string;
  /** Per-op samples in microseconds. */
  samples: number[];
  /** Optional extra facts (N, batch size, ...). */
  notes?: Record<string, unknown>;
}

export interface Summary {
  label: string;
  n: number;
  medianUs: number;
  p99Us: number;
  meanUs: number;
  opsPerSec: number;
  notes?: Record<string, unknown>;
}

export const nowUs = (): number => Number(process.hrtime.bigint()) / 1000;

export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

export function summarize(s: Series): Summary {
  const sorted = [...s.samples].sort((a, b) => a - b);
  const mean = sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length);
  const out: Summary = {
    label: s.label,
    n: sorted.length,
    medianUs: round(quantile(sorted, 0.5)),
    p99Us: round(quantile(sorted, 0.99)),
    meanUs: round(mean),
    opsPerSec: Math.round(1e6 / mean),
  };
  if (s.notes) out.notes = s.notes;
  return out;
}

const round = (x: number) => Math.round(x * 100) / 100;

/** Times `fn` n times (after `warmup` runs); returns per-call microseconds. */
export async function timeEach(n: number, fn: (i: number) => Promise<unknown> | unknown, warmup = 0): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn(i);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = nowUs();
    await fn(i);
    out.push(nowUs() - t0);
  }
  return out;
}

const resultsDir = join(dirname(fileURLToPath(import.meta.url)), '../../../bench/results');

/**
 * Writes bench/results/NAME.json and NAME.svg. `ratios` names pairs to compare:
 * { "podwire vs ip route add": ["ip route add per op", "podwire route add+del"] } → a/b.
 */
export function writeResults(name: string, title: string, series: Series[], ratios: Record<string, [string, string]> = {}): Summary[] {
  const summaries = series.map(summarize);
  const byLabel = new Map(summaries.map((s) => [s.label, s]));
  const ratioOut: Record<string, number> = {};
  for (const [k, [a, b]] of Object.entries(ratios)) {
    const sa = byLabel.get(a);
    const sb = byLabel.get(b);
    if (sa && sb) ratioOut[k] = round(sa.medianUs / sb.medianUs);
  }
  mkdirSync(resultsDir, { recursive: true });
  const doc = {
    name, title, date: new Date().toISOString(),
    machine: { cpus: cpus().length, model: cpus()[0]?.model, kernel: release(), node: process.version },
    results: summaries, ratios: ratioOut,
  };
  writeFileSync(join(resultsDir, `${name}.json`), `${JSON.stringify(doc, null, 2)}\n`);
  writeFileSync(join(resultsDir, `${name}.svg`), barChart(title, summaries));
  console.table(summaries.map(({ notes, ...s }) => s));
  for (const [k, v] of Object.entries(ratioOut)) console.log(`${k}: ${v}×`);
  return summaries;
}

/** A horizontal bar chart of medians on a log scale (values span µs to ms). */
export function barChart(title: string, rows: Summary[]): string {
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const labelW = 330, barW = 420, rowH = 26, top = 40;
  const h = top + rows.length * rowH + 30;
  const max = Math.max(...rows.map((r) => r.medianUs), 1);
  const min = Math.min(...rows.map((r) => Math.max(r.medianUs, 0.01)));
  const lo = Math.log10(min) - 0.3, hi = Math.log10(max) + 0.1;
  const scale = (v: number) => ((Math.log10(Math.max(v, 0.01)) - lo) / (hi - lo)) * barW;
  const fmt = (us: number) => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(us < 10 ? 2 : 1)} µs`);
  const bars = rows.map((r, i) => {
    const y = top + i * rowH;
    const w = Math.max(2, scale(r.medianUs));
    return `<text x="${labelW - 8}" y="${y + 17}" text-anchor="end">${esc(r.label)}</text>` +
      `<rect x="${labelW}" y="${y + 4}" width="${w.toFixed(1)}" height="${rowH - 8}" fill="${r.label.includes('podwire') ? '#2b7bb9' : '#b0b0b0'}"/>` +
      `<text x="${labelW + w + 6}" y="${y + 17}">${fmt(r.medianUs)}</text>`;
  }).join('\n');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${labelW + barW + 110}" height="${h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="22" font-size="15" font-weight="bold">${esc(title)}</text>
${bars}
<text x="10" y="${h - 10}" fill="#666">median per operation, log scale; podwire in blue</text>
</svg>
`;
}
