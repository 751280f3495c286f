// Every API permission the node agent uses, by the feature whose code makes the call. The start-time
// access checks (node gate, repair) ask for these entries; the ClusterRoles of scripts/kube/rbac.mjs
// and the Helm chart must grant exactly them (test/kube/rbac-derived.test.ts records the agent's
// requests on the wire and compares both ways). rbac.mjs stays a literal (a plain node script
// cannot import TypeScript); that test keeps the two equal.
import type { AccessAttributes } from './access.js';

export interface Permission {
  /** API group, '' for core. */
  group: string;
  resource: string;
  subresource?: string;
  verb: 'get' | 'list' | 'watch' | 'create' | 'patch' | 'delete';
  /** RBAC resourceNames: only objects of these names. */
  resourceNames?: readonly string[];
}

export type Feature = 'ambient' | 'events' | 'safeUpgrade' | 'repairLabel' | 'repairDelete' | 'nodeTaint';

const core = (resource: string, verb: Permission['verb'], subresource?: string): Permission =>
  (subresource ? { group: '', resource, subresource, verb } : { group: '', resource, verb });

/** The daemonSetName the shutdown decision reads (its default; the chart's DaemonSet name). */
export const AGENT_DAEMONSET_NAME = 'istio-cni-node';

export const PERMISSIONS: Readonly<Record<Feature, readonly Permission[]>> = {
  // Informers on this node's pods (all namespaces, spec.nodeName selector) and on namespaces; the
  // CNI ADD's GETs when the caches lack the pod or its namespace; the ambient.istio.io/redirection
  // annotation, written through pods/status (merge patch) as upstream does.
  ambient: [
    core('pods', 'get'), core('pods', 'list'), core('pods', 'watch'),
    core('namespaces', 'get'), core('namespaces', 'list'), core('namespaces', 'watch'),
    core('pods', 'patch', 'status'),
  ],
  // Warning Events on pods (EnrollFailed, RedirectionDrift[Repaired], the repair actions'): core/v1
  // Events, each created once (never aggregated, so no patch).
  events: [core('events', 'create')],
  // At shutdown: the agent's DaemonSet (upgrade or uninstall?) and its Node (still targeted?).
  safeUpgrade: [
    { group: 'apps', resource: 'daemonsets', verb: 'get', resourceNames: [AGENT_DAEMONSET_NAME] },
    core('nodes', 'get'),
  ],
  // REPAIR_LABEL_PODS: the label goes through pods/status too.
  repairLabel: [core('pods', 'patch', 'status')],
  // REPAIR_DELETE_PODS: broken pods of the node, in any namespace.
  repairDelete: [core('pods', 'delete')],
  // NODE_READINESS_TAINT: read-modify-write of the Node's taints.
  nodeTaint: [core('nodes', 'get'), core('nodes', 'patch')],
};

/**
 * The ClusterRoles, by the features they serve: the base role is always bound (the repair
 * controller's informer is the ambient one's, its label mode needs nothing more); the others only
 * with the setting that needs them.
 */
export const ROLE_FEATURES = {
  base: ['ambient', 'events', 'safeUpgrade', 'repairLabel'],
  repairDelete: ['repairDelete'],
  nodeTaint: ['nodeTaint'],
} as const satisfies Record<string, readonly Feature[]>;

/**
 * Requests every authenticated identity may make without a grant of ours (the apiserver's default
 * system:basic-user role): the access reviews behind the checks at start.
 */
export const GRANTED_TO_EVERY_IDENTITY: readonly Permission[] = [
  { group: 'authorization.k8s.io', resource: 'selfsubjectaccessreviews', verb: 'create' },
];

/** The access review attributes of a feature's permissions (`name`: one object, e.g. the agent's Node). */
export function accessOf(feature: Feature, name?: string): AccessAttributes[] {
  return PERMISSIONS[feature].map((p) => ({
    ...(p.group ? { group: p.group } : {}),
    resource: p.resource,
    ...(p.subresource ? { subresource: p.subresource } : {}),
    verb: p.verb,
    ...(name !== undefined ? { name } : {}),
  }));
}
