// The repair controller (spec §4, Istio's cni/pkg/repair): a pod informer over this node's pods
// (REPAIR_FIELD_SELECTORS + spec.nodeName, REPAIR_LABEL_SELECTORS) feeds namespace/name keys into
// a work queue (at most 5 runs per key). A broken pod (predicate.ts) gets the first enabled action:
//
// - repair: find its netns (the injected resolver; the agent passes its /proc scan) and program
//   the sidecar rules there (lib/cni/sidecar.ts programSidecar, iptables or nftables); the pod
//   recovers on its next init-container restart. A pod already repaired with the same UID is
//   skipped (in memory, forgotten when the pod goes).
// - delete: DELETE with preconditions {uid, resourceVersion}, at most REPAIR_DELETE_RATE per minute,
//   evenly spaced (podwire; upstream is unlimited): over the limit the key is queued again for
//   when the next delete is allowed, never deleted in a burst. Event DeleteBrokenPod.
// - label: merge patch of the label through pods/status, unless the label is there. Event
//   LabelBrokenPod.
//
// Beyond upstream, with the optional `ambient` hook: a Running pod that should be enrolled in
// ambient but has stayed unenrolled for REPAIR_AMBIENT_GRACE (the agent's own enrollment goes
// first) is enrolled in place (type=repair); when enrolling fails non-retryably it is deleted or
// labelled per the same options. Every REPAIR_RESYNC_INTERVAL the pods that still need work (broken
// and not repaired or labelled, or unenrolled) are queued again: a repair given up after 5 runs, or
// a pod whose netns appeared only later, gets another chance without waiting for a pod event.
// Every outcome is reported as (type, result) for `istio_cni_repair_pods_repaired_total`. A pod
// bound to another node is never acted on.
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeClient } from '../kube/client.js';
import { missingAccess } from '../kube/access.js';
import { accessOf } from '../kube/permissions.js';
import { isConflict, isKubeError, isNotFound } from '../kube/errors.js';
import { createPodEvent } from '../kube/events.js';
import { Informer } from '../kube/informer.js';
import { podPath } from '../kube/paths.js';
import { annotatePodViaStatus, podIps, podKey } from '../kube/pods.js';
import { PODS, stripManagedFields } from '../kube/resources.js';
import { programSidecar as defaultProgramSidecar, sidecarEligibility } from '../cni/sidecar.js';
import { EnrollError } from '../dataplane/errors.js';
import type { NetnsRef } from '../dataplane/netns-ref.js';
import { isNonRetryable, NonRetryable, realClock, WorkQueue, type Clock, type DropReason } from '../kube/work-queue.js';
import { isResourceExhaustion } from '../util/resource-errors.js';
import type { RepairResult, RepairType } from './results.js';
import type { Backend } from '../redirect/apply.js';
import { isBrokenPod, type BrokenPodFilter } from './predicate.js';
import type { RepairConfig } from './config.js';

export type { RepairResult, RepairType };

/** Event source component (spec §4). */
export const REPAIR_COMPONENT = 'cni-repair';
/** Upstream's work queue attempt limit. */
export const REPAIR_MAX_ATTEMPTS = 5;

/** What RepairController needs of the configuration (lib/repair/config.ts RepairConfig satisfies it). */
export type RepairSettings = Pick<RepairConfig,
  'nodeName' | 'fieldSelectors' | 'labelSelectors' | 'sidecarAnnotation' | 'initContainerName' | 'initTerminationMessage'
  | 'initExitCode' | 'repairPods' | 'deletePods' | 'labelPods' | 'labelKey' | 'labelValue' | 'deleteRatePerMinute' | 'nativeNftables'>
  & Partial<Pick<RepairConfig, 'resyncMs' | 'ambientGraceMs'>>;

/** Defaults of the optional settings (as REPAIR_SETTINGS). */
const DEFAULT_RESYNC_MS = 60_000;
const DEFAULT_AMBIENT_GRACE_MS = 10_000;

/** Where a pod's netns is (production: the agent's /proc scan with the ownership check); undefined: not found. */
/**
 * Finds a pod's netns: a proved, open handle (the agent's /proc scan: the controller programs
 * that fd and releases the reference once done, so a pid reused since the scan cannot redirect
 * the rules elsewhere) or a path (tests, tools).
 */
export type RepairNetnsResolver = (pod: V1Pod) => string | NetnsRef | undefined | Promise<string | NetnsRef | undefined>;

/** Ambient repair (beyond upstream). enroll() rejecting with NonRetryable or a non-retryable EnrollError falls back to delete/label. */
export interface AmbientRepairHook {
  shouldBeEnrolled(pod: V1Pod): boolean;
  isEnrolled(uid: string): boolean;
  enroll(pod: V1Pod): Promise<void>;
}

export interface RepairControllerOptions {
  /**
   * An informer of exactly this node's pods that someone else runs and has
   * synced (the agent's ambient one), used instead of a second list + watch
   * of the same pods. Only valid without REPAIR_FIELD_SELECTORS / _LABEL_SELECTORS.
   */
  sharedPods?: Informer<V1Pod>;
  client: KubeClient;
  config: RepairSettings;
  resolveNetns: RepairNetnsResolver;
  ambient?: AmbientRepairHook;
  /** One outcome (`istio_cni_repair_pods_repaired_total{type,result}`). */
  onRepaired?: (type: RepairType, result: RepairResult) => void;
  log?: (level: 'debug' | 'info' | 'warn' | 'error', message: string, fields?: { pod?: string; error?: unknown }) => void;
  /** The caller already ran checkRepairAccess (the agent does, before touching the host): start() skips it. */
  accessChecked?: boolean;
  /** Informer watch timeout (seconds). */
  watchTimeoutSeconds?: number;
  /** Time source of the delete rate limit and the queue. */
  clock?: Clock;
  /** The sidecar programming (default lib/cni/sidecar.ts programSidecar); for tests. */
  programSidecar?: typeof defaultProgramSidecar;
}

export type RepairErrorCode = 'NetnsNotFound' | 'NotEligible' | 'ProgramFailed' | 'EnrollFailed' | 'DeleteFailed' | 'LabelFailed';

/** A failed repair action; `retryable` says whether the queue tries again. */
export class RepairError extends Error {
  override readonly name = 'RepairError';
  constructor(readonly code: RepairErrorCode, readonly pod: string, readonly retryable: boolean, message: string, options?: { cause?: unknown }) {
    super(`repair ${pod}: ${message}`, options);
  }
}

/** The agent's identity lacks a permission an enabled action needs (checked at start); `missing` as `pods/delete`. */
export class RepairRbacError extends Error {
  override readonly name = 'RepairRbacError';
  readonly code = 'ERR_REPAIR_RBAC';
  /** The chart value that grants what delete mode needs. */
  static readonly CHART_VALUE = 'repair.deletePods';
  /** The ClusterRole the chart then creates and binds: `<chart fullname>-agent-repair-delete`. */
  static readonly CLUSTER_ROLE_SUFFIX = 'agent-repair-delete';
  constructor(readonly missing: readonly string[], options?: { cause?: unknown }) {
    super(`repair: the agent lacks RBAC permission ${missing.join(' and ')} in every namespace. With the Helm chart, ` +
      `set ${RepairRbacError.CHART_VALUE}=true: it creates ClusterRole <release>-${RepairRbacError.CLUSTER_ROLE_SUFFIX} ` +
      `(podwire-${RepairRbacError.CLUSTER_ROLE_SUFFIX} for a release named podwire) and binds it to the agent's ServiceAccount; ` +
      `without the chart, grant pods delete to that ServiceAccount; or turn delete mode off (REPAIR_DELETE_PODS=false)`, options);
  }
}

/**
 * The permissions the enabled actions need, asked of the apiserver: delete needs `delete pods` in
 * every namespace, label `patch pods/status` (the agent's base role has that). Rejects with
 * RepairRbacError naming what is missing; when reviews themselves are refused, logs and resolves
 * (a refused action then fails, typed, when it is tried).
 */
export async function checkRepairAccess(
  client: KubeClient, cfg: Pick<RepairSettings, 'deletePods' | 'labelPods'>, log?: RepairControllerOptions['log'],
): Promise<void> {
  // Delete wins over label (fallback()), so label mode's permission is asked only without delete.
  const wanted = cfg.deletePods ? accessOf('repairDelete') : cfg.labelPods ? accessOf('repairLabel') : [];
  if (wanted.length === 0) return;
  let missing: string[];
  try {
    missing = await missingAccess(client, wanted);
  } catch (err) {
    if (!isKubeError(err, 'Forbidden') && !isKubeError(err, 'NotFound')) throw err;
    log?.('warn', `repair: cannot review the agent's permissions (${message(err)}); a refused action fails when it is tried`);
    return;
  }
  if (missing.length) throw new RepairRbacError(missing);
}

/**
 * At most `perMinute` takes per minute, evenly spaced (a bucket of one token): `take()` is 0 when
 * a take is allowed now (and consumes it), else the ms until the next one is.
 */
export class DeleteRateLimiter {
  readonly intervalMs: number;
  #next = -Infinity;
  constructor(perMinute: number, private readonly clock: Clock = realClock) {
    if (!(perMinute > 0) || !Number.isFinite(perMinute)) throw new RangeError(`deletes per minute must be > 0, got ${perMinute}`);
    this.intervalMs = 60_000 / perMinute;
  }
  take(): number {
    const now = this.clock.now();
    if (now < this.#next) return Math.ceil(this.#next - now);
    this.#next = now + this.intervalMs;
    return 0;
  }
}

export interface RepairStats {
  repaired: number;
  deleted: number;
  labelled: number;
  enrolled: number;
  failed: number;
  /** Deletes postponed by the rate limit. */
  rateLimited: number;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));


export class RepairController {
  readonly pods: Informer<V1Pod>;
  private readonly ownsInformer: boolean;
  readonly queue: WorkQueue<string>;
  readonly stats: RepairStats = { repaired: 0, deleted: 0, labelled: 0, enrolled: 0, failed: 0, rateLimited: 0 };
  readonly deleteLimiter: DeleteRateLimiter;
  private readonly opts: RepairControllerOptions;
  private readonly cfg: RepairSettings;
  private readonly filter: BrokenPodFilter;
  private readonly backend: Backend;
  private readonly log: NonNullable<RepairControllerOptions['log']>;
  private readonly program: typeof defaultProgramSidecar;
  /** namespace/name → UID repaired in place (upstream's map; dropped when the pod goes). */
  private readonly repairedUid = new Map<string, string>();
  /** namespace/name → since when (clock ms) that UID was seen selected for ambient but unenrolled. */
  private readonly unenrolledSince = new Map<string, { uid: string; since: number }>();
  private readonly clock: Clock;
  private resyncTimer: unknown;
  private readonly unsubscribe: Array<() => void> = [];
  private started = false;
  private running = false;

  constructor(opts: RepairControllerOptions) {
    const cfg = opts.config;
    if (typeof cfg?.nodeName !== 'string' || cfg.nodeName === '' || /[,=!]/.test(cfg.nodeName)) {
      throw new TypeError(`RepairController: config.nodeName must be a node name, got ${JSON.stringify(cfg?.nodeName)}`);
    }
    if (typeof opts.resolveNetns !== 'function') throw new TypeError('RepairController: resolveNetns must be a function');
    this.opts = opts;
    this.cfg = cfg;
    this.filter = {
      sidecarAnnotation: cfg.sidecarAnnotation, initContainerName: cfg.initContainerName,
      initTerminationMessage: cfg.initTerminationMessage, initExitCode: cfg.initExitCode,
    };
    this.backend = cfg.nativeNftables ? 'nftables' : 'iptables';
    this.log = opts.log ?? (() => undefined);
    this.program = opts.programSidecar ?? defaultProgramSidecar;
    const clock = opts.clock ?? realClock;
    this.clock = clock;
    this.deleteLimiter = new DeleteRateLimiter(cfg.deleteRatePerMinute, clock);
    const fieldSelector = [cfg.fieldSelectors.trim(), `spec.nodeName=${cfg.nodeName}`].filter((s) => s !== '').join(',');
    this.ownsInformer = !opts.sharedPods;
    if (opts.sharedPods && (cfg.fieldSelectors.trim() !== '' || cfg.labelSelectors.trim() !== '')) {
      throw new TypeError('sharedPods cannot be used with REPAIR_FIELD_SELECTORS or REPAIR_LABEL_SELECTORS');
    }
    this.pods = opts.sharedPods ?? new Informer(opts.client, PODS, {
      transform: stripManagedFields,
      fieldSelector,
      ...(cfg.labelSelectors.trim() !== '' ? { labelSelector: cfg.labelSelectors.trim() } : {}),
      ...(opts.watchTimeoutSeconds !== undefined ? { watchTimeoutSeconds: opts.watchTimeoutSeconds } : {}),
    });
    this.queue = new WorkQueue<string>({
      name: 'repair',
      process: (key) => this.reconcile(key),
      maxAttempts: REPAIR_MAX_ATTEMPTS,
      clock,
      onRetry: (key, err, attempt, delayMs) => this.log('warn', `repair: failed (attempt ${attempt}), retry in ${delayMs} ms: ${message(err)}`, { pod: key, error: err }),
      onDrop: (key, err, reason: DropReason) => this.log('error', `repair: given up (${reason}): ${message(err)}`, { pod: key, error: err }),
    });
  }

  /**
   * Checks the permissions the enabled actions need (RepairRbacError; unless `accessChecked`), starts the informer;
   * resolves once it has synced and every cached pod is queued.
   */
  async start(): Promise<void> {
    if (this.started) throw new Error('RepairController: already started');
    this.started = true;
    if (!this.opts.accessChecked) await checkRepairAccess(this.opts.client, this.cfg, this.log);
    const enqueue = (p: V1Pod) => { if (this.running) this.queue.add(podKey(p)); };
    this.unsubscribe.push(
      this.pods.on('add', enqueue),
      this.pods.on('update', enqueue),
      this.pods.on('delete', enqueue),
      this.pods.on('error', (err) => this.log('warn', `repair: pod informer: ${message(err)}`, { error: err })),
    );
    if (this.ownsInformer) await this.pods.start().synced;
    this.running = true;
    for (const p of this.pods.list()) this.queue.add(podKey(p));
    this.scheduleResync();
  }

  /** Queues again, every resync interval, the cached pods that still need work. */
  private scheduleResync(): void {
    const every = this.cfg.resyncMs ?? DEFAULT_RESYNC_MS;
    if (every <= 0) return;
    this.resyncTimer = this.clock.setTimeout(() => {
      if (!this.running) return;
      for (const p of this.pods.list()) if (this.needsWork(p)) this.queue.add(podKey(p));
      this.scheduleResync();
    }, every);
  }

  /** Whether a resync should queue the pod: broken and not yet repaired/labelled, or an unenrolled ambient pod. */
  private needsWork(pod: V1Pod): boolean {
    if (pod.spec?.nodeName !== this.cfg.nodeName || pod.metadata?.deletionTimestamp) return false;
    const key = podKey(pod);
    if (isBrokenPod(pod, this.filter)) {
      if (this.cfg.repairPods) return this.repairedUid.get(key) !== pod.metadata?.uid;
      if (this.cfg.deletePods) return true;
      return this.cfg.labelPods && !Object.prototype.hasOwnProperty.call(pod.metadata?.labels ?? {}, this.cfg.labelKey);
    }
    return this.ambientCandidate(pod);
  }

  /** A Running pod with IPs that the hook says should be enrolled and is not. */
  private ambientCandidate(pod: V1Pod): boolean {
    const amb = this.opts.ambient;
    return !!amb && pod.status?.phase === 'Running' && podIps(pod).length > 0 && amb.shouldBeEnrolled(pod) && !amb.isEnrolled(pod.metadata?.uid ?? '');
  }

  /** Stops the informer and the queue (waiting for a run in flight, up to timeoutMs). */
  async stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    this.running = false;
    if (this.resyncTimer !== undefined) this.clock.clearTimeout(this.resyncTimer);
    this.resyncTimer = undefined;
    for (const u of this.unsubscribe.splice(0)) u();
    if (this.ownsInformer) await this.pods.stop();
    await this.queue.shutdown(opts);
  }

  private count(type: RepairType, result: RepairResult): void {
    if (result === 'fail') this.stats.failed++;
    try {
      this.opts.onRepaired?.(type, result);
    } catch {
      /* a metrics callback must not break the queue */
    }
  }

  /** One key: the work queue calls this. */
  private async reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const pod = this.pods.get(key.slice(slash + 1), key.slice(0, slash));
    if (!pod) {
      this.repairedUid.delete(key);
      this.unenrolledSince.delete(key);
      return;
    }
    // The informer is field-selected on the node; checked again so nothing else is ever touched.
    if (pod.spec?.nodeName !== this.cfg.nodeName) {
      this.log('warn', `repair: pod is bound to ${JSON.stringify(pod.spec?.nodeName ?? '')}, not this node; ignored`, { pod: key });
      return;
    }
    if (pod.metadata?.deletionTimestamp) return;
    if (isBrokenPod(pod, this.filter)) {
      if (this.cfg.repairPods) await this.repairSidecar(pod);
      else await this.fallback(pod, 'broken');
      return;
    }
    if (!this.ambientCandidate(pod)) {
      this.unenrolledSince.delete(key);
      return;
    }
    // The agent enrolls the pod itself (CNI ADD, its informer): repair only what stays unenrolled.
    const uid = pod.metadata?.uid ?? '';
    const now = this.clock.now();
    let seen = this.unenrolledSince.get(key);
    if (seen?.uid !== uid) this.unenrolledSince.set(key, (seen = { uid, since: now }));
    const wait = seen.since + (this.cfg.ambientGraceMs ?? DEFAULT_AMBIENT_GRACE_MS) - now;
    if (wait > 0) {
      this.queue.addAfter(key, wait);
      return;
    }
    if (this.cfg.repairPods) await this.repairAmbient(pod);
    else await this.fallback(pod, 'not enrolled in ambient');
  }

  /** Delete, else label, per the options; nothing when neither is enabled. */
  private async fallback(pod: V1Pod, why: string): Promise<void> {
    if (this.cfg.deletePods) await this.deleteBroken(pod, why);
    else if (this.cfg.labelPods) await this.labelBroken(pod, why);
  }

  private async repairSidecar(pod: V1Pod): Promise<void> {
    const key = podKey(pod);
    const uid = pod.metadata?.uid ?? '';
    if (this.repairedUid.get(key) === uid) {
      this.count('repair', 'skip');
      return;
    }
    const el = sidecarEligibility(pod);
    if (!el.eligible) {
      // Its rules are not the plugin's to program (istio-init, DISABLE_ENVOY, ...).
      this.log('info', `repair: not repaired: ${el.reason}`, { pod: key });
      this.count('repair', 'skip');
      return;
    }
    let target: string | NetnsRef | undefined;
    try {
      target = await this.opts.resolveNetns(pod);
    } catch (err) {
      this.count('repair', 'fail');
      throw new RepairError('NetnsNotFound', key, true, `finding the netns: ${message(err)}`, { cause: err });
    }
    if (target === undefined) {
      // The sandbox may not be visible yet; the queue tries again (5 runs in all).
      this.count('repair', 'fail');
      throw new RepairError('NetnsNotFound', key, true, 'no netns found for the pod');
    }
    const netnsPath = typeof target === 'string' ? target : target.ns.path;
    try {
      await this.program(typeof target === 'string' ? target : target.ns, pod, el.proxy, { backend: this.backend, podIps: podIps(pod) });
    } catch (err) {
      this.count('repair', 'fail');
      // A bad annotation does not get better by retrying.
      const retryable = !(err instanceof RangeError || err instanceof TypeError);
      const e = new RepairError('ProgramFailed', key, retryable, `programming the sidecar rules in ${netnsPath}: ${message(err)}`, { cause: err });
      throw retryable ? e : new NonRetryable(e.message, { cause: e });
    } finally {
      if (typeof target !== 'string') target.release();
    }
    this.repairedUid.set(key, uid);
    this.stats.repaired++;
    this.count('repair', 'success');
    this.log('info', `repair: sidecar rules programmed in ${netnsPath}; the pod recovers at its next init restart`, { pod: key });
  }

  private async repairAmbient(pod: V1Pod): Promise<void> {
    const key = podKey(pod);
    try {
      await this.opts.ambient!.enroll(pod);
    } catch (err) {
      // Out of fds or memory is never "for good": no fallback (delete or label) for it; the queue retries.
      const permanent = !isResourceExhaustion(err) && (isNonRetryable(err) || (err instanceof EnrollError && !err.retryable) || (err instanceof RepairError && !err.retryable));
      this.count('repair', 'fail');
      if (!permanent) throw new RepairError('EnrollFailed', key, true, `enrolling in ambient: ${message(err)}`, { cause: err });
      this.log('warn', `repair: enrolling in ambient failed for good: ${message(err)}`, { pod: key, error: err });
      await this.fallback(pod, `not enrolled in ambient (${message(err)})`);
      return;
    }
    this.stats.enrolled++;
    this.count('repair', 'success');
    this.log('info', 'repair: pod enrolled in ambient in place', { pod: key });
  }

  /**
   * Deletes this incarnation of the pod (preconditions uid and resourceVersion of `pod`), if the
   * rate limit allows; else queues the key again for when it does. A Conflict (the pod changed or
   * was recreated) or NotFound is a skip, and the key is evaluated again from the cache.
   */
  async deleteBroken(pod: V1Pod, why = 'broken'): Promise<RepairResult | 'rate-limited'> {
    const key = podKey(pod);
    const { namespace, name, uid, resourceVersion } = pod.metadata ?? {};
    if (!namespace || !name || !uid) throw new NonRetryable(`repair ${key}: pod without namespace, name or uid`);
    if (pod.spec?.nodeName !== this.cfg.nodeName) return 'skip';
    const wait = this.deleteLimiter.take();
    if (wait > 0) {
      this.stats.rateLimited++;
      this.queue.addAfter(key, wait);
      return 'rate-limited';
    }
    const preconditions: { uid: string; resourceVersion?: string } = { uid };
    if (resourceVersion) preconditions.resourceVersion = resourceVersion;
    const client = this.opts.client;
    try {
      await client.call({ verb: 'delete', resource: 'pods', namespace, name },
        (o) => client.send({ method: 'DELETE', path: podPath(namespace, name), body: { preconditions } }, o));
    } catch (err) {
      if (isConflict(err) || isNotFound(err)) {
        this.count('delete', 'skip');
        this.log('info', `repair: not deleted (${isNotFound(err) ? 'gone' : 'changed or recreated since'})`, { pod: key });
        if (this.running) this.queue.addAfter(key, 500);
        return 'skip';
      }
      this.failed('delete', 'DeleteFailed', key, 'deleting', err);
    }
    this.stats.deleted++;
    this.count('delete', 'success');
    this.log('info', `repair: deleted broken pod (${why})`, { pod: key });
    await this.event(pod, 'DeleteBrokenPod', `Deleting broken pod ${key} (${why}); the istio-cni plugin was not in the chain when it started`);
    return 'success';
  }

  /** Counts a failed API call and throws it: retried by the queue unless the API server forbade it. */
  private failed(action: 'delete' | 'label', code: RepairErrorCode, key: string, doing: string, err: unknown): never {
    this.count(action, 'fail');
    const retryable = !isKubeError(err, 'Forbidden');
    const e = new RepairError(code, key, retryable, `${doing}: ${message(err)}`, { cause: err });
    throw retryable ? e : new NonRetryable(e.message, { cause: e });
  }

  /** Labels the pod through pods/status unless the label key is present. */
  async labelBroken(pod: V1Pod, why = 'broken'): Promise<RepairResult> {
    const key = podKey(pod);
    const { namespace, name } = pod.metadata ?? {};
    if (!namespace || !name) throw new NonRetryable(`repair ${key}: pod without namespace or name`);
    if (pod.spec?.nodeName !== this.cfg.nodeName) return 'skip';
    if (pod.metadata?.labels && Object.prototype.hasOwnProperty.call(pod.metadata.labels, this.cfg.labelKey)) {
      this.count('label', 'skip');
      return 'skip';
    }
    try {
      await annotatePodViaStatus(this.opts.client, { namespace, name }, { labels: { [this.cfg.labelKey]: this.cfg.labelValue } });
    } catch (err) {
      if (isNotFound(err)) {
        this.count('label', 'skip');
        return 'skip';
      }
      this.failed('label', 'LabelFailed', key, 'labelling', err);
    }
    this.stats.labelled++;
    this.count('label', 'success');
    this.log('info', `repair: labelled broken pod ${this.cfg.labelKey}=${this.cfg.labelValue} (${why})`, { pod: key });
    await this.event(pod, 'LabelBrokenPod', `Labelled broken pod ${key} ${this.cfg.labelKey}=${this.cfg.labelValue} (${why})`);
    return 'success';
  }

  private async event(pod: V1Pod, reason: string, text: string): Promise<void> {
    try {
      await createPodEvent(this.opts.client, pod, { type: 'Warning', reason, message: text, component: REPAIR_COMPONENT, host: this.cfg.nodeName });
    } catch (err) {
      this.log('warn', `repair: event ${reason} not recorded: ${message(err)}`, { pod: podKey(pod), error: err });
    }
  }
}
