// The ambient controller (istio-cni.md §5.4, §5.6): informers for this node's
// pods and all namespaces feed pod keys (namespace/name) into one work queue;
// each key is decided from the cached pod and namespace (mesh/decideAmbient)
// and the dataplane is made to match: enroll + annotate
// `ambient.istio.io/redirection: enabled`, unenroll + remove the annotation,
// or unenroll a deleted pod. Enrollment failures become a Warning Event on the
// pod; retryable ones are retried with the queue's rate limiter (and the pod
// is annotated `pending`), non-retryable ones are dropped.
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { KubeClient } from '../kube/client.js';
import { isNotFound } from '../kube/errors.js';
import { createPodEvent } from '../kube/events.js';
import type { Informer } from '../kube/informer.js';
import { annotatePodViaStatus } from '../kube/pods.js';
import { namespaceInformer, podInformer } from '../kube/resources.js';
import { REDIRECTION_ANNOTATION } from '../mesh/constants.js';
import { decideAmbient, type SelectionPolicy } from '../mesh/decision.js';
import { EnrollError } from '../dataplane/errors.js';
import type { PodInfo } from '../dataplane/types.js';
import { NonRetryable, WorkQueue, type DropReason } from './work-queue.js';

export { REDIRECTION_ANNOTATION };
export const EVENT_COMPONENT = 'istio-cni-node';

/** What the controller needs of the dataplane (lib/dataplane Dataplane satisfies it). */
export interface DataplaneLike {
  enroll(pod: PodInfo, opts?: { netnsPath?: string }): Promise<unknown>;
  unenroll(pod: PodInfo, opts: { podDeleted: boolean }): Promise<unknown>;
  /**
   * The pod as the dataplane holds it, if it is enrolled with a netns (by the
   * CNI path, the startup snapshot or this controller): such a pod is not
   * enrolled again while its IPs are unchanged.
   */
  enrolled?(uid: string): PodInfo | undefined;
}

export type InformerEventType = 'add' | 'update' | 'delete';

/** Where a pod's netns is (production: a /proc scan); undefined: not found (the cached handle is used, if any). */
export type NetnsResolver = (pod: V1Pod) => string | undefined | Promise<string | undefined>;

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
}

/** status.podIPs, else status.podIP. */
export function podIps(pod: V1Pod): string[] {
  const ips = (pod.status?.podIPs ?? []).map((p) => p.ip).filter((ip): ip is string => typeof ip === 'string' && ip.length > 0);
  if (ips.length === 0 && pod.status?.podIP) ips.push(pod.status.podIP);
  return ips;
}

/** The dataplane's view of a pod. */
export function podInfoOf(pod: V1Pod, ips: string[] = podIps(pod)): PodInfo {
  const m = pod.metadata ?? {};
  const info: PodInfo = { uid: m.uid ?? '', name: m.name ?? '', namespace: m.namespace ?? '', ips };
  if (pod.spec?.serviceAccountName) info.serviceAccount = pod.spec.serviceAccountName;
  if (m.annotations) info.annotations = { ...m.annotations };
  return info;
}

const keyOf = (o: { metadata?: { namespace?: string; name?: string } }) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().join(',') === [...b].sort().join(',');

export class AmbientController {
  readonly pods: Informer<V1Pod>;
  readonly namespaces: Informer<V1Namespace>;
  readonly queue: WorkQueue<string>;
  readonly stats: ControllerStats = { enrolled: 0, unenrolled: 0, deleted: 0, enrollFailures: 0 };
  private readonly opts: AmbientControllerOptions;
  private readonly log: NonNullable<AmbientControllerOptions['log']>;
  /** Pods this controller enrolled, by UID, with what it enrolled them with (their IPs for removal). */
  private readonly enrolled = new Map<string, PodInfo>();
  /** Pods deleted from the cache and not handled yet, by key. */
  private readonly gone = new Map<string, V1Pod>();
  /** The stage of the last Warning Event per pod UID, so a retry loop does not emit one per attempt. */
  private readonly warned = new Map<string, string>();
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
      this.pods.on('add', (p) => { count('add', 'pods'); enqueue(keyOf(p)); }),
      this.pods.on('update', (p) => { count('update', 'pods'); enqueue(keyOf(p)); }),
      this.pods.on('delete', (p) => {
        count('delete', 'pods');
        this.gone.set(keyOf(p), p);
        enqueue(keyOf(p));
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
    for (const p of this.pods.list()) this.queue.add(keyOf(p));
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
    return this.queue.has(keyOf(pod));
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
    for (const p of this.pods.list()) if (p.metadata?.namespace === name) this.queue.add(keyOf(p));
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
    if (known && annotation === 'enabled' && sameSet(known.ips, ips)) return;

    const netnsPath = await this.opts.resolveNetns(pod);
    try {
      await this.addPodToMesh(pod, ips, netnsPath);
    } catch (err) {
      if (err instanceof EnrollError && !err.retryable) throw new NonRetryable(`pod ${key}: ${err.message}`, { cause: err });
      throw err;
    }
  }

  /**
   * Enrolls a selected pod with these IPs (in its netns at `netnsPath`, else
   * the cached one) and annotates it `enabled` (§5.6). On failure: a Warning
   * Event on the pod (once per failing stage), and for a retryable failure
   * (the dataplane keeps the pod cached; the next ztunnel snapshot delivers
   * it) the annotation `pending`; then rejects with the dataplane's error.
   * Both the CNI endpoint and the work queue come here.
   */
  async addPodToMesh(pod: V1Pod, ips: string[], netnsPath: string | undefined): Promise<void> {
    const key = keyOf(pod);
    const uid = pod.metadata?.uid ?? '';
    const annotation = pod.metadata?.annotations?.[REDIRECTION_ANNOTATION];
    const known = this.known(uid);
    const info = podInfoOf(pod, ips);
    try {
      await this.opts.dataplane.enroll(info, netnsPath !== undefined ? { netnsPath } : {});
    } catch (err) {
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
    this.stats.enrolled++;
    this.log('info', known ? 'ambient: pod re-enrolled' : 'ambient: pod enrolled', { pod: key });
    if (annotation !== 'enabled') await this.setAnnotation(pod, 'enabled', true);
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
    this.log('info', 'ambient: deleted pod removed from the mesh', { pod: keyOf(pod) });
  }

  private async setAnnotation(pod: V1Pod, value: 'enabled' | 'pending' | null, mustSucceed: boolean): Promise<void> {
    const ref = { namespace: pod.metadata?.namespace ?? '', name: pod.metadata?.name ?? '' };
    try {
      await annotatePodViaStatus(this.opts.client, ref, { annotations: { [REDIRECTION_ANNOTATION]: value } });
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
      this.log('warn', `ambient: posting an event: ${(err as Error).message}`, { pod: keyOf(pod), error: err });
    }
  }
}
