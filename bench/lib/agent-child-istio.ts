// The Istio-style agent of `bench/agent.ts` (its second node): the same controller and pipeline as
// podwire's agent with the in-pod rules programmed as upstream does and the ipset probe set.
// Loaded by bench/lib/agent-child.ts in that mode only.
import type { V1Pod } from '@kubernetes/client-node';
import { AmbientController, podIps } from '../../lib/ambient/controller.js';
import { selectionPolicy, type AgentConfig } from '../../lib/agent/config.js';
import { activeAmbientPods, restoreSnapshot } from '../../lib/agent/snapshot.js';
import { Dataplane } from '../../lib/dataplane/dataplane.js';
import { IpsetProbeSet } from '../../lib/dataplane/probe-set-ipset.js';
import { openPodNetns } from '../../lib/dataplane/proc-scan.js';
import { ZdsZtunnel } from '../../lib/dataplane/ztunnel-zds.js';
import type { KubeClient } from '../../lib/kube/client.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { applyRouting, diffRouting } from '../../lib/redirect/engine-routes.js';
import { inpodRules } from '../../lib/redirect/inpod.js';
import type { Logging } from '../../lib/util/log.js';
import type { RunningAgent } from './agent-child.js';
import { IstioStyleRules } from './istio-style.js';

const ms1 = (x: number) => Math.round(x * 10) / 10;

/** Upstream's CreateInpodRules when nothing drifted: routing via netlink, then the `iptables-save` check per family. */
class IstioStartupRules extends IstioStyleRules {
  private readonly routing = inpodRules({ ipv6: true, dnsCapture: true });
  /** Where the Istio-style time goes (ms summed over calls). */
  readonly stats = { apply: { n: 0, ms: 0 }, verify: { n: 0, ms: 0 } };
  override async apply(ns: Netns): Promise<void> {
    const t0 = performance.now();
    try {
      await super.apply(ns);
    } finally {
      this.stats.apply.n++;
      this.stats.apply.ms += performance.now() - t0;
    }
  }
  override async verify(ns: Netns): Promise<{ ok: boolean; drift: string[] }> {
    const t0 = performance.now();
    try {
      await applyRouting(ns, await diffRouting(ns, this.routing));
      return await super.verify(ns);
    } finally {
      this.stats.verify.n++;
      this.stats.verify.ms += performance.now() - t0;
    }
  }
}

/** The same controller and pipeline with Istio's rule programming and ipset probe set (no health/metrics/CNI servers). */
export async function istioAgent(config: AgentConfig, client: KubeClient, logging: Logging): Promise<RunningAgent> {
  const log = logging.scope('cni-agent');
  const marks: Record<string, number> = {};
  const t0 = performance.now();
  const host = Netns.open(`${config.hostProcRoot}/1/ns/net`);
  let dp: Dataplane | undefined;
  const zds = new ZdsZtunnel({ path: config.ztunnelUdsAddress }, () => dp?.snapshot() ?? []);
  const rules = new IstioStartupRules();
  const dataplane = new Dataplane({ rules, ztunnel: zds, probes: new IpsetProbeSet(await host.netlink(), true) });
  dp = dataplane;
  await dataplane.start();
  const controller = new AmbientController({
    client, nodeName: config.nodeName, policy: selectionPolicy(config),
    dataplane: {
      enroll: (p, o) => dataplane.enroll(p, o),
      unenroll: (p, o) => dataplane.unenroll(p, o),
      enrolled: (uid) => {
        const e = dataplane.cache.get(uid);
        return e && !e.leaving && e.netns && !e.netns.released ? e.pod : undefined;
      },
    },
    // The handle is the controller's: it releases it after the enrollment.
    resolveNetns: async (pod: V1Pod) => (await openPodNetns([{ uid: pod.metadata!.uid!, ips: podIps(pod) }], { procRoot: config.hostProcRoot })).found.get(pod.metadata!.uid!)?.ref,
    log: (level, message) => { if (level !== 'info') log[level](message); },
  });
  await controller.sync();
  marks.informersSynced = ms1(performance.now() - t0);
  const pods = activeAmbientPods(controller.pods.list(), config.systemNamespace);
  const snapshot = await restoreSnapshot({ pods, dataplane, procRoot: config.hostProcRoot, reconcileRules: true });
  marks.snapshotReconciled = ms1(performance.now() - t0);
  zds.listen();
  controller.run();
  const startMs = performance.now() - t0;
  return {
    startMs, marks, snapshot,
    enrolled: () => dataplane.snapshot().filter((e) => e.netns && !e.netns.released).length,
    zdsKnowsAll: () => dataplane.snapshot().every((e) => zds.knows(e.pod.uid)),
    drift: () => Promise.resolve(undefined),
    stats: () => Object.fromEntries(Object.entries(rules.stats).map(([k, v]) => [k, { calls: v.n, meanMs: v.n ? Math.round((v.ms / v.n) * 100) / 100 : 0 }])),
    stop: async () => {
      await controller.stop({ timeoutMs: 5000 });
      await dataplane.close();
      await zds.close();
      host.close();
      client.close();
    },
  };
}
