// The ClusterRoles the node agent gets: what Istio's istio-cni chart grants
// (clusterrole.yaml: base + ambient), least privilege, plus Events so the
// agent can report an enrollment failure on the pod. The labelling repair
// action writes through pods/status, which the base role already has. Pod
// delete and node patch are separate roles, bound only when the feature that
// needs them is on (REPAIR_DELETE_PODS, NODE_READINESS_TAINT); the agent
// checks them at start and names what is missing. The chart (deploy/) will use
// the same rules; tests check the agent is refused what is not here.
export const AGENT_CLUSTER_ROLE = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'podwire-agent' },
  rules: [
    { apiGroups: [''], resources: ['pods', 'nodes', 'namespaces'], verbs: ['get', 'list', 'watch'] },
    // ambient: the redirection annotation is written through the status subresource, as upstream.
    { apiGroups: [''], resources: ['pods/status'], verbs: ['patch', 'update'] },
    { apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: ['istio-cni-node'], verbs: ['get'] },
    { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
  ],
};

/** REPAIR_DELETE_PODS=true: the repair controller deletes broken pods (of its node, in any namespace). */
export const REPAIR_DELETE_CLUSTER_ROLE = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'podwire-agent-repair-delete' },
  rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['delete'] }],
};

/**
 * NODE_READINESS_TAINT=true: the agent edits its own Node's taints. RBAC cannot say "its own
 * node" for a DaemonSet's one ServiceAccount, so this grants patch on every Node; a chart that
 * cares more can run one ServiceAccount per node with resourceNames.
 */
export const NODE_TAINT_CLUSTER_ROLE = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'podwire-agent-node-taint' },
  rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'patch'] }],
};

/** Every ClusterRole, the base first. */
export const AGENT_CLUSTER_ROLES = [AGENT_CLUSTER_ROLE, REPAIR_DELETE_CLUSTER_ROLE, NODE_TAINT_CLUSTER_ROLE];
