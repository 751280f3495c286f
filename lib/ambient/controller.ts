// The ambient controller (istio-cni.md §5.4, §5.6): informers for this node's
// pods and all namespaces feed pod keys (namespace/name) into one work queue;
// each key is decided from the cached pod and namespace (mesh/decideAmbient)
// and the dataplane is made to match: enroll + annotate
// `ambient.istio.io/redirection: enabled`, unenroll + remove the annotation,
// or unenroll a deleted pod. Enrollment failures become a Warning Event on the
// pod; retryable ones are retried with the queue's rate limiter (and the pod
// is annotated `pending`), non-retryable ones are dropped. The CNI path comes
// here too: addPodToMesh (ADD, with its deadline) and removePodFromMesh (DEL,
// GC, queued DELs), which takes a pod out wholly: dataplane, annotation and
// this controller's own entry.
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { KubeClient } from '../kube/client.js';
import { isNotFound } from '../kube/errors.js';
import { createPodEvent } from '../kube/events.js';
import type { Informer } from '../kube/informer.js';
import { annotatePodViaStatus, podIps, podKey } from '../kube/pods.js';
import { namespaceInformer, podInformer } from '../kube/resources.js';
import { REDIRECTION_ANNOTATION } from '../mesh/constants.js';
import { decideAmbient, type SelectionPolicy } from '../mesh/decision.js';
import { EnrollError, ERR_ENROLL_ABORTED, isEnrollAborted, OperationAbortedError } from '../dataplane/errors.js';
import type { PodInfo } from '../dataplane/types.js';
import type { NetnsRef } from '../dataplane/netns-ref.js';
import { KeyedLock } from '../util/keyed-lock.js';
import { NonRetryable, WorkQueue, type DropReason } from '../kube/work-queue.js';

export { REDIRECTION_ANNOTATION };
export const EVENT_COMPONENT = 'istio-cni-node';

/** What the controller needs of the dataplane (lib/dataplane Dataplane satisfies it). */
export interface DataplaneLike {
  /**
   * Dataplane.enroll: `signal` aborts it (EnrollError ERR_ENROLL_ABORTED,
   * what it did undone); `ifUnheld` makes it a no-op when the pod is
   * enrolled with a netns by the time it runs (a drift re-enrollment must not
   * replace a sandbox the CNI ADD just enrolled).
   */
  enroll(pod: PodInfo, opts?: { netns?: NetnsRef; netnsPath?: string; signal?: AbortSignal; ifUnheld?: boolean }): Promise<unknown>;
  /** Dataplane.unenroll (resolves with its UnenrollResult). */
  unenroll(pod: PodInfo, opts: { podDeleted: boolean; signal?: AbortSignal; ifNetns?: { dev: number; ino: number } }): Promise<unknown>;
  /** Any entry the dataplane has for the UID (also a placeholder or a half-removed one), for a removal. */
  held?(uid: string): PodInfo | undefined;
  /**
   * The pod as the dataplane holds it, if it is enrolled with a netns (by the
   * CNI path, the startup snapshot or this controller): such a pod is not
   * enrolled again while its IPs are unchanged.
   */
  enrolled?(uid: string): PodInfo | undefined;
}

export type InformerEventType = 'add' | 'update' | 'delete';

/**
 * A pod's netns (production: the proc scan's proved handle, lib/dataplane/proc-scan.ts); a path
 * only for fixtures whose netns is a bind mount; undefined: not found (the cached handle is used,
 * if any). A returned handle is the controller's: it releases it, once, after the enrollment.
 */
export type NetnsResolver = (pod: V1Pod) => PodNetnsSource | Promise<PodNetnsSource>;

/** An open handle (borrowed: whoever opened it releases it), a path the dataplane opens, or none (the cached one). */
export type PodNetnsSource = NetnsRef | string | undefined;

/** Releases a resolver's handle (a path owns nothing). */
function releaseNetns(n: PodNetnsSource): void {
  if (typeof n === 'object' && n !== null) n.release();
}

export interface AmbientControllerOptions {
  client: KubeClient;
  nodeName: string;
  policy: SelectionPolicy;
  dataplane: DataplaneLike;
  resolveNetns: NetnsResolver;
  /** Informer watch timeout (seconds); the informers' default otherwise. */
  watchTimeoutSeconds?: number;
  /** Diagnostics (failures that are retried or dropped, missing namespaces...); `pod` is namespace/name. */
  log?: (level: 'info' | 'warn' | 'error', message: string, fields?: { pod?: string; error?: unknown }) => void;
  /** Every informer event received (`nodeagent_reconcile_events_total{type}`). */
  onEvent?: (type: InformerEventType, resource: 'pods' | 'namespaces') => void;
}

export interface ControllerStats {
  enrolled: number;
  unenrolled: number;
  deleted: number;
  enrollFailures: number;
  /** Pods removePodFromMesh took out (CNI DEL, GC, queued DEL). */
  removed: number;
}

/** Why the CNI path takes a pod out of the mesh. */
export type MeshRemovalReason = 'cni-del' | 'cni-gc' | 'queued-del';
const REMOVAL_REASONS: ReadonlySet<string> = new Set<MeshRemovalReason>(['cni-del', 'cni-gc', 'queued-del']);

/** What removePodFromMesh did. */
export interface MeshRemoval {
  uid: string;
  /** The dataplane was told to take the pod out (this call or an earlier, interrupted one). */
  unenrolled: boolean;
  /** The dataplane had an entry for the pod. */
  held: boolean;
  /** The in-pod rules were removed (the dataplane held the pod's netns). */
  rulesRemoved: boolean;
  /**
   * The redirection annotation: 'cleared' (patched off), 'none' (the pod had
   * none), 'gone' (no such pod in the informer cache), 'other-pod' (the name
   * now belongs to another UID: left alone).
   */
  annotation: 'cleared' | 'none' | 'gone' | 'other-pod';
  /** `ifNetns` was given and the dataplane held the pod in another netns (or none): nothing was done. */
  skipped?: true;
}

/** What reenroll found and did. */
export type ReenrollOutcome = 'enrolled' | 'held' | 'no-netns' | 'not-selected';

/** A removal that got past the dataplane but not past the annotation: the next attempt starts there. */
interface Removal {
  info: PodInfo;
  dataplane?: { held: boolean; rulesRemoved: boolean };
}

export { podIps };

/** The dataplane's view of a pod. */
export function podInfoOf(pod: V1Pod, ips: string[] = podIps(pod)): PodInfo {
  const m = pod.metadata ?? {};
  const info: PodInfo = { uid: m.uid ?? '', name: m.name ?? '', namespace: m.namespace ?? '', ips };
  if (pod.spec?.serviceAccountName) info.serviceAccount = pod.spec.serviceAccountName;
  if (m.annotations) info.annotations = { ...m.annotations };
  return info;
}

const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().join(',') === [...b].sort().join(',');

export class AmbientController {
  readonly pods: Informer<V1Pod>;
  readonly namespaces: Informer<V1Namespace>;
  readonly queue: WorkQueue<string>;
  readonly stats: ControllerStats = { enrolled: 0, unenrolled: 0, deleted: 0, enrollFailures: 0, removed: 0 };
  private readonly opts: AmbientControllerOptions;
  private readonly log: NonNullable<AmbientControllerOptions['log']>;
  /** Pods this controller enrolled, by UID, with what it enrolled them with (their IPs for removal). */
  private readonly enrolled = new Map<string, PodInfo>();
  /** Pods deleted from the cache and not handled yet, by key. */
  private readonly gone = new Map<string, V1Pod>();
  /** The stage of the last Warning Event per pod UID, so a retry loop does not emit one per attempt. */
  private readonly warned = new Map<string, string>();
  /** Removals not finished yet, by UID (see removePodFromMesh). */
  private readonly removing = new Map<string, Removal>();
  /** One removal per UID at a time. */
  private readonly removals = new KeyedLock();
  private readonly unsubscribe: Array<() => void> = [];
  private ready = false;
  private started = false;

  constructor(opts: AmbientControllerOptions) {
    this.opts = opts;
    this.log = opts.log ?? (() => undefined);
    const informerOpts = opts.watchTimeoutSeconds !== undefined ? { watchTimeoutSeconds: opts.watchTimeoutSeconds } : {};
    this.pods = podInformer(opts.client, { nodeName: opts.nodeName, ...informerOpts });
    this.namespaces = namespaceInformer(opts.client, informerOpts);
    this.queue = new WorkQueue<string>({
      name: 'ambient',
      process: (key) => this.reconcile(key),
      onRetry: (key, err, attempt, delayMs) => this.log('warn', `ambient: failed (attempt ${attempt}), retry in ${delayMs} ms: ${(err as Error)?.message ?? err}`, { pod: key, error: err }),
      onDrop: (key, err, reason: DropReason) => this.log('error', `ambient: dropped (${reason}): ${(err as Error)?.message ?? err}`, { pod: key, error: err }),
    });
  }

  /** Starts both informers and begins work: sync() then run(). */
  async start(): Promise<void> {
    await this.sync();
    this.run();
  }

  /**
   * Starts both informers; resolves when both have synced. Events only fill
   * the caches until run(): the agent restores its startup snapshot in between.
   */
  async sync(): Promise<void> {
    if (this.started) throw new Error('AmbientController: already started');
    this.started = true;
    const enqueue = (key: string) => { if (this.ready) this.queue.add(key); };
    const count = (type: InformerEventType, resource: 'pods' | 'namespaces') => this.opts.onEvent?.(type, resource);
    this.unsubscribe.push(
      this.pods.on('add', (p) => { count('add', 'pods'); enqueue(podKey(p)); }),
      this.pods.on('update', (p) => { count('update', 'pods'); enqueue(podKey(p)); }),
      this.pods.on('delete', (p) => {
        count('delete', 'pods');
        this.gone.set(podKey(p), p);
        enqueue(podKey(p));
      }),
      this.pods.on('error', (err) => this.log('warn', `ambient: pod informer: ${(err as Error)?.message ?? String(err)}`, { error: err })),
      this.namespaces.on('add', (ns) => { count('add', 'namespaces'); if (this.ready) this.enqueueNamespace(ns.metadata?.name); }),
      this.namespaces.on('update', (ns, old) => {
        count('update', 'namespaces');
        if (this.ready && JSON.stringify(ns.metadata?.labels ?? {}) !== JSON.stringify(old.metadata?.labels ?? {}))
          this.enqueueNamespace(ns.metadata?.name);
      }),
      this.namespaces.on('delete', () => count('delete', 'namespaces')),
      this.namespaces.on('error', (err) => this.log('warn', `ambient: namespace informer: ${(err as Error)?.message ?? String(err)}`, { error: err })),
    );
    await Promise.all([this.pods.start().synced, this.namespaces.start().synced]);
  }

  /** Queues every cached pod (one pass covers all events so far) and handles events from now on. */
  run(): void {
    if (!this.started) throw new Error('AmbientController: sync() first');
    if (this.ready) return;
    this.ready = true;
    for (const p of this.pods.list()) this.queue.add(podKey(p));
    for (const key of this.gone.keys()) this.queue.add(key);
  }

  /** Stops the informers and the queue (waiting for a run in flight, up to timeoutMs). */
  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    this.ready = false;
    for (const u of this.unsubscribe.splice(0)) u();
    await Promise.all([this.pods.stop(), this.namespaces.stop()]);
    await this.queue.shutdown(opts);
  }

  /** Whether the controller enrolled this pod UID (and has not unenrolled it since). */
  isEnrolled(uid: string): boolean {
    return this.enrolled.has(uid);
  }

  /** Whether the pod is selected for ambient, judged with the cached namespace (false when not cached). */
  selects(pod: V1Pod): boolean {
    const ns = this.namespaces.get(pod.metadata?.namespace ?? '');
    if (!ns) return false;
    try {
      return decideAmbient(pod, ns, this.opts.policy).enroll;
    } catch {
      return false;
    }
  }

  /** Whether this controller still has work for the pod (queued, running or waiting to retry). */
  busy(pod: V1Pod): boolean {
    return this.queue.has(podKey(pod));
  }

  /** Enrolled by this controller, or held by the dataplane (CNI path, startup snapshot). */
  holds(uid: string): boolean {
    return this.known(uid) !== undefined;
  }

  /** What this controller or the dataplane enrolled for a UID (their IPs for removal). */
  private known(uid: string): PodInfo | undefined {
    return this.enrolled.get(uid) ?? this.opts.dataplane.enrolled?.(uid);
  }

  private enqueueNamespace(name: string | undefined): void {
    if (!name) return;
    for (const p of this.pods.list()) if (p.metadata?.namespace === name) this.queue.add(podKey(p));
  }

  /** One key: the work queue calls this; a rejection is retried, NonRetryable is dropped. */
  private async reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const pod = this.pods.get(name, namespace);
    const gone = this.gone.get(key);
    if (gone && (!pod || pod.metadata?.uid !== gone.metadata?.uid)) {
      await this.removeDeleted(gone);
      if (this.gone.get(key) === gone) this.gone.delete(key);
    }
    if (!pod) return;
    const ns = this.namespaces.get(namespace);
    if (!ns) {
      this.log('warn', `ambient: namespace ${namespace} not in cache; skipped`, { pod: key });
      return;
    }
    const uid = pod.metadata?.uid ?? '';
    const annotation = pod.metadata?.annotations?.[REDIRECTION_ANNOTATION];
    const known = this.known(uid);
    const isEnrolled = annotation === 'enabled' || known !== undefined;
    const isPartial = annotation === 'pending';
    const decision = decideAmbient(pod, ns, this.opts.policy);

    if (!decision.enroll) {
      if (!decision.unenroll || !(isEnrolled || isPartial)) return;
      const terminal = decision.reason === 'pod-terminal';
      // A terminal pod may have lost its IPs: remove with the ones it was enrolled with.
      const info = known ?? podInfoOf(pod);
      await this.opts.dataplane.unenroll(info, { podDeleted: terminal });
      this.enrolled.delete(uid);
      this.warned.delete(uid);
      this.stats.unenrolled++;
      this.log('info', `ambient: pod removed from the mesh (${decision.reason})`, { pod: key });
      await this.setAnnotation(pod, null, !terminal);
      return;
    }

    // Informer path: only running pods with IPs (new pods come through the CNI plugin).
    const ips = podIps(pod);
    if (pod.status?.phase !== 'Running' || ips.length === 0) return;
    // Nothing to do only while the dataplane still holds the pod (when it can tell): someone else may have taken it out.
    const held = this.opts.dataplane.enrolled ? this.opts.dataplane.enrolled(uid) : known;
    if (held && annotation === 'enabled' && sameSet(held.ips, ips)) return;

    const netns = await this.opts.resolveNetns(pod);
    try {
      await this.addPodToMesh(pod, ips, netns);
    } catch (err) {
      if (err instanceof EnrollError && !err.retryable) throw new NonRetryable(`pod ${key}: ${err.message}`, { cause: err });
      throw err;
    } finally {
      releaseNetns(netns);
    }
  }

  /**
   * Enrolls a selected pod with these IPs (in `netns`: a proved handle the
   * caller keeps and releases, or a bind-mount path such as CNI_NETNS; else
   * the cached one) and annotates it `enabled` (§5.6). On failure: a Warning
   * Event on the pod (once per failing stage), and for a retryable failure
   * (the dataplane keeps the pod cached; the next ztunnel snapshot delivers
   * it) the annotation `pending`; then rejects with the dataplane's error.
   * Both the CNI endpoint and the work queue come here.
   *
   * `signal` (the CNI ADD's deadline) cancels the enrollment: it stops at the
   * next step boundary, what it did is undone (rules, ZDS add → del, probe
   * entries, cache entry; the annotation is the last step, so it is never
   * left set) and it rejects with EnrollError ERR_ENROLL_ABORTED
   * (retryable), with no Event and no `pending` annotation. A pod the
   * dataplane already held in the same netns stays enrolled as it was.
   */
  async addPodToMesh(pod: V1Pod, ips: string[], netns: PodNetnsSource, opts: { signal?: AbortSignal; ztunnelConnectWaitMs?: number } = {}): Promise<void> {
    await this.enrollPod(pod, ips, netns, opts);
  }

  /** addPodToMesh; resolves false when `ifUnheld` found the pod enrolled already (annotated all the same). */
  private async enrollPod(pod: V1Pod, ips: string[], netns: PodNetnsSource, opts: { signal?: AbortSignal; ifUnheld?: boolean; ztunnelConnectWaitMs?: number }): Promise<boolean> {
    const key = podKey(pod);
    const uid = pod.metadata?.uid ?? '';
    const annotation = pod.metadata?.annotations?.[REDIRECTION_ANNOTATION];
    const known = this.known(uid);
    const heldBefore = this.opts.dataplane.enrolled?.(uid) !== undefined;
    const info = podInfoOf(pod, ips);
    const { signal } = opts;
    let skipped = false;
    try {
      const r = await this.opts.dataplane.enroll(info, {
        ...(typeof netns === 'string' ? { netnsPath: netns } : netns ? { netns } : {}), ...(signal ? { signal } : {}), ...(opts.ifUnheld ? { ifUnheld: true } : {}),
        ...(opts.ztunnelConnectWaitMs ? { ztunnelConnectWaitMs: opts.ztunnelConnectWaitMs } : {}),
      });
      skipped = (r as { skipped?: unknown } | undefined)?.skipped === true;
      // The deadline fired while the dataplane finished: undo it rather than annotate a pod the runtime will ADD again.
      if (signal?.aborted && !heldBefore) {
        // A failed undo keeps the dataplane's entry (leaving): the next ADD, DEL or GC finishes it.
        await this.opts.dataplane.unenroll(info, { podDeleted: false })
          .catch((err: unknown) => this.log('warn', `ambient: undoing an aborted enrollment: ${(err as Error)?.message ?? err}`, { pod: key, error: err }));
        throw new EnrollError(uid, 'probe-set', true, signal.reason instanceof Error ? signal.reason : new Error('aborted by the caller'), ERR_ENROLL_ABORTED);
      }
    } catch (err) {
      if (isEnrollAborted(err)) {
        // Cancelled, not failed: the caller retries; the dataplane undid its part.
        if (!heldBefore) this.enrolled.delete(uid);
        this.log('info', `ambient: enrollment aborted at stage ${err.stage}`, { pod: key, error: err });
        throw err;
      }
      this.stats.enrollFailures++;
      const stage = err instanceof EnrollError ? err.stage : 'unknown';
      const retryable = err instanceof EnrollError ? err.retryable : true;
      const reason = err instanceof Error ? err.message : String(err);
      this.log(retryable ? 'warn' : 'error', `ambient: enrollment failed at stage ${stage}: ${reason}`, { pod: key, error: err });
      if (this.warned.get(uid) !== stage) {
        this.warned.set(uid, stage);
        await this.warnEvent(pod, `enrollment failed at stage ${stage}${retryable ? ' (will retry)' : ''}: ${reason}`);
      }
      if (!retryable) throw err;
      this.enrolled.set(uid, info);
      if (annotation !== 'pending') await this.setAnnotation(pod, 'pending', true);
      throw err;
    }
    this.enrolled.set(uid, info);
    this.warned.delete(uid);
    if (!skipped) {
      this.stats.enrolled++;
      this.log('info', known ? 'ambient: pod re-enrolled' : 'ambient: pod enrolled', { pod: key });
    }
    if (annotation !== 'enabled') await this.setAnnotation(pod, 'enabled', true);
    return !skipped;
  }

  /**
   * Takes a pod out of the mesh for the CNI path (DEL of the sandbox the
   * dataplane enrolled, GC, a DEL queued while the agent was down), wholly
   * or so that the next call finishes it: the dataplane (in-pod rules when
   * it holds the pod's netns, ZDS del to every ztunnel, the probe-set
   * entries, its cache entry; a half-done unenroll keeps its entry), this
   * controller's enrolled/pending entry, then the redirection annotation,
   * removed as the controller's own unenroll does (only on the pod with this
   * UID). A step that fails (or `signal` firing between steps:
   * OperationAbortedError) rejects and is remembered; calling again resumes
   * after the last step that succeeded. A UID nothing knows as meshed (no
   * dataplane or controller entry, no `enabled`/`pending` annotation) is
   * left alone: no ZDS traffic for pods that were never in the mesh.
   * Serialised per UID.
   */
  removePodFromMesh(uid: string, opts: { reason: MeshRemovalReason; signal?: AbortSignal; ifNetns?: { dev: number; ino: number } }): Promise<MeshRemoval> {
    if (typeof uid !== 'string' || uid.length === 0) return Promise.reject(new TypeError('removePodFromMesh: uid must be a non-empty string'));
    if (!REMOVAL_REASONS.has(opts?.reason)) return Promise.reject(new TypeError(`removePodFromMesh: reason must be one of ${[...REMOVAL_REASONS].join(', ')}`));
    return this.removals.run(uid, () => this.removeLocked(uid, opts.reason, opts.signal, opts.ifNetns));
  }

  // `ifNetns`: only while the dataplane holds the pod in that netns, checked under the dataplane's
  // own per-pod lock (an ADD of a new sandbox serialises there, not on this controller's lock).
  private async removeLocked(uid: string, reason: MeshRemovalReason, signal: AbortSignal | undefined, ifNetns?: { dev: number; ino: number }): Promise<MeshRemoval> {
    const done: string[] = [];
    const boundary = () => {
      if (signal?.aborted) throw new OperationAbortedError(uid, 'remove', done);
    };
    boundary();
    let removal = this.removing.get(uid);
    const info = removal?.info ?? this.enrolled.get(uid) ?? this.opts.dataplane.held?.(uid) ?? this.opts.dataplane.enrolled?.(uid);
    const pod = this.podByUid(uid, info);
    const annotation = pod?.metadata?.annotations?.[REDIRECTION_ANNOTATION];
    const meshed = info ?? (pod && (annotation === 'enabled' || annotation === 'pending') ? podInfoOf(pod) : undefined);
    const out: MeshRemoval = { uid, unenrolled: false, held: false, rulesRemoved: false, annotation: pod ? 'none' : 'gone' };
    if (!meshed) return out;
    if (ifNetns && !removal?.dataplane) {
      const r = (await this.opts.dataplane.unenroll(meshed, { podDeleted: false, ifNetns, ...(signal ? { signal } : {}) })) as { held?: boolean; rulesRemoved?: boolean; skipped?: true } | undefined;
      if (r?.skipped) return { ...out, held: r.held ?? false, skipped: true };
      (removal ??= { info: meshed }).dataplane = { held: r?.held ?? true, rulesRemoved: r?.rulesRemoved ?? false };
    }
    if (!removal) this.removing.set(uid, removal = { info: meshed });
    else this.removing.set(uid, removal);
    if (!removal.dataplane) {
      const r = (await this.opts.dataplane.unenroll(meshed, { podDeleted: false, ...(signal ? { signal } : {}) })) as { held?: boolean; rulesRemoved?: boolean } | undefined;
      removal.dataplane = { held: r?.held ?? true, rulesRemoved: r?.rulesRemoved ?? false };
    }
    out.unenrolled = true;
    out.held = removal.dataplane.held;
    out.rulesRemoved = removal.dataplane.rulesRemoved;
    done.push('dataplane');
    this.enrolled.delete(uid);
    this.warned.delete(uid);
    boundary();
    if (!pod) {
      out.annotation = this.pods.get(meshed.name, meshed.namespace) ? 'other-pod' : 'gone';
    } else if (annotation !== undefined) {
      await this.setAnnotation(pod, null, true, signal);
      out.annotation = 'cleared';
    }
    this.removing.delete(uid);
    this.stats.removed++;
    this.log('info', `ambient: pod removed from the mesh (${reason})`, { pod: pod ? podKey(pod) : `${meshed.namespace}/${meshed.name}` });
    return out;
  }

  /** The cached pod with this UID (looked up by name when the dataplane or controller knows it). */
  private podByUid(uid: string, info: PodInfo | undefined): V1Pod | undefined {
    if (info?.name && info.namespace) {
      const p = this.pods.get(info.name, info.namespace);
      return p?.metadata?.uid === uid ? p : undefined;
    }
    return this.pods.list().find((p) => p.metadata?.uid === uid);
  }

  /**
   * Running pods with IPs that the policy selects (whatever their
   * annotation), that no queued work is pending for, and that the dataplane
   * does not hold with a netns: out of the mesh although they should be in
   * it (the drift check re-enrolls them). Empty before run() and when the
   * dataplane cannot tell (no `enrolled`).
   */
  unheldPods(): V1Pod[] {
    const enrolled = this.opts.dataplane.enrolled;
    if (!enrolled || !this.ready) return [];
    return this.pods.list().filter((p) => {
      const uid = p.metadata?.uid;
      if (!uid || p.status?.phase !== 'Running' || podIps(p).length === 0) return false;
      if (this.busy(p) || this.removing.has(uid) || enrolled.call(this.opts.dataplane, uid) !== undefined) return false;
      return this.selects(p);
    });
  }

  /**
   * Puts an unheld pod back (as the informer path would: netns resolved,
   * enrolled, annotated), after checking again that the cached pod with this
   * UID is Running and selected and the dataplane does not hold it; the
   * dataplane re-checks under the pod's lock, so a sandbox the CNI ADD
   * enrolled meanwhile is never replaced. 'no-netns': the netns was not
   * found, nothing was done. Rejects as addPodToMesh does.
   */
  async reenroll(pod: V1Pod, opts: { signal?: AbortSignal } = {}): Promise<ReenrollOutcome> {
    const uid = pod.metadata?.uid ?? '';
    const current = this.pods.get(pod.metadata?.name ?? '', pod.metadata?.namespace ?? '');
    const ips = current ? podIps(current) : [];
    if (!current || !uid || current.metadata?.uid !== uid || current.status?.phase !== 'Running' || ips.length === 0 || !this.selects(current)) return 'not-selected';
    if (this.opts.dataplane.enrolled?.(uid) !== undefined) return 'held';
    const netns = await this.opts.resolveNetns(current);
    if (netns === undefined) return 'no-netns';
    try {
      return (await this.enrollPod(current, ips, netns, { ...opts, ifUnheld: true })) ? 'enrolled' : 'held';
    } finally {
      releaseNetns(netns);
    }
  }

  /** Spec §5.4 Delete: the pod from the event; removed if enrolled, pending or selected. */
  private async removeDeleted(pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid ?? '';
    const known = this.known(uid);
    const annotation = pod.metadata?.annotations?.[REDIRECTION_ANNOTATION];
    let selected = false;
    const ns = this.namespaces.get(pod.metadata?.namespace ?? '');
    if (ns) {
      try {
        const d = decideAmbient(pod, ns, this.opts.policy);
        selected = d.enroll || d.reason === 'pod-deleting';
      } catch {
        selected = false;
      }
    }
    if (!known && annotation !== 'enabled' && annotation !== 'pending' && !selected) return;
    if (!uid) return;
    const info = known ?? podInfoOf(pod);
    await this.opts.dataplane.unenroll(info, { podDeleted: true });
    this.enrolled.delete(uid);
    this.warned.delete(uid);
    this.stats.deleted++;
    this.log('info', 'ambient: deleted pod removed from the mesh', { pod: podKey(pod) });
  }

  private async setAnnotation(pod: V1Pod, value: 'enabled' | 'pending' | null, mustSucceed: boolean, signal?: AbortSignal): Promise<void> {
    const ref = { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' };
    try {
      await annotatePodViaStatus(this.opts.client, ref, { annotations: { [REDIRECTION_ANNOTATION]: value } }, signal ? { signal } : {});
    } catch (err) {
      if (isNotFound(err)) return;
      if (mustSucceed) throw err;
      this.log('warn', `ambient: annotating: ${(err as Error).message}`, { pod: `${ref.namespace}/${ref.name}`, error: err });
    }
  }

  private async warnEvent(pod: V1Pod, message: string): Promise<void> {
    try {
      await createPodEvent(this.opts.client, pod, { type: 'Warning', reason: 'EnrollFailed', message, component: EVENT_COMPONENT, host: this.opts.nodeName });
    } catch (err) {
      this.log('warn', `ambient: posting an event: ${(err as Error).message}`, { pod: podKey(pod), error: err });
    }
  }
}
