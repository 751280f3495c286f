// The ClusterRoles the node agent gets: exactly what its code calls (the table of
// lib/kube/permissions.ts, by feature; test/kube/rbac-derived.test.ts records the agent's
// requests against a real apiserver and checks these rules both ways: no request outside them,
// no rule unused). Pod delete and node patch are separate roles, bound only when the feature
// that needs them is on (REPAIR_DELETE_PODS, NODE_READINESS_TAINT); the agent checks them at
// start and names what is missing. The chart (deploy/chart/podwire) has the same rules
// (test/deploy/chart.test.ts). A literal, not generated from that table: plain node scripts
// (controlplane.mjs) import it, and they cannot import TypeScript.
export const AGENT_CLUSTER_ROLE = {
  apiVersion: 'rbac.authorization.k8s.io/v1',
  kind: 'ClusterRole',
  metadata: { name: 'podwire-agent' },
  rules: [
    // Informers (this node's pods in every namespace; namespaces) and the CNI ADD's lookups.
    { apiGroups: [''], resources: ['pods', 'namespaces'], verbs: ['get', 'list', 'watch'] },
    // Shutdown decision: is the Node still targeted by the DaemonSet? (Nodes are never listed or watched.)
    { apiGroups: [''], resources: ['nodes'], verbs: ['get'] },
    // The redirection annotation and repair's label: JSON merge patches through the status subresource, as upstream.
    { apiGroups: [''], resources: ['pods/status'], verbs: ['patch'] },
    { apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: ['istio-cni-node'], verbs: ['get'] },
    // Warning Events on pods, core/v1, each created once.
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
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
