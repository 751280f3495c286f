// The job runner bounds its dedicated (spawn) threads: more spawns queue
// FIFO and start as threads free up; counters() reports the counts.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { native } from '../../lib/net/binding.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

function threads(): number {
  return Number(/^Threads:\s+(\d+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]);
}

describe.skipIf(!privileged())('job runner', () => {
  it('runs at most dedicatedMax spawn threads at once; the rest queue and all finish', async () => {
    const ns = await freshNetns();
    const b = native();
    const max = b.counters().dedicatedMax;
    expect(max).toBe(16);
    const base = threads();
    let peakThreads = 0;
    let peakDedicated = 0;
    let sawQueued = 0;
    const sample = () => {
      const c = b.counters();
      peakThreads = Math.max(peakThreads, threads());
      peakDedicated = Math.max(peakDedicated, c.dedicatedThreads);
      sawQueued = Math.max(sawQueued, c.dedicatedQueued);
    };
    const timer = setInterval(sample, 5);
    const t0 = Date.now();
    const runs = Array.from({ length: 40 }, () => b.spawn(ns.fd, ['/bin/sleep', '0.3'], [], null, null, 10_000));
    sample();  // all 40 submitted: 16 running, 24 queued
    const results = await Promise.all(runs);
    clearInterval(timer);
    const took = Date.now() - t0;
    expect(results.every((r) => r.code === 0 && !r.timedOut)).toBe(true);
    expect(sawQueued).toBe(40 - max);
    expect(peakDedicated).toBeLessThanOrEqual(max);
    expect(b.counters().dedicatedPeak).toBeLessThanOrEqual(max);
    expect(peakThreads).toBeLessThanOrEqual(base + max + 4 /* pool */ + 4);
    expect(took).toBeGreaterThanOrEqual(3 * 300 - 50);  // 40 sleeps, 16 at a time: three rounds
    // A thread counts itself out just after handing its last result over.
    for (let i = 0; i < 100 && b.counters().dedicatedThreads > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(b.counters()).toMatchObject({ dedicatedThreads: 0, dedicatedQueued: 0 });
  });
});
