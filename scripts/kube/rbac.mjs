// The ClusterRole the node agent gets: what Istio's istio-cni chart grants
// (clusterrole.yaml: base + ambient), least privilege, plus Events so the
// agent can report an enrollment failure on the pod. No pod delete and no
// pod label patch: those belong to the repair controller's own role, granted
// only in the repair mode that needs them. The chart (deploy/) will use the
// same rules; tests check the agent is refused what is not here.
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
