// trimNativeHeap hands the allocator's free pages back to the kernel, and nativeHeapStats sees
// them held: the agent calls it after the restart snapshot's burst (docs/benchmarks.md).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { mappingRssBytes } from '../../bench/lib/proc-usage.js';
import { nativeHeapStats, trimNativeHeap } from '../../lib/net/heap.js';
import { until } from '../helpers/kube.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/**
 * Resident bytes of the main arena's heap (the `[heap]` mapping, where the JS thread's mallocs of
 * these sizes live). Not the process's RssAnon: other threads fault pages in and out meanwhile
 * (that measure once came out 1 % short of the bound below with the trim working).
 */
const heapRss = () => mappingRssBytes('self', '[heap]');
const MB = 1024 * 1024;

describe('native heap', () => {
  it('reports the allocator totals', () => {
    const s = nativeHeapStats()!;
    expect(s).not.toBeNull();  // glibc (Debian's Node): mallinfo2 exists
    for (const k of ['arenaBytes', 'mmappedBytes', 'inUseBytes', 'freeBytes', 'releasableBytes'] as const) {
      expect(Number.isSafeInteger(s[k]) && s[k] >= 0, k).toBe(true);
    }
    expect(s.inUseBytes).toBeGreaterThan(0);
  });

  it('gives back pages that freed blocks between live ones hold', async () => {
    // 24 MB of 16 KiB buffers (malloc'd, below the mmap threshold, every page written); every
    // other one freed leaves 12 MB of holes that cannot coalesce into the top of the heap, so glibc
    // keeps them resident on its own.
    let bufs: Array<Buffer | null> = Array.from({ length: 1536 }, () => Buffer.alloc(16 * 1024, 1));
    const before = nativeHeapStats()!;
    for (let i = 0; i < bufs.length; i += 2) bufs[i] = null;
    // Backing stores are freed by V8's sweeper after a GC, possibly on another thread.
    await until('freed buffers back in the allocator', () => {
      gc();
      return nativeHeapStats()!.freeBytes >= before.freeBytes + 10 * MB;
    }, 30_000, 50);
    const held = heapRss();
    expect(trimNativeHeap()).toBe(true);
    expect(held - heapRss()).toBeGreaterThan(8 * MB);  // 3 of each hole's 4 pages at least
    expect(bufs.filter(Boolean).every((b) => b![0] === 1 && b![16 * 1024 - 1] === 1)).toBe(true);  // live ones intact
    bufs = [];
  });
});
