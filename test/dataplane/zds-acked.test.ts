// "Acked" is per ztunnel connection: an ack counts for the connection that
// gave it and only while it lives; a new ztunnel that refuses the pod in its
// snapshot leaves it unacked (CHECK and the drift check see drift), and a
// new ztunnel that acks its snapshot add makes it acked again.
import { afterEach, describe, expect, it } from 'vitest';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { privileged } from '../helpers/privileged.js';
import { simNode } from '../helpers/sim-node.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

const NOT_ACKED = 'ztunnel: pod not acknowledged by any connection';

describe.skipIf(!privileged('nft'))('ZDS acked state', () => {
  it('is dropped by a disconnect and a new ztunnel\'s nack, and re-established by a new ztunnel\'s snapshot ack', async () => {
    const { node, agent, zdsPath } = await simNode('ack', 1, cleanups);
    const p = node.pods[0]!;
    const pod: PodInfo = { uid: p.uid, name: p.name, namespace: 'test', ips: [p.ip4, p.ip6] };
    const zds = agent.zds!;
    const peer = async (opts: ConstructorParameters<typeof ZtunnelPeer>[0] = {}) => {
      const z = new ZtunnelPeer({ path: zdsPath, backoffMaxMs: 100, listeners: false, ...opts }).start();
      cleanups.push(() => z.stop());
      await z.waitFor((x) => x.snapshotReceived);
      return z;
    };

    const first = await peer();
    await agent.dataplane.enroll(pod, { netnsPath: p.netnsPath });
    expect(zds.knows(pod.uid)).toBe(true);
    expect((await agent.dataplane.verify(pod)).drift).toEqual([]);

    await first.stop();
    await new Promise<void>((resolve) => (zds.server.connectionCount === 0 ? resolve() : zds.server.once('disconnect', () => resolve())));
    expect(zds.knows(pod.uid)).toBe(false);

    // A new ztunnel refuses the pod in its snapshot: not acked, although the agent once saw an ack for it.
    const refusing = await peer({ faults: { nackUids: new Map([[pod.uid, 'failure to start proxy : boom']]) } });
    expect(refusing.log.filter((e) => e.type === 'add' && e.uid === pod.uid).map((e) => e.response)).toEqual(['failure to start proxy : boom']);
    expect(zds.server.connectionCount).toBe(1);
    expect(zds.knows(pod.uid)).toBe(false);
    expect((await agent.dataplane.verify(pod)).drift).toEqual([NOT_ACKED]);
    await refusing.stop();

    // The next ztunnel acks its snapshot add: acked again, without a live add.
    const accepting = await peer();
    expect(accepting.log.filter((e) => e.type === 'add' && e.uid === pod.uid).map((e) => e.response)).toEqual(['']);
    expect(zds.knows(pod.uid)).toBe(true);
    expect((await agent.dataplane.verify(pod)).drift).toEqual([]);
  });
});
