// The ZDS server under load: an accept flood of silent connections must not
// delay a real ztunnel's snapshot, and a big snapshot must not hold one fd
// per pod at once. Real SOCK_SEQPACKET sockets in a temp dir; netns fds are
// anonymous namespaces (gone once closed).
import {    describe, expect, it } from 'vitest';
import { connect,  type UnixConnection } from '../../lib/net/sock/seqpacket.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { ZdsServer, type ZdsPod } from '../../lib/zds/server.js';
import { decodeRequest, encodeHello, encodeResponse } from '../../lib/zds/codec.js';
import { privileged } from '../helpers/privileged.js';
import { devNull, info, openFds,  until } from './helpers.js';
import { zdsTestLifecycle } from './helpers.js';
import { closeSync } from 'node:fs';

const z = zdsTestLifecycle();
const cleanups = z.cleanups;

async function peerClosed(c: UnixConnection, timeoutMs: number): Promise<boolean> {
  try {
    return (await c.recv({ timeoutMs })) === null;
  } catch (err) {
    return (err as { code?: string }).code === 'ECONNRESET';
  }
}

describe('ZDS server under an accept flood', () => {
  it('a real ztunnel gets its snapshot within 1.5 s behind 150 silent connections, which are all closed in the end', async () => {
    const nullFds = [devNull(), devNull()];
    cleanups.push(() => nullFds.forEach((fd) => closeSync(fd)));
    const pods: ZdsPod[] = nullFds.map((fd, i) => ({ uid: `pod-${i}`, workloadInfo: info(`pod-${i}`), netns: fd }));
    // Upstream's default admission rate (5/s) on purpose: the flood must not eat it.
    const s = new ZdsServer({ path: z.sock.path, provider: { snapshot: () => pods }, helloTimeoutMs: 1000 }).listen();
    cleanups.push(() => s.close());
    const silent: UnixConnection[] = [];
    cleanups.push(() => silent.forEach((c) => c.close()));
    for (let i = 0; i < 150; i++) silent.push(await connect(z.sock.path));
    const peer = new ZtunnelPeer({ path: z.sock.path, listeners: false, backoffMaxMs: 100 });
    cleanups.push(() => peer.stop());
    const t0 = performance.now();
    peer.start();
    await peer.waitFor((p) => p.snapshotReceived, 1500);
    const latency = performance.now() - t0;
    console.log(`snapshot after ${latency.toFixed(1)} ms behind 150 silent connections (evicted so far: ${s.stats.evicted})`);
    expect(latency).toBeLessThan(1500);
    expect([...peer.active.keys()].sort()).toEqual(['pod-0', 'pod-1']);
    expect(s.connectionCount).toBe(1);
    // Every silent one is closed: evicted at once beyond the cap, the rest at their hello deadline.
    const closed = await Promise.all(silent.map((c) => peerClosed(c, 3000)));
    expect(closed.every(Boolean)).toBe(true);
    expect(s.stats.evicted).toBeGreaterThanOrEqual(150 - 32);
    expect(s.pendingHellos).toBe(0);
    // The real one is still there and served.
    expect(s.connectionCount).toBe(1);
    expect(peer.state).toBe('connected');
  });
});

describe.skipIf(!privileged())('ZDS snapshot fd budget', () => {
  it('sends a 520-pod snapshot of real netns fds holding only a few extra fds at any time', async () => {
    const nss: Netns[] = [];
    cleanups.push(() => nss.forEach((n) => n.close()));
    for (let i = 0; i < 520; i++) nss.push(await Netns.createAnonymous());
    const pods: ZdsPod[] = nss.map((ns, i) => ({ uid: `uid-${i}`, workloadInfo: info(`p${i}`), netns: ns }));
    const s = new ZdsServer({ path: z.sock.path, provider: { snapshot: () => pods } }).listen();
    cleanups.push(() => s.close());
    const base = openFds();
    const c = await connect(z.sock.path);
    cleanups.push(() => c.close());
    await c.send(encodeHello());
    let peak = 0;
    let adds = 0;
    for (;;) {
      const m = (await c.recv({ maxBytes: 1024, maxFds: 1, timeoutMs: 5000 }))!;
      const req = decodeRequest(m.data);
      for (const f of m.fds) f.close();  // what the server holds is what is left
      // Our 2 sockets (client + accepted) are part of the count.
      peak = Math.max(peak, openFds() - base - 2);
      if (req.type === 'add') adds++;
      await c.send(encodeResponse());
      if (req.type === 'snapshot_sent') break;
    }
    console.log(`520-pod snapshot: peak extra fds in the server ${peak}`);
    expect(adds).toBe(520);
    expect(peak).toBeLessThanOrEqual(8);
    await until(() => s.stats.snapshots === 1);
  });
});
