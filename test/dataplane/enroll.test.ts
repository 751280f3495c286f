// The enrollment pipeline on the real kernel: rules, ZDS with real netns fds
// to the ztunnel-like peer, the probe set, traffic, an agent restart, IP
// reuse and namespaces that vanish. Everything lives in pwt- namespaces.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeDataplane } from '../../lib/dataplane/node.js';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { buildNode, type DemoNode } from '../../lib/demo/topology.js';
import { tcpProbe } from '../../lib/demo/traffic.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { privileged } from '../helpers/privileged.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

let runs = 0;
async function setup(backend: 'nftables' | 'iptables', pods = 3) {
  const node: DemoNode = await buildNode({ prefix: `pwt-${process.pid}-dp${++runs}-`, pods });
  cleanups.push(() => node.teardown());
  const dir = mkdtempSync(join(tmpdir(), 'pwt-zds-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const zdsPath = join(dir, 'ztunnel.sock');
  const agent = await NodeDataplane.start({ host: node.node, backend, zdsPath });
  let current = agent;
  cleanups.push(() => current.close());
  const peer = new ZtunnelPeer({ path: zdsPath, backoffMaxMs: 100 }).start();
  cleanups.push(() => peer.stop());
  await peer.waitFor((p) => p.snapshotReceived);
  const info = (i: number): PodInfo => {
    const p = node.pods[i]!;
    return { uid: p.uid, name: p.name, namespace: 'test', ips: [p.ip4, p.ip6] };
  };
  const ruleset = async (i: number) => {
    const ns = Netns.open(node.pods[i]!.netnsPath);
    try {
      return (await ns.spawn(['nft', '-a', 'list', 'ruleset'])).stdout;
    } finally {
      ns.close();
    }
  };
  return { node, agent, peer, zdsPath, info, ruleset, replace: (a: NodeDataplane) => { current = a; } };
}

describe.skipIf(!privileged('nft', 'ipset', 'iptables-restore'))('enrollment on the real kernel', () => {
  for (const backend of ['nftables', 'iptables'] as const) {
    it(`enrolls, captures traffic, survives an agent restart without rewriting rules, and unenrolls (${backend})`, async () => {
      const t = await setup(backend);
      for (let i = 0; i < 3; i++) await t.agent.dataplane.enroll(t.info(i), { netnsPath: t.node.pods[i]!.netnsPath });
      expect([...t.peer.active.keys()].sort()).toEqual([0, 1, 2].map((i) => t.info(i).uid).sort());
      expect((await t.agent.probes.list()).map((e) => e.uid).sort()).toEqual([0, 0, 1, 1, 2, 2].map((i) => t.info(i).uid).sort());
      for (let i = 0; i < 3; i++) expect((await t.agent.dataplane.verify(t.info(i), { netnsPath: t.node.pods[i]!.netnsPath })).drift).toEqual([]);
      const src = Netns.open(t.node.pods[0]!.netnsPath);
      try {
        const before = await tcpProbe(src, t.node.pods[1]!.ip4, 8080);
        expect(before).toMatchObject({ by: 'ztunnel', uid: t.info(0).uid, port: 15001, origDst: `${t.node.pods[1]!.ip4}:8080` });
        const rulesBefore = await t.ruleset(0);

        // The agent dies and a new one starts: reconcile finds everything in place.
        await t.agent.close();
        const again = await NodeDataplane.start({ host: t.node.node, backend, zdsPath: t.zdsPath });
        t.replace(again);
        const report = await again.dataplane.reconcile([0, 1, 2].map((i) => ({ pod: t.info(i), netnsPath: t.node.pods[i]!.netnsPath })));
        expect(report).toMatchObject({ pods: 3, repaired: [], failed: [], complete: true, pruned: [], probeEntries: 6 });
        const strip = (r: string) => r.replace(/counter packets \d+ bytes \d+/g, 'counter');
        expect(strip(await t.ruleset(0))).toBe(strip(rulesBefore));  // same handles: nothing was rewritten
        await t.peer.waitFor((p) => p.snapshotReceived && [...p.active.keys()].length === 3);
        expect(await tcpProbe(src, t.node.pods[1]!.ip4, 8080)).toMatchObject({ by: 'ztunnel', port: 15001 });

        // Unenroll a running pod: its rules go; its outbound is no longer captured at the
        // source (pod 1, still enrolled, now captures it inbound on 15006).
        await again.dataplane.unenroll(t.info(0), { podDeleted: false });
        expect(await tcpProbe(src, t.node.pods[1]!.ip4, 8080)).toMatchObject({ by: 'ztunnel', uid: t.info(1).uid, port: 15006 });
        expect((await again.probes.list()).some((e) => e.uid === t.info(0).uid)).toBe(false);
        await t.peer.waitFor((p) => ![...p.active.keys()].includes(t.info(0).uid));
      } finally {
        src.close();
      }
    });
  }

  it('keeps a reused IP with its new owner, and fails a vanished netns without a trace', async () => {
    const t = await setup('nftables', 2);
    const a = t.info(0);
    await t.agent.dataplane.enroll(a, { netnsPath: t.node.pods[0]!.netnsPath });
    // Pod b got a's IPs after a (say) restarted elsewhere; a's late delete must not remove b's entries.
    const b = { ...t.info(1), ips: a.ips };
    await t.agent.dataplane.enroll(b, { netnsPath: t.node.pods[1]!.netnsPath });
    await t.agent.dataplane.unenroll(a, { podDeleted: true });
    expect((await t.agent.probes.list()).map((e) => e.uid)).toEqual([b.uid, b.uid]);

    await Netns.remove(t.node.pods[0]!.netnsName);
    const err = await t.agent.dataplane.enroll(a, { netnsPath: t.node.pods[0]!.netnsPath }).catch((e: unknown) => e);
    expect(err).toMatchObject({ stage: 'netns', retryable: false, code: 'ENOENT' });
    expect(t.agent.dataplane.cache.get(a.uid)).toBeUndefined();
    expect([...t.peer.active.keys()]).toEqual([b.uid]);
  });
});
