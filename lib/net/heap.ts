// The C allocator's share of this process's memory (the addon's job threads, netlink buffers,
// libuv, V8's own mallocs), and a way to give its free pages back after a burst. V8's heap is
// not in it: `process.memoryUsage()` reports that.
import type { NativeHeapStats } from '../native.js';
import { native } from './binding.js';

export type HeapStats = NativeHeapStats;

/**
 * Returns the allocator's free pages to the kernel (glibc `malloc_trim(0)`, every arena). Worth
 * calling once after a burst of native work that will not recur soon (the agent calls it after its
 * restart snapshot); it costs a walk of the free lists. true when anything was released; false
 * with nothing to release or on a libc without it.
 */
export function trimNativeHeap(): boolean {
  return native().heapTrim();
}

/** The allocator's totals over all arenas (glibc ≥ 2.33 `mallinfo2`), or null where unavailable. */
export function nativeHeapStats(): HeapStats | null {
  return native().heapStats();
}
