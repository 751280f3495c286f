// The node's own netns is never a pod's: Dataplane.enroll (and reconcile)
// refuse a netns whose (dev, ino) is the agent's own, the configured host
// netns or the host proc root's 1/ns/net, under any path that names it,
// before anything is written.
//
// The agent's own netns is the real host's here (the test process runs in
// it): that case runs only over in-memory rules, ztunnel and probe set, which
// cannot write to the kernel, so a missing refusal fails the first assertion
// without touching the host; the host's tables and policy rules are compared
// before and after all the same. The "host" of the real-kernel cases is a
// pwt- netns (the demo node).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Dataplane } from '../../lib/dataplane/dataplane.js';
import { ERR_NETNS_IS_HOST } from '../../lib/dataplane/errors.js';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { FakeProbes, FakeRules, FakeZtunnel } from './fakes.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { simNode } from '../helpers/sim-node.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

const pod: PodInfo = { uid: 'uid-node', name: 'p', namespace: 'default', ips: ['10.9.0.2'] };
const refused = { stage: 'netns', retryable: false, code: ERR_NETNS_IS_HOST };

/** Read-only views of the real host's netfilter tables and policy rules. */
function hostState(): string {
  return execFileSync('nft', ['list', 'tables'], { encoding: 'utf8' }) + execFileSync('ip', ['rule'], { encoding: 'utf8' }) + execFileSync('ip', ['-6', 'rule'], { encoding: 'utf8' });
}

function inMemory(opts: { hostProcRoot?: string } = {}) {
  const rules = new FakeRules();
  const ztunnel = new FakeZtunnel();
  const probes = new FakeProbes();
  const dp = new Dataplane({ rules, ztunnel, probes, ...opts });
  cleanups.push(() => dp.close());
  return { dp, rules, ztunnel, probes };
}

async function nodeRuleset(ns: Netns): Promise<string> {
  const out = (await ns.spawn(['nft', 'list', 'ruleset'])).stdout + (await ns.spawn(['ip', 'rule'])).stdout;
  return out.replace(/counter packets \d+ bytes \d+/g, 'counter');
}

describe.skipIf(!privileged('nft'))('the node netns as a pod netns', () => {
  it('refuses the agent\'s own netns under every path, over subsystems that cannot write', async () => {
    const before = hostState();
    const t = inMemory();
    for (const path of ['/proc/self/ns/net', `/proc/${process.pid}/ns/net`, '/proc/thread-self/ns/net', '/run/netns/../../proc/self/ns/net']) {
      await expect(t.dp.enroll(pod, { netnsPath: path })).rejects.toMatchObject(refused);
    }
    const r = await t.dp.reconcile([{ pod, netnsPath: '/proc/self/ns/net' }]);
    expect(r.failed.map((f) => f.uid)).toEqual([pod.uid]);
    expect(t.rules.calls).toEqual([]);
    expect(t.ztunnel.known.size).toBe(0);
    expect(t.probes.entries.size).toBe(0);
    expect(t.dp.cache.has(pod.uid)).toBe(false);
    expect(hostState()).toBe(before);
  });

  it('refuses the host proc root\'s 1/ns/net, and still enrolls a pod netns', async () => {
    const host = await freshNetns();  // stands in for the host
    const root = mkdtempSync(join(tmpdir(), 'pwt-proc-'));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    mkdirSync(join(root, '1', 'ns'), { recursive: true });
    symlinkSync(`/run/netns/${host.name}`, join(root, '1', 'ns', 'net'));
    const t = inMemory({ hostProcRoot: root });
    await expect(t.dp.enroll(pod, { netnsPath: `/run/netns/${host.name}` })).rejects.toMatchObject(refused);
    await expect(t.dp.enroll(pod, { netnsPath: join(root, '1', 'ns', 'net') })).rejects.toMatchObject(refused);
    expect(t.rules.calls).toEqual([]);
    const podNs = await freshNetns();
    await t.dp.enroll(pod, { netnsPath: podNs.path });
    expect(t.rules.applied.get(pod.uid)).toBe(podNs.id.ino);
  });

  it('a node dataplane refuses its host netns (a pwt- node here): no rules, no ZDS add, no probe entry', async () => {
    const { node, agent, newPeer } = await simNode('nn', 1, cleanups);
    const peer = await newPeer();
    const before = await nodeRuleset(node.node);
    const probesBefore = await agent.probes.list();
    for (const path of [`/run/netns/${node.nodeName}`, `/run/netns/../netns/${node.nodeName}`]) {
      await expect(agent.dataplane.enroll(pod, { netnsPath: path })).rejects.toMatchObject(refused);
    }
    expect((await agent.dataplane.reconcile([{ pod, netnsPath: `/run/netns/${node.nodeName}` }])).failed.map((f) => f.uid)).toEqual([pod.uid]);
    expect(await nodeRuleset(node.node)).toBe(before);
    expect(await agent.probes.list()).toEqual(probesBefore);
    expect(peer.log.filter((e) => e.type === 'add')).toEqual([]);
    expect(agent.dataplane.cache.has(pod.uid)).toBe(false);
    // The pod's own netns is fine.
    const p = node.pods[0]!;
    await agent.dataplane.enroll({ ...pod, uid: p.uid, ips: [p.ip4] }, { netnsPath: p.netnsPath });
    expect(peer.active.has(p.uid)).toBe(true);
  });
});
