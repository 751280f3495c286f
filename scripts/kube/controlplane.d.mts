// Types of controlplane.mjs (a plain script, so npm scripts run it without a build).
export const AGENT_NAMESPACE: 'istio-system';
export const AGENT_SERVICE_ACCOUNT: 'podwire-agent';

export interface ApiResult {
  status: number;
  body: any;
}

export interface ControlPlane {
  dir: string;
  /** https://127.0.0.1:PORT */
  server: string;
  caFile: string;
  /** cluster-admin (a static token in system:masters). */
  adminKubeconfig: string;
  adminToken: string;
  /** ServiceAccount istio-system/podwire-agent, bound to ClusterRole podwire-agent. */
  agentKubeconfig: string;
  /** The agent's current token (a TokenRequest token). */
  agentTokenFile: string;
  etcdEndpoint: string;
  /** The CA's key and the ServiceAccount signing key (a controller-manager needs them). */
  caKey: string;
  saKey: string;
  /** Per node name given to startControlPlane: the kubelet's token (user system:node:<name>). */
  nodeTokens: Record<string, string>;
  pids(): { etcd?: number; apiserver?: number };
  /** One call as admin; PATCH bodies are JSON merge patches. */
  admin(method: string, path: string, body?: unknown): Promise<ApiResult>;
  /** Writes a fresh agent token into agentTokenFile and returns it. */
  rotateAgentToken(): Promise<string>;
  /** Kills kube-apiserver and starts it again on the same etcd and port (after `downMs`). */
  restartApiserver(opts?: { downMs?: number }): Promise<void>;
  /**
   * Compacts etcd at its current revision; returns the revision. Lists and gets at older
   * resourceVersions then get 410; watches are served from the apiserver's watch cache, so a
   * watch 410 needs compact() followed by restartApiserver().
   */
  compact(): Promise<number>;
  /** Stops both processes and removes `dir`. */
  stop(): Promise<void>;
}

export function startControlPlane(opts: {
  dir: string; log?: (message: string) => void; detached?: boolean;
  /** Cluster mode for real nodes of these names (see the file comment of controlplane.mjs). */
  nodes?: string[];
}): Promise<ControlPlane>;
export function apiCall(server: string, caFile: string, token: string, method: string, path: string, body?: unknown, timeoutMs?: number): Promise<ApiResult>;
/** A kubeconfig (JSON) for `user` authenticating with a bearer token. */
export function tokenKubeconfig(server: string, caFile: string, user: string, token: string): string;
