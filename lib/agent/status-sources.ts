// The agent's parts as lib/agent/status.ts reads them: built once its informers, dataplane and
// ZDS server exist (undefined before: the status socket answers 503 then).
import { selectionPolicy } from './config.js';
import type { Agent } from './agent.js';
import type { StatusSources } from './status.js';

export function statusSourcesOf(agent: Agent): () => StatusSources | undefined {
  let built: StatusSources | undefined;
  return () => {
    if (built) return built;
    const { controller, node, config: cfg } = agent;
    if (!controller || !node) return undefined;
    const dp = node.dataplane;
    built = {
      nodeName: cfg.nodeName,
      readiness: agent.readiness,
      policy: selectionPolicy(cfg),
      enablementSelectors: cfg.enablementSelectors,
      get backend() {
        return {
          ...(agent.backend ? { backend: agent.backend } : {}),
          ...(agent.iptables ? { iptablesVariant: agent.iptables.mode } : {}),
          ...(agent.kubeletUid ? { kubeletUid: agent.kubeletUid.uid } : {}),
        };
      },
      zds: { socket: cfg.ztunnelUdsAddress, connections: () => node.zds?.server.connections() ?? [] },
      // No installer configured: 'installed' is set from the start and no installer ever exists.
      install: { enabled: agent.installer !== undefined || !agent.readiness.has('installed'), ready: () => agent.installer?.ready ?? false, configPath: () => agent.installer?.configPath ?? '' },
      queue: () => controller.queue.stats(),
      driftCheckIntervalMs: cfg.driftCheckIntervalMs,
      pods: () => controller.pods.list(),
      namespace: (name) => controller.namespaces.get(name),
      entries: () => dp.cache.snapshot(),
      probeIps: (uid) => dp.probes.ipsOf(uid),
      book: agent.podStatus,
    };
    return built;
  };
}
