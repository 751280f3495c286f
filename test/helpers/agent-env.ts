// The environment a test or benchmark agent runs with on a simulated node:
// every path its own (proc root, run dir, ZDS socket), its host netns entered
// through `<proc root>/1/ns/net`, health and metrics on free loopback ports.
// No vitest imports here: benchmarks use it too.
import { createServer, type Server } from 'node:net';

/** A TCP port free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  const s: Server = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

export interface SimulatedNode {
  /** The Kubernetes node name. */
  name: string;
  procRoot: string;
  runDir: string;
  zdsPath: string;
}

export async function agentEnv(node: SimulatedNode, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return {
    NODE_NAME: node.name,
    AMBIENT_ENABLED: 'true',
    POD_NAMESPACE: 'istio-system',
    ALLOW_SWITCH_TO_HOST_NS: 'true',
    HOST_PROC_ROOT: node.procRoot,
    HOST_MOUNTS_ROOT: '/',
    CNI_AGENT_RUN_DIR: node.runDir,
    ZTUNNEL_UDS_ADDRESS: node.zdsPath,
    AGENT_LISTEN_ADDRESS: '127.0.0.1',
    HEALTH_PORT: String(await freePort()),
    MONITORING_PORT: String(await freePort()),
    NATIVE_NFTABLES: 'true',
    // No kubelet runs on a simulated node: the nftables host rule matches the test's own uid (root).
    KUBELET_UID: '0',
    ...extra,
  };
}
