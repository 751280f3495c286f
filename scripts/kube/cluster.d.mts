// Types of cluster.mjs.
import type { ControlPlane } from './controlplane.mjs';
import type { ExecResult, KubeNode, NodeRecord } from './node.mjs';

export interface Cluster {
  dir: string;
  cp: ControlPlane;
  nodes: KubeNode[];
  bins: Record<string, string>;
  /** kubectl as cluster-admin; throws on a non-zero exit unless allowFail. */
  kubectl(args: string[], opts?: { input?: string; timeoutMs?: number; allowFail?: boolean }): { status: number | null; stdout: string; stderr: string };
  stop(): Promise<void>;
  /** What removeCluster needs (also written to `<dir>/cluster.json`). */
  record(): ClusterRecord;
}

export interface ClusterRecord {
  dir: string; fabricNetns: string; server: string; caFile: string; adminKubeconfig: string; kubectl: string;
  hostPids: number[]; nodes: Array<NodeRecord & { nodeIp: string; podCidr: string }>;
}
export function removeCluster(record: ClusterRecord): Promise<void>;

export function nodePlan(prefix: string, i: number): { name: string; netnsName: string; nodeIp: string; podCidr: string };
export function startCluster(opts: {
  dir: string; nodes?: number; images?: Array<{ tarball: string }>; sandboxImage: string;
  taints?: Array<{ key: string; value?: string; effect: string }>;
  detached?: boolean; log?: (m: string) => void; prefix?: string; fabricNetns?: string;
}): Promise<Cluster>;
export function waitNodesReady(cp: ControlPlane, names: string[], timeoutMs: number): Promise<void>;
export type { ExecResult };
