// The agent while its kube-apiserver restarts in the middle of pod churn
// (its own control plane, so the shared one is not disturbed): once the API
// is back, nothing is missed — every running pod of the ambient namespace
// is enrolled and annotated, every deleted one is out of the dataplane and
// the probe set.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Agent } from '../../lib/agent/agent.js';
import { createLogging } from '../../lib/util/log.js';
import { NftProbeSet } from '../../lib/dataplane/probe-set-nft.js';
import { KubeClient } from '../../lib/kube/client.js';
import { loadKubeconfig } from '../../lib/kube/config.js';
import { REDIRECTION_ANNOTATION } from '../../lib/mesh/constants.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode, type TestPod } from '../helpers/agent-node.js';
import { describeKube, freshNamespace, ownControlPlane, removeNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

let own: Awaited<ReturnType<typeof ownControlPlane>> | undefined;

describeKube('podwire agent across a kube-apiserver restart (own control plane)', () => {
  beforeAll(async () => {
    if (privileged('nft')) own = await ownControlPlane('agent-resilience');
  }, 180_000);

  afterAll(async () => {
    await own?.stop();
  }, 60_000);

  it.skipIf(!privileged('nft'))('misses nothing of the churn once the API server is back', async () => {
    const { cp, admin } = own!;
    const node = await AgentTestNode.create({ admin });
    const ns = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
    const client = new KubeClient(loadKubeconfig(cp.agentKubeconfig), { requestTimeoutMs: 3_000 });
    const agent = new Agent({ config: await node.config({ AMBIENT_DRIFT_CHECK_INTERVAL: '0' }), client, logging: createLogging({ levels: { default: 'none' }, json: true }) });
    const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 100, listeners: false });
    try {
      for (let i = 0; i < 5; i++) await node.addPod(ns, `seed-${i}`);
      await within('agent start', agent.start(), 30_000);
      peer.start();
      let churning = true;
      let ops = 0;
      const deleted: TestPod[] = [];
      const churn = (async () => {
        for (let i = 0; churning; i++) {
          try {
            const p = await node.addPod(ns, `c-${i}`);
            ops++;
            if (i % 3 === 2) {
              await node.removePod(p);
              deleted.push(p);
            }
          } catch {
            await new Promise((r) => setTimeout(r, 50));  // API down: try the next one
          }
        }
      })();
      await until('churn before the restart', () => ops >= 5, 30_000);
      await cp.restartApiserver({ downMs: 1_000 });
      const after = ops;
      await until('churn after the restart', () => ops >= after + 6, 60_000);
      churning = false;
      await churn;

      // Pods whose creation raced the outage may exist without the harness knowing: take the API's word.
      const list = await admin.core.listNamespacedPod({ namespace: ns });
      const live = list.items.filter((p) => p.status?.phase === 'Running');
      const harness = new Set([...node.pods.values()].map((p) => p.uid));
      for (const p of list.items) if (!harness.has(p.metadata!.uid!)) await admin.core.deleteNamespacedPod({ namespace: ns, name: p.metadata!.name!, gracePeriodSeconds: 0 });
      const running = live.filter((p) => harness.has(p.metadata!.uid!));
      expect(running.length).toBeGreaterThanOrEqual(10);
      await until('every running pod enrolled and annotated', async () => {
        const now = await admin.core.listNamespacedPod({ namespace: ns });
        const enabled = now.items.filter((p) => harness.has(p.metadata!.uid!) && p.metadata?.annotations?.[REDIRECTION_ANNOTATION] === 'enabled');
        return enabled.length === running.length && running.every((p) => agent.node!.dataplane.cache.get(p.metadata!.uid!)?.netns);
      }, 60_000);
      await until('every deleted pod out of the dataplane', () => deleted.every((p) => !agent.node!.dataplane.cache.has(p.uid)), 30_000);
      const entries = await new NftProbeSet(node.node, true).list();
      const owners = new Set(entries.map((e) => e.uid));
      for (const p of deleted) expect(owners.has(p.uid), `${p.name} left in the probe set`).toBe(false);
      for (const p of running) expect(owners.has(p.metadata!.uid!)).toBe(true);
      expect(agent.controller!.pods.stats.restarts).toBeGreaterThan(0);
    } finally {
      await peer.stop();
      await agent.stop({ cleanup: true });
      client.close();
      await node.teardown();
      await removeNamespace(admin, ns).catch(() => undefined);
    }
  }, 240_000);
});
