// The resources the agent informs on, described once: the RBAC name (for
// errors), the list/watch path, and the kind (whose Dates list items and watch
// events get, lib/kube/dates.ts). Plus the two informers the node agent
// runs (Istio's informers.go): this node's Pods, all Namespaces.
import type { KubernetesListObject, KubernetesObject, V1Namespace, V1Node, V1Pod } from '@kubernetes/client-node';
import type { KubeClient } from './client.js';
import type { DateKind } from './dates.js';
import type { RequestOptions } from './rest.js';
import { Informer, type InformerOptions } from './informer.js';

export interface ListQuery {
  limit?: number;
  _continue?: string;
  fieldSelector?: string;
  labelSelector?: string;
}

export interface ResourceSpec<T extends KubernetesObject> {
  resource: string;
  /** Collection path across all namespaces (list and watch). */
  path: string;
  /** Which Dates its objects have (lib/kube/dates.ts). */
  kind: DateKind;
  namespaced: boolean;
}

/** One list page of a resource (inside KubeClient.call, which gives `options`). */
export async function listPage<T extends KubernetesObject>(client: KubeClient, spec: ResourceSpec<T>, q: ListQuery, options: RequestOptions): Promise<KubernetesListObject<T>> {
  const { _continue, ...rest } = q;
  const page = await client.send<KubernetesListObject<T> & { metadata?: { continue?: string } }>({ method: 'GET', path: spec.path, query: { ...rest, continue: _continue }, kind: spec.kind, list: true }, options);
  // The wire name is `continue`; client-node's model (the type callers see) calls it `_continue`.
  if (page?.metadata && typeof page.metadata.continue === 'string') page.metadata._continue = page.metadata.continue;
  return page;
}

export const PODS: ResourceSpec<V1Pod> = {
  resource: 'pods', path: '/api/v1/pods', kind: 'Pod', namespaced: true,
};

export const NAMESPACES: ResourceSpec<V1Namespace> = {
  resource: 'namespaces', path: '/api/v1/namespaces', kind: 'Namespace', namespaced: false,
};

export const NODES: ResourceSpec<V1Node> = {
  resource: 'nodes', path: '/api/v1/nodes', kind: 'Node', namespaced: false,
};

/**
 * The informer transform of Istio's agent (its kclient's default): `metadata.managedFields` is
 * dropped before an object is cached. The server-side-apply bookkeeping is often the largest part
 * of a pod's JSON and nothing the agent reads.
 */
export function stripManagedFields<T extends KubernetesObject>(obj: T): T {
  if (obj.metadata?.managedFields !== undefined) delete obj.metadata.managedFields;
  return obj;
}

export interface PodInformerOptions extends Omit<InformerOptions<V1Pod>, 'fieldSelector'> {
  /** Only pods bound to this node (field selector spec.nodeName=<nodeName>). Required. */
  nodeName: string;
}

/** This node's pods, managedFields stripped unless `transform` says otherwise. An empty node name would silently select every unscheduled pod, so it is refused. */
export function podInformer(client: KubeClient, opts: PodInformerOptions): Informer<V1Pod> {
  const { nodeName, ...rest } = opts;
  if (typeof nodeName !== 'string' || nodeName === '' || /[,=!]/.test(nodeName)) {
    throw new TypeError(`podInformer: nodeName must be a node name, got ${JSON.stringify(nodeName)}`);
  }
  return new Informer(client, PODS, { transform: stripManagedFields, ...rest, fieldSelector: `spec.nodeName=${nodeName}` });
}

/** All namespaces (or those matching labelSelector). managedFields are stripped unless `transform` says otherwise. */
export function namespaceInformer(client: KubeClient, opts: InformerOptions<V1Namespace> = {}): Informer<V1Namespace> {
  return new Informer(client, NAMESPACES, { transform: stripManagedFields, ...opts });
}
