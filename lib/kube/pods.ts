// The pod calls the agent and the repair controller make, each one request
// with the client's deadline and a KubeError on failure.
import type { V1Pod } from '@kubernetes/client-node';
import type { CallOptions, KubeClient } from './client.js';
import { MERGE_PATCH } from './rest.js';
import { podPath } from './paths.js';
import { withRetry, type RetryOptions } from './retry.js';

/** status.podIPs, else status.podIP: the pod's IPs as the API server has them. */
export function podIps(pod: V1Pod): string[] {
  const ips = (pod.status?.podIPs ?? []).map((p) => p.ip).filter((ip): ip is string => typeof ip === 'string' && ip.length > 0);
  if (ips.length === 0 && pod.status?.podIP) ips.push(pod.status.podIP);
  return ips;
}

/** `namespace/name` of a namespaced object (work queue keys, log fields). */
export const podKey = (o: { metadata?: { namespace?: string; name?: string } }): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

export interface PodRef {
  namespace: string;
  name: string;
}

/** Labels/annotations to set (string) or remove (null), as one JSON merge patch of metadata. */
export interface MetadataPatch {
  labels?: Record<string, string | null>;
  annotations?: Record<string, string | null>;
}

export interface GetOptions extends Omit<CallOptions, 'contentType'> {
  /** Retry of transient failures (5xx, 429, timeout, connection); never of a 4xx. Default 3 attempts. */
  retry?: RetryOptions;
}

/** GET a pod, with a short bounded retry of transient failures. */
export function getPod(client: KubeClient, ref: PodRef, opts: GetOptions = {}): Promise<V1Pod> {
  const retry: RetryOptions = { ...opts.retry };
  if (opts.signal) retry.signal = opts.signal;
  return withRetry(() => client.call({ verb: 'get', resource: 'pods', ...ref },
    (o) => client.send<V1Pod>({ method: 'GET', path: podPath(ref.namespace, ref.name), kind: 'Pod' }, o), opts), retry);
}

function metadataBody(patch: MetadataPatch): { metadata: MetadataPatch } {
  const metadata: MetadataPatch = {};
  if (patch.labels) metadata.labels = patch.labels;
  if (patch.annotations) metadata.annotations = patch.annotations;
  if (!metadata.labels && !metadata.annotations) throw new TypeError('metadata patch: give labels and/or annotations');
  return { metadata };
}

/** JSON merge patch of the pod's labels/annotations through the main resource (needs `patch pods`). */
export function patchPodMetadata(client: KubeClient, ref: PodRef, patch: MetadataPatch, opts: Omit<CallOptions, 'contentType'> = {}): Promise<V1Pod> {
  return client.call({ verb: 'patch', resource: 'pods', ...ref },
    (o) => client.send<V1Pod>({ method: 'PATCH', path: podPath(ref.namespace, ref.name), body: metadataBody(patch), kind: 'Pod' }, o), { ...opts, contentType: MERGE_PATCH });
}

/**
 * JSON merge patch through the pods/status subresource. Istio's node agent
 * writes its `ambient.istio.io/redirection` annotation this way: its role has
 * `patch pods/status` and not `patch pods`, and the status strategy keeps
 * metadata changes (except owner references) while resetting spec.
 */
export function patchPodStatus(client: KubeClient, ref: PodRef, body: { metadata?: MetadataPatch; status?: Record<string, unknown> }, opts: Omit<CallOptions, 'contentType'> = {}): Promise<V1Pod> {
  return client.call({ verb: 'patch', resource: 'pods/status', ...ref },
    (o) => client.send<V1Pod>({ method: 'PATCH', path: podPath(ref.namespace, ref.name, 'status'), body, kind: 'Pod' }, o), { ...opts, contentType: MERGE_PATCH });
}

/** Annotations/labels via pods/status (what the agent's RBAC allows). */
export function annotatePodViaStatus(client: KubeClient, ref: PodRef, patch: MetadataPatch, opts: Omit<CallOptions, 'contentType'> = {}): Promise<V1Pod> {
  return patchPodStatus(client, ref, metadataBody(patch), opts);
}

export interface DeletePodOptions extends Omit<CallOptions, 'contentType'> {
  /** Precondition: delete only this incarnation of the pod (409 Conflict if the name now has another uid). */
  uid: string;
  /** Default: the pod's own terminationGracePeriodSeconds. */
  gracePeriodSeconds?: number;
}

/**
 * DELETE with a uid precondition, for repair: a pod recreated under the same
 * name in the meantime is not the broken one and must survive.
 */
export async function deletePod(client: KubeClient, ref: PodRef, opts: DeletePodOptions): Promise<void> {
  if (!opts.uid) throw new TypeError('deletePod: uid is required (the precondition)');
  await client.call({ verb: 'delete', resource: 'pods', ...ref }, (o) => client.send({
    method: 'DELETE', path: podPath(ref.namespace, ref.name),
    ...(opts.gracePeriodSeconds === undefined ? {} : { query: { gracePeriodSeconds: opts.gracePeriodSeconds } }),
    body: { preconditions: { uid: opts.uid }, ...(opts.gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds: opts.gracePeriodSeconds }) },
  }, o), opts);
}
