// The enrollment pipeline the node agent runs for every pod:
//   netns → in-pod rules → ztunnel (ZDS add + ack) → host probe set.
// Per-pod operations (enroll, unenroll, reconcile, verify) are serialised;
// different pods run concurrently, reconcile at most `concurrency` at once.
// Per-pod state is transactional: after a failure the pod is either still
// fully enrolled and cached as before, or fully removed; a failed unenroll
// keeps the entry so that a retry can finish it. An enrollment the caller
// aborts stops at the next step boundary and undoes what it did. No pod is
// ever enrolled in the node's own netns (the host's or the agent's).
import { statSync } from 'node:fs';
import { constants as osc } from 'node:os';
import { join } from 'node:path';
import { EnrollError, ERR_ENROLL_ABORTED, ERR_NETNS_IS_HOST, OperationAbortedError, type EnrollStage } from './errors.js';
import { KeyedLock } from '../util/keyed-lock.js';
import { mapLimit } from '../util/limit.js';
import { NetnsRef } from './netns-ref.js';
import { NetError } from '../net/errors.js';
import { PodCache, type CacheEntry } from './pod-cache.js';
import { InvalidPodError, validatePod } from './pod-info.js';
import { canonicalIp, ProbeIndex } from './probe-index.js';
import type { NetnsId } from '../net/netns/netns.js';
import type { DriftReport, PodInfo, ProbeEntry, ProbeSet, RuleBackend, ZtunnelSink } from './types.js';

/** Pods reconciled at once by default: each holds a netns fd and a job thread while it runs. */
export const RECONCILE_CONCURRENCY = 16;

export interface DataplaneOptions {
  rules: RuleBackend;
  ztunnel: ZtunnelSink;
  /** The kernel probe set; ownership is tracked above it (ProbeIndex). */
  probes: ProbeSet;
  /** Pods reconciled at once (default RECONCILE_CONCURRENCY). */
  concurrency?: number;
  /** Warnings that need no action from the caller (foreign probe entries, ...). */
  warn?: (message: string) => void;
  /** The node's netns (the host's): never accepted as a pod's. The agent's own is refused in any case. */
  hostNetns?: NetnsId;
  /** The host's /proc (the agent's hostProcRoot): its `1/ns/net` is refused as a pod netns too. */
  hostProcRoot?: string;
}

export interface EnrollOptions {
  /**
   * The pod's netns as an open handle (what the proc scan proves:
   * lib/dataplane/proc-scan.ts openPodNetns). The dataplane takes its own
   * reference when it keeps it; the caller still releases its own, exactly
   * once, whatever the outcome. Wins over `netnsPath`.
   */
  netns?: NetnsRef;
  /**
   * The pod's netns by path (the CNI ADD's CNI_NETNS, a runtime's bind
   * mount); opened here. Never a `/proc/<pid>` path: a pid can be reused
   * between its lookup and this open. Neither given → the cached one.
   */
  netnsPath?: string;
  /**
   * The caller's deadline (the CNI ADD's). When it fires, the enrollment
   * stops at the next step boundary (an unanswered ZDS add is not waited
   * for), undoes what it did and rejects with EnrollError ERR_ENROLL_ABORTED
   * (retryable). A pod that was already enrolled in this same netns stays
   * enrolled as it was; any other is taken out wholly (its rules in the new
   * netns, a ZDS del, its probe-set entries, its cache entry).
   */
  signal?: AbortSignal;
  /**
   * Do nothing when, by the time the pod's lock is held, the pod is
   * enrolled with a netns (a re-enrollment by the drift check must not
   * replace a sandbox the CNI ADD enrolled meanwhile).
   */
  ifUnheld?: boolean;
  /**
   * With no ztunnel connected, wait this long for one before the ztunnel step fails (a CNI ADD
   * right after the agent or ztunnel restarted: the pod waits instead of failing its sandbox).
   */
  ztunnelConnectWaitMs?: number;
}

export interface UnenrollOptions {
  /** The pod is gone: its in-pod rules are not touched. */
  podDeleted: boolean;
  /**
   * Checked between steps: once it fired, the unenroll stops with
   * OperationAbortedError and the entry stays (leaving), so the next attempt
   * finishes the job.
   */
  signal?: AbortSignal;
  /**
   * Only if, by the time the pod's lock is held, the pod is enrolled in this
   * netns: a late DEL of an old sandbox must not take out the sandbox an ADD
   * enrolled meanwhile. Otherwise nothing is done (`skipped`).
   */
  ifNetns?: NetnsId;
}

export interface UnenrollResult {
  rulesRemoved: boolean;
  /** The dataplane had an entry for the pod (enrolled, placeholder or half-removed). */
  held: boolean;
  /** `ifNetns` and the pod was not enrolled in that netns: nothing was done. */
  skipped?: true;
}

export interface EnrollResult {
  uid: string;
  netnsIno: number;
  /** `ifUnheld` and the pod was enrolled already: nothing was done. */
  skipped?: boolean;
}

export interface ReconcileItem {
  pod: PodInfo;
  /** The pod's netns, open (the caller keeps and releases its reference, as for enroll). */
  netns?: NetnsRef;
  /** Where the pod's netns is now (a bind mount, not a /proc path). Neither → cached without one (ztunnel keeps it). */
  netnsPath?: string;
}

export interface ReconcileReport {
  pods: number;
  /** Pods whose rules had drifted and were re-applied. */
  repaired: string[];
  /** Pods that could not be restored, with the reason. */
  failed: Array<{ uid: string; error: string }>;
  probeEntries: number;
  /** Stale probe-set IPs removed (when the snapshot was incomplete: only those of owners that do not exist). */
  pruned: string[];
  complete: boolean;
}

export interface PodDrift extends DriftReport {
  uid: string;
}

export interface ReconcileOptions {
  /**
   * What happens to each pod's in-pod rules: `verify` (default) re-applies
   * them only where they drifted; `keep` leaves them as they are (only the
   * netns handle and the probe set are restored).
   */
  rules?: 'verify' | 'keep';
  /**
   * Whether a pod with this UID exists (the synced informer's view). With
   * it, entries of owners that do not exist are pruned even when the
   * snapshot is incomplete: a pod deleted while the agent was down has no
   * sandbox to come back to.
   */
  ownerExists?: (uid: string) => boolean;
}

/** What a drift repair found and did for one enrolled pod. */
export interface DriftRepair {
  uid: string;
  /** False when the pod was not (or no longer) enrolled with a netns: nothing was checked. */
  checked: boolean;
  /** What differed (as verify reports it). */
  drift: string[];
  /** What was put right: 'rules', 'probe-set', 'ztunnel', or the whole 'enrollment' (a pod the dataplane did not hold). */
  repaired: DriftPart[];
  /** What could not be put right, with the reason. */
  failed: Array<{ part: DriftPart; error: string }>;
}

export type DriftPart = 'rules' | 'probe-set' | 'ztunnel' | 'enrollment';

/** Thrown inside an enrollment when its signal fired (never leaves this module). */
const ABORTED = Symbol('aborted');

/** p, or a rejection with ABORTED as soon as the signal fires (p is still settled quietly). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(ABORTED);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    p.then((v) => {
      signal.removeEventListener('abort', onAbort);
      resolve(v);
    }, (err: unknown) => {
      signal.removeEventListener('abort', onAbort);
      reject(err);
    });
  });
}

/** (dev, ino) of an nsfs path, or undefined when it cannot be read. */
function nsIdAt(path: string): NetnsId | undefined {
  try {
    const st = statSync(path);
    return { dev: st.dev, ino: st.ino };
  } catch {
    return undefined;
  }
}

const sameId = (a: NetnsId | undefined, b: NetnsId) => a !== undefined && a.dev === b.dev && a.ino === b.ino;

export class Dataplane {
  readonly cache = new PodCache();
  /** The probe set's owners by IP, over the kernel set. */
  readonly probes: ProbeIndex;
  private readonly lock = new KeyedLock();
  private readonly warn: (m: string) => void;
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly concurrency: number;
  private closed = false;

  constructor(private readonly opts: DataplaneOptions) {
    this.warn = opts.warn ?? (() => undefined);
    this.probes = new ProbeIndex(opts.probes);
    const c = opts.concurrency ?? RECONCILE_CONCURRENCY;
    if (!Number.isInteger(c) || c < 1 || c > 1024) throw new RangeError(`concurrency ${c} must be an integer in 1..1024`);
    this.concurrency = c;
  }

  /** Creates the host probe set (and its host rule) if missing and loads its owners. */
  async start(): Promise<void> {
    await this.probes.ensure();
    await this.probes.load();
  }

  /**
   * Puts a pod into the mesh (or re-enrolls it). Without `netnsPath` the
   * cached netns is used. Throws EnrollError: `input` (invalid PodInfo:
   * nothing written), `netns` and `rules` (a new pod leaves no trace; an
   * enrolled pod stays enrolled as it was), `ztunnel` and `probe-set`
   * (retryable: the pod stays cached with its netns, the next ztunnel
   * snapshot delivers it); `netns` with code ERR_NETNS_IS_HOST (the node's
   * own netns: refused before anything is written); ERR_ENROLL_ABORTED
   * (retryable: `signal` fired, see EnrollOptions).
   */
  enroll(pod: PodInfo, opts: EnrollOptions = {}): Promise<EnrollResult> {
    try {
      validatePod(pod);
    } catch (err) {
      return Promise.reject(new EnrollError(uidOf(pod), 'input', false, err));
    }
    const { signal } = opts;
    if (signal?.aborted) return Promise.reject(abortedError(pod.uid, 'netns', signal));
    return this.track(pod.uid, () => this.enrollLocked(pod, sourceOf(opts), signal, opts.ifUnheld === true, opts.ztunnelConnectWaitMs));
  }

  private async enrollLocked(pod: PodInfo, netnsSource: NetnsSource, signal: AbortSignal | undefined, ifUnheld: boolean, connectWaitMs?: number): Promise<EnrollResult> {
    if (signal?.aborted) throw abortedError(pod.uid, 'netns', signal);  // while waiting for the pod's lock: nothing done
    const prior = this.cache.get(pod.uid);
    if (ifUnheld && prior?.netns && !prior.netns.released && !prior.leaving) return { uid: pod.uid, netnsIno: prior.netns.ino, skipped: true };
    const priorRef = prior?.netns && !prior.netns.released && !prior.leaving ? prior.netns : undefined;
    const priorIps = prior?.pod.ips ?? [];
    const { ref } = await this.establish(pod, netnsSource, 'apply');
    // Enrolled in this very netns before the call: every step is a re-application, an abort undoes nothing.
    const keep = ref === priorRef;
    let zdsSent = false;
    const abort = async (stage: EnrollStage): Promise<never> => {
      if (!keep) await this.undoEnroll(pod, ref, { zds: zdsSent || prior !== undefined, ips: [...pod.ips, ...priorIps] });
      throw abortedError(pod.uid, stage, signal!);
    };
    if (signal?.aborted) await abort('rules');
    try {
      zdsSent = true;
      const wait = connectWaitMs ? { connectWaitMs } : undefined;
      await untilAborted(ref.use((ns) => this.opts.ztunnel.podAdded(pod, ns, wait)), signal);
    } catch (err) {
      if (err === ABORTED) await abort('ztunnel');
      throw new EnrollError(pod.uid, 'ztunnel', true, err);
    }
    if (signal?.aborted) await abort('ztunnel');
    try {
      await this.probes.upsert(pod.ips, pod.uid, { force: true });
      await this.probes.retain(pod.uid, pod.ips);  // IPs the pod no longer has
    } catch (err) {
      throw new EnrollError(pod.uid, 'probe-set', true, err);
    }
    return { uid: pod.uid, netnsIno: ref.ino };
  }

  /**
   * Takes an aborted enrollment out wholly, in upstream's removal order: out
   * of the cache first (a ztunnel connecting now is not given the pod), the
   * rules in its netns, a ZDS del (queued behind an unanswered add on the same
   * connection; a connection that fails meanwhile is closed, and its ztunnel's
   * next snapshot no longer has the pod), its probe-set entries. A step that
   * fails leaves the entry marked leaving, for an unenroll or the next ADD.
   */
  private async undoEnroll(pod: PodInfo, ref: NetnsRef, opts: { zds: boolean; ips: string[] }): Promise<void> {
    const entry = this.cache.get(pod.uid);
    if (entry) entry.leaving = true;
    let clean = true;
    const step = async (what: string, fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        clean = false;
        this.warn(`pod ${pod.uid}: undoing an aborted enrollment: ${what}: ${err instanceof Error ? err.message : String(err)}`);
      }
    };
    await step('in-pod rules', () => ref.use((ns) => this.opts.rules.remove(ns, pod)));
    if (opts.zds) {
      try {
        await this.opts.ztunnel.podDeleted(pod.uid);
      } catch (err) {
        // Only transport failures get here: those connections are closed, their ztunnel re-syncs from the cache.
        this.warn(`pod ${pod.uid}: undoing an aborted enrollment: ZDS del: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    await step('probe set', async () => {
      const { foreign } = await this.probes.removeOwned(opts.ips, pod.uid);
      for (const f of foreign) this.warn(`probe set: ${f.ip} belongs to pod ${f.uid}, not ${pod.uid}; left in place`);
    });
    if (clean && this.cache.get(pod.uid) === entry) this.cache.take(pod.uid)?.netns?.release();
  }

  /**
   * Opens the pod's netns (or reuses the cached handle of the same netns),
   * gets its rules in place (`apply`, or `verify` and re-apply only on
   * drift) and only then commits the handle to the cache. On failure the
   * cache entry is as it was; rules are undone only in a netns that was not
   * the pod's working one. Returns the committed handle (`repaired`: drift
   * was found and fixed).
   */
  private async establish(pod: PodInfo, source: NetnsSource, mode: 'apply' | 'verify' | 'keep'): Promise<{ ref: NetnsRef; repaired: boolean }> {
    const prior = this.cache.get(pod.uid);
    const cached = prior?.netns && !prior.netns.released ? prior.netns : undefined;
    let ref: NetnsRef;
    let fresh = false;
    try {
      if (source !== undefined) {
        // Our own reference: the caller's handle is released by the caller, ours by the cache.
        const opened = typeof source === 'string' ? NetnsRef.open(source) : source.acquire();
        const node = this.nodeNetns(opened.ns.id);
        if (node) {
          opened.release();
          throw Object.assign(new Error(`${opened.ns.path} is the ${node} netns, not a pod's`), { code: ERR_NETNS_IS_HOST });
        }
        if (cached && cached.sameNetns(opened)) {
          opened.release();
          ref = cached;
        } else {
          ref = opened;
          fresh = true;
        }
      } else {
        if (!cached) throw new NetError(`pod ${pod.uid}: no netns given and none cached`, { errno: osc.errno.ENOENT, op: 'netns' });
        ref = cached;
      }
    } catch (err) {
      throw new EnrollError(pod.uid, 'netns', false, err);
    }
    // A new pod gets a placeholder first, so a ztunnel connecting meanwhile is told to keep it.
    const placeholder = prior === undefined;
    if (placeholder) this.cache.ensure(pod);
    let repaired = false;
    try {
      if (mode === 'apply') {
        await ref.use((ns) => this.opts.rules.apply(ns, pod));
      } else if (mode === 'verify' && !(await ref.use((ns) => this.opts.rules.verify(ns, pod))).ok) {
        await ref.use((ns) => this.opts.rules.apply(ns, pod));
        repaired = true;
      }
    } catch (err) {
      if (fresh) {
        // Undo whatever part got into the new netns (routes, one family); never touch the working one.
        await ref.use((ns) => this.opts.rules.remove(ns, pod)).catch(() => undefined);
        ref.release();
      }
      if (placeholder) this.cache.take(pod.uid);
      throw new EnrollError(pod.uid, 'rules', !fresh, err);
    }
    this.cache.commit(pod, ref);
    return { ref, repaired };
  }

  /**
   * Which of the node's own netns `id` is ('agent' / 'host'), if any. Read at
   * every open (two stats): a pod netns is never programmed on the strength
   * of an identity read earlier.
   */
  private nodeNetns(id: NetnsId): 'agent\'s own' | 'host' | undefined {
    if (sameId(nsIdAt('/proc/self/ns/net'), id)) return 'agent\'s own';
    if (this.opts.hostNetns && sameId(this.opts.hostNetns, id)) return 'host';
    if (this.opts.hostProcRoot !== undefined && sameId(nsIdAt(join(this.opts.hostProcRoot, '1/ns/net')), id)) return 'host';
    return undefined;
  }

  /**
   * Takes a pod out of the mesh: the in-pod rules (only if the pod still
   * runs), a ZDS delete to every ztunnel, the probe-set entries it owns,
   * then the cache entry, whose netns fd is released exactly once. The
   * entry stays (marked leaving, not offered to new ztunnels) until every
   * step succeeded, so a retry after a failure (or an abort between steps:
   * OperationAbortedError) can finish the job.
   */
  unenroll(pod: PodInfo, opts: UnenrollOptions): Promise<UnenrollResult> {
    if (typeof pod?.uid !== 'string' || pod.uid.length === 0 || !Array.isArray(pod.ips))
      return Promise.reject(new InvalidPodError('uid', 'unenroll needs the pod UID and its IPs'));
    const { signal } = opts;
    return this.track(pod.uid, async () => {
      const done: string[] = [];
      const boundary = () => {
        if (signal?.aborted) throw new OperationAbortedError(pod.uid, 'unenroll', done);
      };
      boundary();
      const entry = this.cache.get(pod.uid);
      if (opts.ifNetns) {
        const id = entry?.netns && !entry.netns.released ? entry.netns.ns.id : undefined;
        if (!id || id.dev !== opts.ifNetns.dev || id.ino !== opts.ifNetns.ino) return { rulesRemoved: false, held: entry !== undefined, skipped: true };
      }
      if (entry) entry.leaving = true;
      let rulesRemoved = false;
      if (!opts.podDeleted) {
        if (entry?.netns && !entry.netns.released) {
          await entry.netns.use((ns) => this.opts.rules.remove(ns, entry.pod));
          rulesRemoved = true;
          done.push('rules');
          boundary();
        } else {
          this.warn(`pod ${pod.uid}: no cached netns, in-pod rules not removed`);
        }
      }
      await this.opts.ztunnel.podDeleted(pod.uid);
      done.push('ztunnel');
      boundary();
      const { foreign } = await this.probes.removeOwned([...pod.ips, ...(entry?.pod.ips ?? [])], pod.uid);
      for (const f of foreign) this.warn(`probe set: ${f.ip} belongs to pod ${f.uid}, not ${pod.uid}; left in place`);
      this.cache.take(pod.uid)?.netns?.release();
      return { rulesRemoved, held: entry !== undefined };
    });
  }

  /** The cached pods a new ztunnel is given (netns → add, none → keep); leaving ones are not. */
  snapshot(): CacheEntry[] {
    return this.cache.snapshot().filter((e) => !e.leaving);
  }

  /**
   * Rebuilds state after a restart from the pods that should be enrolled:
   * reloads the probe set's owners from the kernel, re-opens each netns,
   * verifies its rules and re-applies only on drift (running pods' traffic
   * is not touched otherwise), refills the probe set and prunes stale
   * entries — unless the snapshot is incomplete (an invalid pod, a pod
   * without IPs or whose netns could not be opened), when only the entries
   * of owners that no longer exist are (`ownerExists`).
   * At most `concurrency` pods are worked on at once; entries of pods
   * enrolled meanwhile are never pruned.
   */
  async reconcile(items: ReconcileItem[], opts: ReconcileOptions = {}): Promise<ReconcileReport> {
    const mode = opts.rules ?? 'verify';
    if (mode !== 'verify' && mode !== 'keep') throw new TypeError(`reconcile rules must be 'verify' or 'keep', got ${JSON.stringify(mode)}`);
    const report: ReconcileReport = { pods: items.length, repaired: [], failed: [], probeEntries: 0, pruned: [], complete: true };
    const keep = new Set<string>();
    const refill: PodInfo[] = [];
    const fail = (uid: string, err: unknown) => {
      report.complete = false;
      report.failed.push({ uid, error: err instanceof Error ? err.message : String(err) });
    };
    await this.probes.load();
    await mapLimit(items, this.concurrency, async (item) => {
      const { pod } = item;
      try {
        validatePod(pod);
      } catch (err) {
        fail(uidOf(pod), err);
        return;
      }
      await this.track(pod.uid, async () => {
        if (pod.ips.length === 0) report.complete = false;
        const source = sourceOf(item);
        if (source === undefined) {
          this.cache.ensure(pod);
          report.complete = false;
        } else if ((await this.establish(pod, source, mode)).repaired) {
          report.repaired.push(pod.uid);
        }
        refill.push(pod);
        for (const ip of pod.ips) keep.add(ip);
      }).catch((err: unknown) => fail(pod.uid, err));
    });
    await this.refillProbes(refill, fail);
    if (report.complete) report.pruned = await this.probes.prune(keep, (uid) => this.cache.has(uid));
    else if (opts.ownerExists) report.pruned = await this.pruneOrphanProbes(opts.ownerExists);
    report.probeEntries = this.probes.size;  // the index mirrors the kernel after load + refill: no second dump
    return report;
  }

  /**
   * Removes the probe-set entries whose owner neither exists (`ownerExists`,
   * the synced informer's view) nor is held by the dataplane (a CNI ADD can
   * enroll a pod before the informer sees it), whatever any snapshot's
   * completeness. Returns the IPs removed.
   */
  pruneOrphanProbes(ownerExists: (uid: string) => boolean): Promise<string[]> {
    return this.probes.prune(new Set(), (uid) => this.cache.has(uid) || ownerExists(uid));
  }

  /**
   * Removes the probe-set entries `uid` owns when the dataplane holds no
   * entry for it (a queued DEL of a pod deleted while no agent ran), under
   * the pod's lock; a held pod is left to unenroll. Returns the IPs removed.
   */
  releaseProbes(uid: string): Promise<string[]> {
    if (typeof uid !== 'string' || uid.length === 0) return Promise.reject(new InvalidPodError('uid', 'must be a non-empty string'));
    return this.track(uid, async () => (this.cache.has(uid) ? [] : (await this.probes.removeOwned([], uid)).removed));
  }

  /**
   * The probe set's entries for the reconciled pods, in one backend call (a
   * fresh set after a reboot takes every pod's IPs at once), for pods still
   * enrolled by then. If that fails, pod by pod, so a failure names its pod.
   */
  private async refillProbes(pods: PodInfo[], fail: (uid: string, err: unknown) => void): Promise<void> {
    const live = (uid: string) => {
      const e = this.cache.get(uid);
      return e !== undefined && !e.leaving;
    };
    try {
      await this.probes.upsertMany(pods, live);
    } catch {
      await mapLimit(pods, this.concurrency, (pod) => this.track(pod.uid, async () => {
        if (live(pod.uid)) await this.probes.upsert(pod.ips, pod.uid);
      }).catch((err: unknown) => fail(pod.uid, err)));
    }
  }

  /** What differs from the enrolled state of one pod: rules, netns identity, ztunnel, probe set. */
  verify(pod: PodInfo, opts: { netnsPath?: string } = {}): Promise<PodDrift> {
    if (typeof pod?.uid !== 'string' || pod.uid.length === 0) return Promise.reject(new InvalidPodError('uid', 'must be a non-empty string'));
    return this.track(pod.uid, () => this.verifyLocked(pod, opts.netnsPath));
  }

  private async verifyLocked(pod: PodInfo, netnsPath: string | undefined): Promise<PodDrift> {
    const drift: string[] = [];
    const entry = this.cache.get(pod.uid);
    if (!entry) return { uid: pod.uid, ok: false, drift: ['pod is not enrolled'] };
    if (!entry.netns) {
      drift.push('no netns cached');
    } else {
      if (netnsPath !== undefined) {
        try {
          const st = statSync(netnsPath);
          if (st.ino !== entry.netns.ino) drift.push(`netns identity: ${netnsPath} is inode ${st.ino}, cached ${entry.netns.ino}`);
        } catch {
          drift.push(`netns identity: ${netnsPath} is gone (cached inode ${entry.netns.ino})`);
        }
      }
      const rules = await entry.netns.use((ns) => this.opts.rules.verify(ns, entry.pod));
      drift.push(...rules.drift);
    }
    if (this.opts.ztunnel.knows && !this.opts.ztunnel.knows(pod.uid)) drift.push('ztunnel: pod not acknowledged by any connection');
    drift.push(...this.probeDrift(entry.pod, await this.probeEntries()).drift);
    return { uid: pod.uid, ok: drift.length === 0, drift };
  }

  /**
   * Checks one enrolled pod and puts right what drifted, under the pod's
   * lock (an unenroll cannot interleave): in-pod rules re-applied, missing
   * probe-set entries re-added (an entry another pod owns is reported, not
   * taken), and the pod handed to ztunnel again when a ztunnel is connected
   * but does not hold it. A pod that is not enrolled, is leaving or has no
   * netns is not checked. `probeEntries` (IP → owner UID, as `probeEntries()`
   * returns) lets a sweep over many pods read the kernel set once.
   */
  repair(uid: string, opts: { probeEntries?: ReadonlyMap<string, string> } = {}): Promise<DriftRepair> {
    if (typeof uid !== 'string' || uid.length === 0) return Promise.reject(new InvalidPodError('uid', 'must be a non-empty string'));
    return this.track(uid, () => this.repairLocked(uid, opts.probeEntries));
  }

  /** How the pod's probe-set entries differ from `entries` (IP → owner): missing IPs, IPs another pod owns. */
  private probeDrift(pod: PodInfo, entries: ReadonlyMap<string, string>): { drift: string[]; missing: string[]; foreign: ProbeEntry[] } {
    const out = { drift: [] as string[], missing: [] as string[], foreign: [] as ProbeEntry[] };
    for (const ip of pod.ips) {
      if (!this.probes.backend.handles(ip)) continue;
      const owner = entries.get(canonicalIp(ip));
      if (owner === undefined) {
        out.drift.push(`probe set: ${ip} missing`);
        out.missing.push(ip);
      } else if (owner !== pod.uid) {
        out.drift.push(`probe set: ${ip} belongs to ${owner}`);
        out.foreign.push({ ip, uid: owner });
      }
    }
    return out;
  }

  /** The kernel probe set as IP (canonical) → owner UID. */
  async probeEntries(): Promise<Map<string, string>> {
    return new Map((await this.probes.list()).map((e) => [e.ip, e.uid]));
  }

  private async repairLocked(uid: string, probeEntries: ReadonlyMap<string, string> | undefined): Promise<DriftRepair> {
    const out: DriftRepair = { uid, checked: false, drift: [], repaired: [], failed: [] };
    const entry = this.cache.get(uid);
    const ref = entry?.netns;
    if (!entry || entry.leaving || !ref || ref.released) return out;
    out.checked = true;
    const { pod } = entry;
    const attempt = async (part: DriftPart, fn: () => Promise<unknown>) => {
      try {
        await fn();
        out.repaired.push(part);
      } catch (err) {
        out.failed.push({ part, error: err instanceof Error ? err.message : String(err) });
      }
    };
    const rules = await ref.use((ns) => this.opts.rules.verify(ns, pod));
    if (!rules.ok) {
      out.drift.push(...rules.drift);
      await attempt('rules', () => ref.use((ns) => this.opts.rules.apply(ns, pod)));
    }
    const probes = this.probeDrift(pod, probeEntries ?? await this.probeEntries());
    out.drift.push(...probes.drift);
    for (const f of probes.foreign) out.failed.push({ part: 'probe-set', error: `${f.ip} belongs to pod ${f.uid}` });
    const { missing } = probes;
    if (missing.length) await attempt('probe-set', () => this.probes.upsert(missing, uid, { force: true }));
    const zt = this.opts.ztunnel;
    if (zt.knows && !zt.knows(uid) && (zt.connected?.() ?? true)) {
      out.drift.push('ztunnel: pod not acknowledged by any connection');
      await attempt('ztunnel', () => ref.use((ns) => zt.podAdded(pod, ns)));
    }
    return out;
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

/** Where a pod's netns comes from: a handle (one reference borrowed from the caller), a path, or the cache. */
type NetnsSource = NetnsRef | string | undefined;

function sourceOf(o: { netns?: NetnsRef; netnsPath?: string }): NetnsSource {
  return o.netns ?? o.netnsPath;
}

/** The rejection of an enrollment whose signal fired. */
function abortedError(uid: string, stage: EnrollStage, signal: AbortSignal): EnrollError {
  const reason: unknown = signal.reason;
  return new EnrollError(uid, stage, true, reason instanceof Error ? reason : new Error('aborted by the caller'), ERR_ENROLL_ABORTED);
}

/** The UID of a pod whose info may be invalid, for error reports. */
function uidOf(pod: unknown): string {
  const uid = (pod as { uid?: unknown } | null)?.uid;
  return typeof uid === 'string' ? uid.slice(0, 128) : '';
}
