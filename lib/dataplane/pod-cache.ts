// Pods known to the dataplane, keyed by UID: workload info plus the pod's
// netns handle (or none yet: a placeholder that ztunnel is told to *keep*).
// The cache changes only when a step has succeeded: the dataplane opens a
// new netns handle, programs it, and only then commits it here, so a failed
// attempt leaves the previous entry exactly as it was.
import type { PodInfo } from './types.js';
import type { NetnsRef } from './netns-ref.js';

export interface CacheEntry {
  pod: PodInfo;
  netns?: NetnsRef;
  /** An unenroll is under way (or failed half-way): not offered to new ztunnels. */
  leaving?: boolean;
}

export class PodCache {
  private readonly entries = new Map<string, CacheEntry>();

  /** Adds a placeholder (no netns) if the pod is unknown. */
  ensure(pod: PodInfo): CacheEntry {
    let e = this.entries.get(pod.uid);
    if (!e) {
      e = { pod };
      this.entries.set(pod.uid, e);
    }
    return e;
  }

  /**
   * Stores the pod with its (already programmed) netns handle, taking over
   * the caller's reference. A different handle replaces the cached one, whose
   * reference is dropped (in-flight users hold their own); the same handle
   * is kept as is. Clears `leaving`.
   */
  commit(pod: PodInfo, netns: NetnsRef): CacheEntry {
    const e = this.entries.get(pod.uid);
    if (e && e.netns === netns) {
      e.pod = pod;
      delete e.leaving;
      return e;
    }
    e?.netns?.release();
    const next: CacheEntry = { pod, netns };
    this.entries.set(pod.uid, next);
    return next;
  }

  get(uid: string): CacheEntry | undefined {
    return this.entries.get(uid);
  }

  has(uid: string): boolean {
    return this.entries.has(uid);
  }

  /** Removes the entry and hands its netns reference to the caller. */
  take(uid: string): CacheEntry | undefined {
    const e = this.entries.get(uid);
    this.entries.delete(uid);
    return e;
  }

  /** A copy of the current entries (for ZDS snapshots and reconciliation). */
  snapshot(): CacheEntry[] {
    return [...this.entries.values()].map((e) => ({ ...e }));
  }

  get size(): number {
    return this.entries.size;
  }
}
