// An informer a node agent can trust: list, then watch from the list's
// resourceVersion; on any watch error or close, watch again from the last
// resourceVersion seen (capped exponential backoff with jitter); on 410 Gone,
// list again and diff against the cache, so objects that vanished while we
// could not see are delivered as deletes and the rest as adds/updates.
//
// Why not client-node's ListWatch (1.4.0): it stops for good on any non-410
// watch error (it only emits 'error'), has no backoff, no timeouts (Watch's
// 30 s AbortSignal is overwritten, so a silent connection hangs forever), no
// old object on update, and mixes typed list items (Dates) with raw watch
// objects (strings) in one cache. The list and the watch stream are podwire's
// own requests (lib/kube/rest.ts: no client-node at run time), typed like
// client-node's models (Dates revived, lib/kube/dates.ts); the informer owns
// the loop: when to relist, when to back off, what is delivered.
//
// Delivery: handlers run synchronously, in the stream's order, so events of
// one object arrive in order (the apiserver orders a watch by
// resourceVersion). A handler that needs to do I/O should enqueue; a throwing
// (or rejecting) handler is counted and reported, never stops the informer.
import type { KubernetesObject } from '@kubernetes/client-node';
import { KubeError, codeForStatus, codeForTransport as transportCode } from './errors.js';
import type { KubeClient } from './client.js';
import { listPage, type ResourceSpec } from './resources.js';
import { sleep } from './retry.js';
import { checkTimeout } from '../util/timeout.js';

export interface BackoffOptions {
  /** First delay after a failure (default 200 ms). */
  initialMs?: number;
  /** Cap (default 30 000 ms). */
  maxMs?: number;
}

export interface InformerOptions<T extends KubernetesObject = KubernetesObject> {
  /** e.g. `spec.nodeName=node-1`. */
  fieldSelector?: string;
  /** e.g. `istio.io/dataplane-mode=ambient`. */
  labelSelector?: string;
  /** Items per list page (default 500): bounds the memory of one response. */
  pageSize?: number;
  /**
   * Server-side watch timeout; each watch picks a value in [t, 2t) so agents
   * on many nodes do not reconnect in step (client-go does the same). Default 300.
   */
  watchTimeoutSeconds?: number;
  /** A watch silent for this long is dropped and restarted. Default: 2 × watchTimeoutSeconds + 30 s (the server must have closed it by then). */
  idleTimeoutMs?: number;
  /** Deadline of one list page (default: the client's requestTimeoutMs). */
  listTimeoutMs?: number;
  backoff?: BackoffOptions;
  /** Re-deliver every cached object as an update (old === new) this often. Off by default. */
  resyncMs?: number;
  /**
   * Applied to every object as it arrives (list items and watch objects), before it is cached or
   * delivered: what it returns is what the cache holds (client-go's SetTransform). It must not throw.
   */
  transform?: (obj: T) => T;
}

/** Plain counters, for metrics. */
export interface InformerStats {
  /** Completed lists, the first included. */
  lists: number;
  /** Completed lists after the first (after a 410). */
  relists: number;
  /** Watches started, the first included. */
  watches: number;
  /** Watches started again after one ended (error, close, idle timeout or 410). */
  restarts: number;
  /** Watch events received (bookmarks included). */
  events: number;
  /** 410 Gone answers (HTTP or ERROR event). */
  gone: number;
  /** Watches dropped by the idle timer. */
  idleTimeouts: number;
  listErrors: number;
  watchErrors: number;
  resyncs: number;
  handlerErrors: number;
}

type Handlers<T> = {
  add: (obj: T) => void;
  update: (obj: T, old: T) => void;
  delete: (obj: T) => void;
  /** Every list/watch failure and handler exception (the informer carries on). */
  error: (err: unknown) => void;
};

type WatchEnd =
  | { kind: 'closed' } | { kind: 'gone' } | { kind: 'idle' } | { kind: 'stopped' }
  | { kind: 'error'; err: unknown };

/** The cache key: `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(o: KubernetesObject): string {
  const m = o.metadata;
  return m?.namespace ? `${m.namespace}/${m.name}` : `${m?.name}`;
}

export class Informer<T extends KubernetesObject> {
  readonly stats: InformerStats = {
    lists: 0, relists: 0, watches: 0, restarts: 0, events: 0, gone: 0,
    idleTimeouts: 0, listErrors: 0, watchErrors: 0, resyncs: 0, handlerErrors: 0,
  };
  /** Resolves after the first list has been delivered; rejects if stopped before. */
  readonly synced: Promise<void>;
  private readonly cache = new Map<string, T>();
  private readonly listeners: { [K in keyof Handlers<T>]: Handlers<T>[K][] } = { add: [], update: [], delete: [], error: [] };
  private resourceVersion = '';
  private syncedFlag = false;
  private settleSynced!: (err?: unknown) => void;
  private readonly stop$ = new AbortController();
  private loop: Promise<void> | undefined;
  private endWatch: ((e: WatchEnd) => void) | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private paused: { promise: Promise<void>; resume: () => void } | undefined;
  private readonly o: Required<Omit<InformerOptions, 'fieldSelector' | 'labelSelector' | 'resyncMs' | 'backoff' | 'idleTimeoutMs' | 'transform'>> &
    Pick<InformerOptions, 'fieldSelector' | 'labelSelector' | 'resyncMs' | 'idleTimeoutMs'> & { backoff: Required<BackoffOptions> };
  private readonly transform: ((obj: T) => T) | undefined;

  constructor(readonly client: KubeClient, readonly spec: ResourceSpec<T>, opts: InformerOptions<T> = {}) {
    const watchTimeoutSeconds = opts.watchTimeoutSeconds ?? 300;
    if (!Number.isInteger(watchTimeoutSeconds) || watchTimeoutSeconds < 1) throw new RangeError(`watchTimeoutSeconds must be a positive integer, got ${watchTimeoutSeconds}`);
    const pageSize = opts.pageSize ?? 500;
    if (!Number.isInteger(pageSize) || pageSize < 1) throw new RangeError(`pageSize must be a positive integer, got ${pageSize}`);
    this.o = {
      pageSize,
      watchTimeoutSeconds,
      listTimeoutMs: checkTimeout(opts.listTimeoutMs ?? client.requestTimeoutMs, 'listTimeoutMs'),
      backoff: {
        initialMs: checkTimeout(opts.backoff?.initialMs ?? 200, 'backoff.initialMs'),
        maxMs: checkTimeout(opts.backoff?.maxMs ?? 30_000, 'backoff.maxMs'),
      },
    };
    if (opts.fieldSelector !== undefined) this.o.fieldSelector = opts.fieldSelector;
    if (opts.labelSelector !== undefined) this.o.labelSelector = opts.labelSelector;
    if (opts.resyncMs !== undefined) this.o.resyncMs = checkTimeout(opts.resyncMs, 'resyncMs');
    if (opts.idleTimeoutMs !== undefined) this.o.idleTimeoutMs = checkTimeout(opts.idleTimeoutMs, 'idleTimeoutMs');
    if (opts.transform !== undefined && typeof opts.transform !== 'function') throw new TypeError('transform must be a function');
    this.transform = opts.transform;
    this.synced = new Promise<void>((resolve, reject) => {
      this.settleSynced = (err) => (err === undefined ? resolve() : reject(err));
    });
    // Nobody awaiting `synced` must not turn a stop-before-sync into an unhandled rejection.
    this.synced.catch(() => undefined);
  }

  /** Subscribes; returns the unsubscribe function. Subscribe before start() to see the initial adds. */
  on<K extends keyof Handlers<T>>(event: K, fn: Handlers<T>[K]): () => void {
    this.listeners[event].push(fn);
    return () => {
      const i = this.listeners[event].indexOf(fn);
      if (i >= 0) this.listeners[event].splice(i, 1);
    };
  }

  /** Starts listing and watching. Returns this (`await informer.start().synced`). */
  start(): this {
    if (this.loop) throw new Error('informer already started');
    if (this.stop$.signal.aborted) throw new Error('informer was stopped');
    this.loop = this.run();
    if (this.o.resyncMs !== undefined) {
      this.resyncTimer = setInterval(() => this.resync(), this.o.resyncMs);
    }
    return this;
  }

  /** Stops for good: aborts the list or watch in flight; resolves when the loop has ended. */
  async stop(): Promise<void> {
    this.stop$.abort();
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.endWatch?.({ kind: 'stopped' });
    this.paused?.resume();
    if (!this.syncedFlag) this.settleSynced(new KubeError({ code: 'Aborted', status: 0, verb: 'list', resource: this.spec.resource, serverMessage: 'informer stopped before it synced' }));
    await this.loop;
  }

  get hasSynced(): boolean {
    return this.syncedFlag;
  }

  /** The resourceVersion the next watch resumes from. */
  get lastResourceVersion(): string {
    return this.resourceVersion;
  }

  /** The cached object (namespace is ignored for cluster-scoped resources). */
  get(name: string, namespace?: string): T | undefined {
    return this.cache.get(this.spec.namespaced && namespace ? `${namespace}/${name}` : name);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  get size(): number {
    return this.cache.size;
  }

  /**
   * Test hook: ends the current watch and starts no other until
   * `_resumeForTest()`, keeping the cache and resourceVersion — what a long
   * disconnection looks like, without touching the network.
   * @internal
   */
  _pauseForTest(): void {
    if (this.paused) return;
    let resume!: () => void;
    const promise = new Promise<void>((r) => { resume = r; });
    this.paused = { promise, resume };
    this.endWatch?.({ kind: 'stopped' });
  }

  /** @internal */
  _resumeForTest(): void {
    const p = this.paused;
    this.paused = undefined;
    p?.resume();
  }

  // -------------------------------------------------------------------------

  private async run(): Promise<void> {
    const stopped = () => this.stop$.signal.aborted;
    let needList = true;
    let failures = 0;
    let watchedBefore = false;
    while (!stopped()) {
      if (needList) {
        try {
          await this.listAndDiff();
          needList = false;
          failures = 0;
        } catch (err) {
          if (stopped()) break;
          this.stats.listErrors++;
          this.emitError(err);
          await sleep(this.delay(++failures), this.stop$.signal);
          continue;
        }
      }
      if (this.paused) {
        await this.paused.promise;
        continue;
      }
      if (stopped()) break;
      if (watchedBefore) this.stats.restarts++;
      watchedBefore = true;
      const t0 = Date.now();
      const before = this.stats.events;
      const end = await this.watchOnce();
      if (stopped()) break;
      const healthy = this.stats.events > before || Date.now() - t0 >= 1000;
      switch (end.kind) {
        case 'gone':
          // Our resourceVersion is no longer served: only a list can catch up.
          this.stats.gone++;
          needList = true;
          break;
        case 'closed':
          // Normal end (server timeout). Reconnect at once, unless it closes as soon as it opens.
          if (healthy) failures = 0;
          else await sleep(this.delay(++failures), this.stop$.signal);
          break;
        case 'stopped':
          break;
        case 'idle':
        case 'error':
          if (end.kind === 'error') {
            this.stats.watchErrors++;
            this.emitError(end.err);
          }
          if (healthy) failures = 0;
          await sleep(this.delay(++failures), this.stop$.signal);
          break;
      }
    }
  }

  /** Capped exponential backoff with ±20 % jitter. */
  private delay(failures: number): number {
    const { initialMs, maxMs } = this.o.backoff;
    const d = Math.min(maxMs, initialMs * 2 ** Math.min(30, failures - 1));
    return Math.round(d * (0.8 + Math.random() * 0.4));
  }

  /** Lists every page, then delivers the difference from the cache. */
  private async listAndDiff(): Promise<void> {
    const items: T[] = [];
    let rv = '';
    let cont: string | undefined;
    for (let expired = 0; ;) {
      try {
        const page = await this.client.call({ verb: 'list', resource: this.spec.resource }, (options) => listPage(this.client, this.spec, {
          limit: this.o.pageSize,
          ...(cont ? { _continue: cont } : {}),
          ...(this.o.fieldSelector ? { fieldSelector: this.o.fieldSelector } : {}),
          ...(this.o.labelSelector ? { labelSelector: this.o.labelSelector } : {}),
        }, options), { timeoutMs: this.o.listTimeoutMs, signal: this.stop$.signal });
        for (const it of page.items) items.push(this.transform ? this.transform(it) : it);
        rv = page.metadata?.resourceVersion ?? rv;
        cont = page.metadata?._continue || undefined;
        if (!cont) break;
      } catch (err) {
        // A continue token older than the compaction window: start the list over (twice at most, then back off).
        if (cont && err instanceof KubeError && err.code === 'Gone' && ++expired <= 2) {
          items.length = 0;
          cont = undefined;
          continue;
        }
        throw err;
      }
    }
    if (this.stop$.signal.aborted) return;
    const first = this.stats.lists === 0;
    this.stats.lists++;
    if (!first) this.stats.relists++;
    this.resourceVersion = rv;
    const fresh = new Map<string, T>();
    for (const it of items) fresh.set(objectKey(it), it);
    for (const [k, old] of this.cache) {
      if (!fresh.has(k)) {
        this.cache.delete(k);
        this.emit('delete', old);
      }
    }
    for (const [k, obj] of fresh) this.upsert(k, obj);
    if (!this.syncedFlag) {
      this.syncedFlag = true;
      this.settleSynced();
    }
  }

  /** Add or update; a same-name object with another uid is a delete of the old one, then an add. */
  private upsert(k: string, obj: T): void {
    const old = this.cache.get(k);
    this.cache.set(k, obj);
    if (!old) return this.emit('add', obj);
    if (old.metadata?.uid !== obj.metadata?.uid) {
      this.emit('delete', old);
      return this.emit('add', obj);
    }
    if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.emit('update', obj, old);
  }

  /** One watch request, from the current resourceVersion, until it ends for any reason. */
  private watchOnce(): Promise<WatchEnd> {
    this.stats.watches++;
    const t = this.o.watchTimeoutSeconds;
    const timeoutSeconds = t + Math.floor(Math.random() * t);
    const idleMs = this.o.idleTimeoutMs ?? (2 * t + 30) * 1000;
    const query: Record<string, string | number | boolean> = {
      resourceVersion: this.resourceVersion,
      allowWatchBookmarks: true,
      timeoutSeconds,
    };
    if (this.o.fieldSelector) query.fieldSelector = this.o.fieldSelector;
    if (this.o.labelSelector) query.labelSelector = this.o.labelSelector;
    return new Promise<WatchEnd>((resolve) => {
      let settled = false;
      const request = new AbortController();
      let idle: NodeJS.Timeout | undefined;
      const finish = (e: WatchEnd) => {
        if (settled) return;
        settled = true;
        clearTimeout(idle);
        this.endWatch = undefined;
        request.abort();
        resolve(e);
      };
      const armIdle = () => {
        clearTimeout(idle);
        idle = setTimeout(() => {
          this.stats.idleTimeouts++;
          finish({ kind: 'idle' });
        }, idleMs);
      };
      this.endWatch = finish;
      armIdle();
      const target = { verb: 'watch' as const, resource: this.spec.resource };
      this.client.watch({ resource: this.spec.resource, path: this.spec.path, query, kind: this.spec.kind, signal: request.signal }, (type: string, obj: unknown) => {
        if (settled) return;
        armIdle();
        this.stats.events++;
        const end = this.apply(type, obj);
        if (end) finish(end);
      }, (err: unknown) => {
        if (!err) return finish({ kind: 'closed' });
        const status = (err as { statusCode?: unknown }).statusCode;
        if (status === 410) return finish({ kind: 'gone' });
        finish({ kind: 'error', err: watchError(err, target, typeof status === 'number' ? status : undefined) });
      });
    });
  }

  /** One watch event into the cache and out to the handlers; returns how the watch ends, if it does. */
  private apply(type: string, raw: unknown): WatchEnd | undefined {
    if (type === 'ERROR') {
      const s = (raw ?? {}) as { code?: number; reason?: string; message?: string };
      if (s.code === 410) return { kind: 'gone' };
      return { kind: 'error', err: new KubeError({ code: codeForStatus(s.code ?? 0, s.reason), status: s.code ?? 0, verb: 'watch', resource: this.spec.resource, ...(s.reason ? { reason: s.reason } : {}), ...(s.message ? { serverMessage: s.message } : {}) }) };
    }
    const meta = (raw as KubernetesObject | undefined)?.metadata;
    if (meta?.resourceVersion) this.resourceVersion = meta.resourceVersion;
    if (type === 'BOOKMARK') return undefined;
    // Typed like list items (Dates revived by the stream).
    const obj = this.transform ? this.transform(raw as T) : raw as T;
    const k = objectKey(obj);
    if (type === 'ADDED' || type === 'MODIFIED') {
      this.upsert(k, obj);
    } else if (type === 'DELETED') {
      this.cache.delete(k);
      this.emit('delete', obj);
    }
    return undefined;
  }

  private resync(): void {
    if (!this.syncedFlag || this.stop$.signal.aborted) return;
    this.stats.resyncs++;
    for (const obj of [...this.cache.values()]) this.emit('update', obj, obj);
  }

  private emit(event: 'add' | 'delete', obj: T): void;
  private emit(event: 'update', obj: T, old: T): void;
  private emit(event: 'add' | 'update' | 'delete', obj: T, old?: T): void {
    for (const fn of this.listeners[event]) {
      try {
        const r = (fn as (a: T, b?: T) => unknown)(obj, old);
        if (r && typeof (r as Promise<unknown>).then === 'function') {
          (r as Promise<unknown>).then(undefined, (err) => this.handlerFailed(err));
        }
      } catch (err) {
        this.handlerFailed(err);
      }
    }
  }

  private handlerFailed(err: unknown): void {
    this.stats.handlerErrors++;
    this.emitError(err);
  }

  private emitError(err: unknown): void {
    for (const fn of this.listeners.error) {
      try {
        fn(err);
      } catch {
        // an error listener that throws has nowhere left to report to
      }
    }
  }
}

function watchError(err: unknown, target: { verb: 'watch'; resource: string }, status?: number): KubeError {
  if (err instanceof KubeError) return err;
  if (status !== undefined) return new KubeError({ ...target, code: codeForStatus(status), status, serverMessage: (err as Error).message, cause: err });
  const e = err as { name?: string };
  return new KubeError({ ...target, code: e?.name === 'AbortError' ? 'Aborted' : transportCode(err), status: 0, serverMessage: (err as Error)?.message, cause: err });
}
