// The agent with a real apiserver and a test node (issue 23): a pod's netns is proved before the
// informer path enrolls it (a process of the pod sitting in another pod's netns is not its netns),
// and probe-set entries of pods deleted while no agent ran are pruned at the next start even when
// that start's snapshot is incomplete.
import { statSync } from 'node:fs';
import { afterEach, expect, it } from 'vitest';
import { Agent } from '../../lib/agent/agent.js';
import { NftProbeSet } from '../../lib/dataplane/probe-set-nft.js';
import { REDIRECTION_ANNOTATION } from '../../lib/mesh/constants.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { adminClient, agentClient, describeKube, freshNamespace, removeNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

async function annotation(pod: { namespace: string; name: string }): Promise<string | undefined> {
  const p = await adminClient().core.readNamespacedPod({ namespace: pod.namespace, name: pod.name });
  return p.metadata?.annotations?.[REDIRECTION_ANNOTATION];
}

const idOf = (p: string) => {
  const st = statSync(p);
  return { dev: st.dev, ino: st.ino };
};

async function probeEntries(node: AgentTestNode): Promise<Map<string, string>> {
  return new Map((await new NftProbeSet(node.node, true).list()).map((e) => [e.ip, e.uid]));
}

async function setup() {
  const node = await AgentTestNode.create();
  cleanups.push(() => node.teardown());
  const admin = adminClient();
  const ns = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
  cleanups.push(() => removeNamespace(admin, ns));
  const config = await node.config({});
  const newAgent = async () => {
    const agent = new Agent({
      config, client: agentClient(), hostRuleRetryMs: 100,
      logging: (await import('../../lib/util/log.js')).createLogging({ levels: { default: 'none' }, json: true }),
    });
    cleanups.push(() => agent.stop({ cleanup: true }));
    return agent;
  };
  const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 200 });
  cleanups.push(() => peer.stop());
  return { node, ns, admin, newAgent, peer };
}

describeKube('podwire agent: a pod netns is proved', () => {
  it.skipIf(!privileged('nft'))('a pod whose only process sits in another pod\'s netns is not enrolled there', async () => {
    const { node, ns, newAgent, peer } = await setup();
    const owner = await node.addPod(ns, 'owner');
    // The visitor's own sandbox has no process the scan can see; one of its processes entered the
    // owner's netns, and it started before the owner's sandbox (age alone would give it that netns).
    const visitor = await node.addPod(ns, 'visitor', {}, { procEntry: false });
    node.addProcEntry(500, visitor.uid, owner.netnsPath);
    const agent = await newAgent();
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('owner enabled', async () => (await annotation(owner)) === 'enabled');
    const dp = agent.node!.dataplane;
    expect(dp.cache.get(owner.uid)?.netns?.ns.id).toEqual(idOf(owner.netnsPath));
    // Let the work queue finish with the visitor (one more event through the same single worker).
    const marker = await node.addPod(ns, 'marker');
    await until('marker enabled', async () => (await annotation(marker)) === 'enabled');
    expect(dp.cache.get(visitor.uid)?.netns).toBeUndefined();
    expect(await annotation(visitor)).not.toBe('enabled');
    expect(peer.active.has(visitor.uid)).toBe(false);
    // Its own sandbox shows up: the drift check re-enrolls it there, and only there.
    node.addProcEntry(visitor.pid, visitor.uid, visitor.netnsPath);
    const round = await agent.drift!.runOnce();
    expect(round?.unheld).toBe(1);
    expect(dp.cache.get(visitor.uid)?.netns?.ns.id).toEqual(idOf(visitor.netnsPath));
    expect(await annotation(visitor)).toBe('enabled');
    expect(dp.cache.get(owner.uid)?.netns?.ns.id).toEqual(idOf(owner.netnsPath));
  }, 60_000);

  it.skipIf(!privileged('nft'))('probe entries of a pod deleted while no agent ran are pruned though the snapshot is incomplete', async () => {
    const { node, ns, admin, newAgent, peer } = await setup();
    const deleted = await node.addPod(ns, 'deleted');
    const unfound = await node.addPod(ns, 'unfound');
    const alive = await node.addPod(ns, 'alive');
    const first = await newAgent();
    await within('agent start', first.start(), 30_000);
    peer.start();
    for (const p of [deleted, unfound, alive]) await until(`${p.name} enabled`, async () => (await annotation(p)) === 'enabled');
    for (const p of [deleted, unfound, alive]) expect((await probeEntries(node)).get(p.ip4)).toBe(p.uid);
    await first.stop({ cleanup: false });
    // While no agent runs: one pod is deleted (no DEL reached anyone), another's process is not found.
    await admin.core.deleteNamespacedPod({ namespace: ns, name: deleted.name, gracePeriodSeconds: 0 });
    await until('deleted gone', async () => !(await admin.core.listNamespacedPod({ namespace: ns })).items.some((p) => p.metadata?.uid === deleted.uid));
    node.removeProcEntry(deleted.pid);
    node.removeProcEntry(unfound.pid);
    const again = await newAgent();
    await within('second start', again.start(), 30_000);
    expect(again.snapshot?.report.complete).toBe(false);
    expect(again.snapshot?.scan.missing).toContain(unfound.uid);
    const entries = await probeEntries(node);
    expect(entries.get(deleted.ip4)).toBeUndefined();
    expect(entries.get(deleted.ip6)).toBeUndefined();
    expect(entries.get(unfound.ip4)).toBe(unfound.uid);
    expect(entries.get(alive.ip4)).toBe(alive.uid);
    expect(again.snapshot?.report.pruned.sort()).toEqual([deleted.ip4, deleted.ip6].sort());
  }, 60_000);
});
