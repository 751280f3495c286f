// Types of node.mjs.
export const CNI_PLUGIN_DIR: string;
export const PRIMARY_CNI_PLUGINS: string[];
export const NODE_TOOLS: string[];
export const API_VIP: string;
export const NODE_DIRS: Record<string, string>;

export interface ExecResult { code: number | null; stdout: string; stderr: string }

export interface KubeNode {
  name: string;
  dir: string;
  netnsName: string;
  nodeIp: string;
  podCidr: string;
  /** containerd's CRI socket (a host path). */
  socket: string;
  /** The kubelet's cgroupRoot (relative to each hierarchy's root). */
  cgroupRoot: string;
  state: { initPid: number; launcherPid: number; kubeletPid: number; containerdPid: number; forwarderPid: number };
  /** A node path (e.g. /etc/cni/net.d/x) as the host can open it. */
  hostPath(path: string): string;
  /** The tail of one of the node's logs: kubelet.log, containerd.log, init.log, forwarder.log. */
  log(name: string, lines?: number): string;
  /** argv inside the node's mount, pid and net namespaces. */
  exec(argv: string[], opts?: { timeoutMs?: number; input?: string }): ExecResult;
  importImage(tarball: string): void;
  tagImage(from: string, to: string): void;
  restartKubelet(opts?: { downMs?: number }): Promise<void>;
  stopKubelet(): Promise<void>;
  startKubelet(): Promise<void>;
  /** A reboot: every process of the node dies and its namespaces go; then all starts again. */
  restart(opts?: { downMs?: number }): Promise<void>;
  stop(): Promise<void>;
  /** What removeNode needs to remove the node from another process. */
  record(): NodeRecord;
}

export interface NodeRecord { name: string; dir: string; netnsName: string; cgroupRoot: string; pids: number[] }

export function bridgeConflist(podCidr: string): unknown;
export function startNode(opts: {
  dir: string; name: string; netnsName: string; nodeIp: string; podCidr: string;
  cluster: { fabricNetns: string; caFile: string; apiPort: number; forwarderScript: string };
  token: string; kubelet: string; sandboxImage: string;
  taints?: Array<{ key: string; value?: string; effect: string }>;
  detached?: boolean; log?: (m: string) => void;
}): Promise<KubeNode>;
export function removeNode(record: NodeRecord): Promise<void>;
export function sweepNodeLeftovers(tmp: string): void;
