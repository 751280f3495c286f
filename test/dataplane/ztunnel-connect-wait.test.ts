// A CNI ADD that finds no ztunnel connected (the agent, ztunnel or the node just restarted) waits
// a bounded time for one instead of failing the pod's sandbox at once (seen on the real node,
// test/e2e/node.test.ts: every ADD in the second after an agent upgrade failed and was retried).
import { describe, expect, it } from 'vitest';
import { ZdsZtunnel } from '../../lib/dataplane/ztunnel-zds.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { FakeZtunnel, zdsTestLifecycle } from '../zds/helpers.js';
import { privileged } from '../helpers/privileged.js';

const pod = { uid: 'u-wait', name: 'p', namespace: 'default', ips: ['10.0.0.9'] };

describe.skipIf(!privileged())('ZdsZtunnel.podAdded with connectWaitMs', () => {
  const life = zdsTestLifecycle();

  it('waits for a ztunnel that connects within the wait, and is answered by it', async () => {
    const zt = new ZdsZtunnel({ path: life.sock.path }, () => []).listen();
    life.cleanups.push(() => zt.close());
    const ns = Netns.open('/proc/self/ns/net');
    life.cleanups.push(() => ns.close());
    const added = zt.podAdded(pod, ns, { connectWaitMs: 5000 });
    await new Promise((r) => setTimeout(r, 300));
    const peer = await FakeZtunnel.connect(life.sock.path);
    life.cleanups.push(() => peer.close());
    expect((await peer.snapshot()).map((r) => r.req.type)).toEqual(['snapshot_sent']);
    const req = await peer.read();
    expect(req.req).toMatchObject({ type: 'add', uid: 'u-wait' });
    await peer.ack();
    await expect(added).resolves.toBeUndefined();
  });

  it('fails with ZDS_NO_CONNECTION once the wait is over, and at once without one', async () => {
    const zt = new ZdsZtunnel({ path: life.sock.path }, () => []).listen();
    life.cleanups.push(() => zt.close());
    const ns = Netns.open('/proc/self/ns/net');
    life.cleanups.push(() => ns.close());
    await expect(zt.podAdded(pod, ns)).rejects.toMatchObject({ code: 'ZDS_NO_CONNECTION' });
    const t0 = Date.now();
    await expect(zt.podAdded(pod, ns, { connectWaitMs: 200 })).rejects.toMatchObject({ code: 'ZDS_NO_CONNECTION' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
  });
});
