// Types of rbac.mjs (a plain script, imported by controlplane.mjs and by tests).
import type { V1ClusterRole } from '@kubernetes/client-node';

type Role = V1ClusterRole & { metadata: { name: string } };
export const AGENT_CLUSTER_ROLE: Role;
export const REPAIR_DELETE_CLUSTER_ROLE: Role;
export const NODE_TAINT_CLUSTER_ROLE: Role;
export const AGENT_CLUSTER_ROLES: readonly Role[];
