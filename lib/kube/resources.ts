// The resources the agent informs on, described once: the RBAC name (for
// errors), the watch path, the model type (to deserialize watch events like
// list items), and the typed list call. Plus the two informers the node agent
// runs (Istio's informers.go): this node's Pods, all Namespaces.
import type { ConfigurationOptions, KubernetesListObject, KubernetesObject, V1Namespace, V1Node, V1Pod } from '@kubernetes/client-node';
import type { KubeClient } from './client.js';
import { Informer, type InformerOptions } from './informer.js';

export interface ListQuery {
  limit?: number;
  _continue?: string;
  fieldSelector?: string;
  labelSelector?: string;
}

export interface ResourceSpec<T extends KubernetesObject> {
  resource: string;
  /** Collection path across all namespaces (watch uses it). */
  path: string;
  /** client-node model name, e.g. V1Pod. */
  type: string;
  namespaced: boolean;
  list(client: KubeClient, q: ListQuery, options: ConfigurationOptions): Promise<KubernetesListObject<T>>;
}

export const PODS: ResourceSpec<V1Pod> = {
  resource: 'pods', path: '/api/v1/pods', type: 'V1Pod', namespaced: true,
  list: (c, q, o) => c.core.listPodForAllNamespaces(q, o),
};

export const NAMESPACES: ResourceSpec<V1Namespace> = {
  resource: 'namespaces', path: '/api/v1/namespaces', type: 'V1Namespace', namespaced: false,
  list: (c, q, o) => c.core.listNamespace(q, o),
};

export const NODES: ResourceSpec<V1Node> = {
  resource: 'nodes', path: '/api/v1/nodes', type: 'V1Node', namespaced: false,
  list: (c, q, o) => c.core.listNode(q, o),
};

export interface PodInformerOptions extends Omit<InformerOptions, 'fieldSelector'> {
  /** Only pods bound to this node (field selector spec.nodeName=<nodeName>). Required. */
  nodeName: string;
}

/** This node's pods. An empty node name would silently select every unscheduled pod, so it is refused. */
export function podInformer(client: KubeClient, opts: PodInformerOptions): Informer<V1Pod> {
  const { nodeName, ...rest } = opts;
  if (typeof nodeName !== 'string' || nodeName === '' || /[,=!]/.test(nodeName)) {
    throw new TypeError(`podInformer: nodeName must be a node name, got ${JSON.stringify(nodeName)}`);
  }
  return new Informer(client, PODS, { ...rest, fieldSelector: `spec.nodeName=${nodeName}` });
}

/** All namespaces (or those matching labelSelector). */
export function namespaceInformer(client: KubeClient, opts: InformerOptions = {}): Informer<V1Namespace> {
  return new Informer(client, NAMESPACES, opts);
}
