// Finding the pod a CNI ADD is about (§5.5). The runtime calls the plugin
// right after the kubelet created the sandbox, so the informer cache may not
// have the pod yet: wait for it briefly (bounded), then ask the API server
// once (bounded). Upstream's loop meant to do this but looked only once
// (quirk Q2); this re-checks the cache on every event and tick. Given the
// pod's UID (K8S_POD_UID), a cached object of another UID (a pod recreated
// under the same name, the old one still Terminating in the cache) is not it:
// the wait and the GET look for that UID, and an API answer of another UID
// rejects (PodLookupError), so a caller never decides on the wrong pod.
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { KubeClient } from '../kube/client.js';
import type { Informer } from '../kube/informer.js';
import { namespacePath, podPath } from '../kube/paths.js';
import { checkTimeout } from '../util/timeout.js';

export interface PodLookupOptions {
  /** How long to wait for the informer cache (default 500 ms). */
  cacheWaitMs?: number;
  /** Deadline of the one GET after that (default 2000 ms). */
  getTimeoutMs?: number;
  signal?: AbortSignal;
}

export interface PodLookupResult {
  pod: V1Pod;
  namespace: V1Namespace;
  /** Where the pod came from: the cache (at once or after waiting) or the API server. */
  source: 'cache' | 'cache-after-wait' | 'api';
}

const POLL_MS = 10;

export type PodLookupErrorCode =
  /** The API server's pod of that name has another UID than the one asked for. */
  'ERR_POD_UID_MISMATCH';

export class PodLookupError extends Error {
  constructor(readonly code: PodLookupErrorCode, message: string, readonly wantUid: string, readonly gotUid: string) {
    super(message);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'PodLookupError', enumerable: false });
  }
}

/** Waits until `get()` returns something, an informer event or a poll tick re-checking it. */
async function waitFor<T extends object>(get: () => T | undefined, informer: Informer<T>, ms: number, signal?: AbortSignal): Promise<T | undefined> {
  const first = get();
  if (first !== undefined || ms === 0) return first;
  return new Promise<T | undefined>((resolve) => {
    let done = false;
    const finish = () => {
      if (done) return;
      const v = get();
      const expired = Date.now() >= deadline || signal?.aborted;
      if (v === undefined && !expired) return;
      done = true;
      clearInterval(tick);
      clearTimeout(timer);
      off();
      signal?.removeEventListener('abort', finish);
      resolve(v);
    };
    const deadline = Date.now() + ms;
    const offAdd = informer.on('add', finish);
    const offUpdate = informer.on('update', finish);
    const off = () => { offAdd(); offUpdate(); };
    const tick = setInterval(finish, POLL_MS);
    const timer = setTimeout(finish, ms);
    signal?.addEventListener('abort', finish, { once: true });
  });
}

/**
 * The pod `namespace/name` (of `uid`, when given) and its namespace, from the
 * informer caches (waiting up to `cacheWaitMs`), else from one GET each.
 * Rejects with the API's KubeError (NotFound included) when the server does
 * not have it, with PodLookupError ERR_POD_UID_MISMATCH when its pod of that name has another UID.
 */
export async function lookupPod(
  caches: { pods: Informer<V1Pod>; namespaces: Informer<V1Namespace> },
  client: KubeClient,
  ref: { namespace: string; name: string; uid?: string },
  opts: PodLookupOptions = {},
): Promise<PodLookupResult> {
  const waitMs = checkTimeout(opts.cacheWaitMs ?? 500, 'cacheWaitMs', { allowZero: true });  // 0: the cache as it is, then the GET
  const getTimeoutMs = checkTimeout(opts.getTimeoutMs ?? 2000, 'getTimeoutMs');
  const callOpts = { timeoutMs: getTimeoutMs, ...(opts.signal ? { signal: opts.signal } : {}) };
  const t0 = Date.now();
  const wanted = (p: V1Pod | undefined) => (p && (!ref.uid || p.metadata?.uid === ref.uid) ? p : undefined);
  const cachedPod = () => wanted(caches.pods.get(ref.name, ref.namespace));
  const get = { namespace: ref.namespace, name: ref.name };
  let pod = cachedPod();
  let source: PodLookupResult['source'] = 'cache';
  if (!pod) {
    pod = await waitFor(cachedPod, caches.pods, waitMs, opts.signal);
    source = 'cache-after-wait';
  }
  if (!pod) {
    const fetched = await client.call({ verb: 'get', resource: 'pods', ...get }, (o) => client.send<V1Pod>({ method: 'GET', path: podPath(get.namespace, get.name), kind: 'Pod' }, o), callOpts);
    const uid = fetched.metadata?.uid ?? '';
    if (ref.uid && uid !== ref.uid) {
      throw new PodLookupError('ERR_POD_UID_MISMATCH', `pod ${ref.namespace}/${ref.name} is UID ${uid || '(none)'} on the API server, not ${ref.uid}`, ref.uid, uid);
    }
    pod = fetched;
    source = 'api';
  }
  const left = Math.max(0, waitMs - (Date.now() - t0));
  let namespace = await waitFor(() => caches.namespaces.get(ref.namespace), caches.namespaces, left, opts.signal);
  if (!namespace) {
    namespace = await client.call({ verb: 'get', resource: 'namespaces', name: ref.namespace },
      (o) => client.send<V1Namespace>({ method: 'GET', path: namespacePath(ref.namespace), kind: 'Namespace' }, o), callOpts);
  }
  return { pod, namespace, source };
}
