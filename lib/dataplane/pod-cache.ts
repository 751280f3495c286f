// Pods known to the dataplane, keyed by UID: workload info plus the pod's
// netns handle (or none yet: a placeholder that ztunnel is told to *keep*).
import type { PodInfo } from './types.js';
import type { NetnsRef } from './netns-ref.js';

export interface CacheEntry {
  pod: PodInfo;
  netns?: NetnsRef;
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
   * Stores the pod with its netns. Same inode as the cached handle → the new
   * handle is released and the old one kept (same sandbox); different inode
   * (sandbox re-created) → the new one replaces it and the old reference is
   * dropped (in-flight users hold their own). Returns the effective handle.
   */
  upsert(pod: PodInfo, netns: NetnsRef): NetnsRef {
    const e = this.entries.get(pod.uid);
    if (e?.netns && !e.netns.released && e.netns.ino === netns.ino && e.netns.ns.id.dev === netns.ns.id.dev) {
      netns.release();
      e.pod = pod;
      return e.netns;
    }
    e?.netns?.release();
    this.entries.set(pod.uid, { pod, netns });
    return netns;
  }

  get(uid: string): CacheEntry | undefined {
    return this.entries.get(uid);
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
