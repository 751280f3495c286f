// The enrollment pipeline the node agent runs for every pod:
//   netns → in-pod rules → ztunnel (ZDS add + ack) → host probe set.
// Per-pod operations are serialised; different pods run concurrently.
import { statSync } from 'node:fs';
import { EnrollError } from './errors.js';
import { KeyedLock } from '../util/keyed-lock.js';
import { NetnsRef } from './netns-ref.js';
import { PodCache, type CacheEntry } from './pod-cache.js';
import type { DriftReport, PodInfo, ProbeSet, RuleBackend, ZtunnelSink } from './types.js';

export interface DataplaneOptions {
  rules: RuleBackend;
  ztunnel: ZtunnelSink;
  probes: ProbeSet;
  /** Warnings that need no action from the caller (foreign probe entries, ...). */
  warn?: (message: string) => void;
}

export interface EnrollResult {
  uid: string;
  netnsIno: number;
}

export interface ReconcileItem {
  pod: PodInfo;
  /** Where the pod's netns is now; absent → the pod is cached without one (ztunnel keeps it). */
  netnsPath?: string;
}

export interface ReconcileReport {
  pods: number;
  /** Pods whose rules had drifted and were re-applied. */
  repaired: string[];
  /** Pods that could not be restored, with the reason. */
  failed: Array<{ uid: string; error: string }>;
  probeEntries: number;
  /** Stale probe-set IPs removed (none when the snapshot was incomplete). */
  pruned: string[];
  complete: boolean;
}

export interface PodDrift extends DriftReport {
  uid: string;
}

export class Dataplane {
  readonly cache = new PodCache();
  private readonly lock = new KeyedLock();
  private readonly warn: (m: string) => void;
  private readonly inflight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(private readonly opts: DataplaneOptions) {
    this.warn = opts.warn ?? (() => undefined);
  }

  /** Creates the host probe set (and its host rule) if missing. */
  async start(): Promise<void> {
    await this.opts.probes.ensure();
  }

  /**
   * Puts a pod into the mesh. Without `netnsPath` the cached netns is used.
   * Throws EnrollError: non-retryable for netns/rule failures (no trace left),
   * retryable for ztunnel/probe-set failures (the pod stays cached).
   */
  enroll(pod: PodInfo, opts: { netnsPath?: string } = {}): Promise<EnrollResult> {
    return this.track(pod.uid, () => this.enrollLocked(pod, opts.netnsPath));
  }

  private async enrollLocked(pod: PodInfo, netnsPath: string | undefined): Promise<EnrollResult> {
    // A placeholder first, so a ztunnel connecting meanwhile is told to keep the pod.
    this.cache.ensure(pod);
    let ref: NetnsRef;
    try {
      if (netnsPath !== undefined) {
        ref = this.cache.upsert(pod, NetnsRef.open(netnsPath));
      } else {
        const entry = this.cache.get(pod.uid)!;
        if (!entry.netns) throw Object.assign(new Error('netns not given and the pod has none cached'), { code: 'ENOENT' });
        entry.pod = pod;
        ref = entry.netns;
      }
    } catch (err) {
      this.cache.take(pod.uid)?.netns?.release();
      throw new EnrollError(pod.uid, 'netns', false, err);
    }
    try {
      await ref.use((ns) => this.opts.rules.apply(ns, pod));
    } catch (err) {
      // Undo whatever part of the rules got in (routes, one family), then forget the pod.
      await ref.use((ns) => this.opts.rules.remove(ns, pod)).catch(() => undefined);
      this.cache.take(pod.uid)?.netns?.release();
      throw new EnrollError(pod.uid, 'rules', false, err);
    }
    try {
      await ref.use((ns) => this.opts.ztunnel.podAdded(pod, ns));
    } catch (err) {
      throw new EnrollError(pod.uid, 'ztunnel', true, err);
    }
    try {
      await this.opts.probes.upsert(pod.ips, pod.uid);
    } catch (err) {
      throw new EnrollError(pod.uid, 'probe-set', true, err);
    }
    return { uid: pod.uid, netnsIno: ref.ino };
  }

  /**
   * Takes a pod out of the mesh: probe-set entries (only those commented with
   * its UID), the cache entry, the in-pod rules (only if the pod still runs),
   * then a ZDS delete to every ztunnel. The netns fd is released exactly once.
   */
  unenroll(pod: PodInfo, opts: { podDeleted: boolean }): Promise<{ rulesRemoved: boolean }> {
    return this.track(pod.uid, async () => {
      const { foreign } = await this.opts.probes.removeOwned(pod.ips, pod.uid);
      for (const f of foreign) this.warn(`probe set: ${f.ip} belongs to pod ${f.uid}, not ${pod.uid}; left in place`);
      const entry = this.cache.take(pod.uid);
      let rulesRemoved = false;
      try {
        if (!opts.podDeleted) {
          if (entry?.netns) {
            await entry.netns.use((ns) => this.opts.rules.remove(ns, pod));
            rulesRemoved = true;
          } else {
            this.warn(`pod ${pod.uid}: no cached netns, in-pod rules not removed`);
          }
        }
        await this.opts.ztunnel.podDeleted(pod.uid);
      } finally {
        entry?.netns?.release();
      }
      return { rulesRemoved };
    });
  }

  /** The cached pods (ZDS snapshots read this: netns → add, none → keep). */
  snapshot(): CacheEntry[] {
    return this.cache.snapshot();
  }

  /**
   * Rebuilds state after a restart from the pods that should be enrolled:
   * re-opens each netns, verifies its rules and re-applies only on drift
   * (running pods' traffic is not touched otherwise), refills the probe set
   * and prunes stale entries — unless the snapshot is incomplete (a pod
   * without IPs or whose netns could not be opened), when nothing is pruned.
   */
  async reconcile(items: ReconcileItem[]): Promise<ReconcileReport> {
    const report: ReconcileReport = { pods: items.length, repaired: [], failed: [], probeEntries: 0, pruned: [], complete: true };
    const keep = new Set<string>();
    await Promise.all(items.map((item) => this.track(item.pod.uid, async () => {
      const { pod } = item;
      if (pod.ips.length === 0) report.complete = false;
      try {
        if (item.netnsPath === undefined) {
          this.cache.ensure(pod);
          report.complete = false;
        } else {
          const ref = this.cache.upsert(pod, NetnsRef.open(item.netnsPath));
          const state = await ref.use((ns) => this.opts.rules.verify(ns, pod));
          if (!state.ok) {
            await ref.use((ns) => this.opts.rules.apply(ns, pod));
            report.repaired.push(pod.uid);
          }
        }
        await this.opts.probes.upsert(pod.ips, pod.uid);
        for (const ip of pod.ips) keep.add(ip);
      } catch (err) {
        report.complete = false;
        report.failed.push({ uid: pod.uid, error: err instanceof Error ? err.message : String(err) });
      }
    })));
    if (report.complete) report.pruned = await this.opts.probes.prune(keep);
    report.probeEntries = (await this.opts.probes.list()).length;
    return report;
  }

  /** What differs from the enrolled state of one pod: rules, netns identity, ztunnel, probe set. */
  async verify(pod: PodInfo, opts: { netnsPath?: string } = {}): Promise<PodDrift> {
    const drift: string[] = [];
    const entry = this.cache.get(pod.uid);
    if (!entry) return { uid: pod.uid, ok: false, drift: ['pod is not enrolled'] };
    if (!entry.netns) {
      drift.push('no netns cached');
    } else {
      if (opts.netnsPath !== undefined) {
        try {
          const st = statSync(opts.netnsPath);
          if (st.ino !== entry.netns.ino) drift.push(`netns identity: ${opts.netnsPath} is inode ${st.ino}, cached ${entry.netns.ino}`);
        } catch {
          drift.push(`netns identity: ${opts.netnsPath} is gone (cached inode ${entry.netns.ino})`);
        }
      }
      const rules = await entry.netns.use((ns) => this.opts.rules.verify(ns, pod));
      drift.push(...rules.drift);
    }
    if (this.opts.ztunnel.knows && !this.opts.ztunnel.knows(pod.uid)) drift.push('ztunnel: pod not acknowledged by any connection');
    const entries = await this.opts.probes.list();
    for (const ip of pod.ips) {
      const e = entries.find((x) => x.ip === ip);
      if (!e) drift.push(`probe set: ${ip} missing`);
      else if (e.uid !== pod.uid) drift.push(`probe set: ${ip} belongs to ${e.uid}`);
    }
    return { uid: pod.uid, ok: drift.length === 0, drift };
  }

  /** Waits for in-flight operations, then releases every cached netns. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.inflight]);
    for (const e of this.cache.snapshot()) this.cache.take(e.pod.uid)?.netns?.release();
  }

  private track<T>(uid: string, fn: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('dataplane is closed'));
    const op = this.lock.run(uid, fn);
    this.inflight.add(op);
    const done = () => this.inflight.delete(op);
    op.then(done, done);
    return op;
  }
}
