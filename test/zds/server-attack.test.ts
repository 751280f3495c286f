// The ZDS server against hostile peers (issue 23, "ZDS: the newest
// connection wins, even a hostile one"): real SOCK_SEQPACKET sockets, the
// ztunnel stand-in (ZtunnelPeer) as the legitimate ztunnel and raw clients
// written here as the attackers.
import { closeSync } from 'node:fs';
import {    describe, expect, it } from 'vitest';
import { connect, OwnedFd,  type UnixConnection } from '../../lib/net/sock/seqpacket.js';
import { encodeHello } from '../../lib/zds/codec.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { ZdsServer, type ZdsPod, type ZdsServerOptions } from '../../lib/zds/server.js';
import type { ZdsError } from '../../lib/zds/errors.js';
import { devNull, FakeZtunnel, hungUp, info,   until } from './helpers.js';
import { zdsTestLifecycle } from './helpers.js';
import { exhaustFds } from '../helpers/fds.js';

const z = zdsTestLifecycle();
const cleanups = z.cleanups;

function server(opts: ZdsServerOptions = {}): ZdsServer {
  const s = new ZdsServer({ path: z.sock.path, keepaliveIntervalMs: 60_000, ...opts }).listen();
  cleanups.push(() => s.close());
  return s;
}
async function client(hello = true): Promise<FakeZtunnel> {
  const c = await FakeZtunnel.connect(z.sock.path, hello);
  cleanups.push(() => c.close());
  return c;
}
function nullFd(): number {
  const fd = devNull();
  cleanups.push(() => closeSync(fd));
  return fd;
}
const disconnects = (s: ZdsServer): Array<{ id: number; reason: ZdsError }> => {
  const out: Array<{ id: number; reason: ZdsError }> = [];
  s.on('disconnect', (i: { id: number }, reason: ZdsError) => out.push({ id: i.id, reason }));
  return out;
};

describe('ZDS routing: a connection that acked is preferred over a newer one that has not', () => {
  it('keeps enrolling through the legitimate ztunnel while a peer reconnects every 200 ms, says hello and never acks', async () => {
    // Upstream's admission rate (5/s); a short ack timeout so the hostile connections come and go.
    const s = server({ ackTimeoutMs: 1000 });
    const gone = disconnects(s);
    const legit = new ZtunnelPeer({ path: z.sock.path, listeners: false, backoffMaxMs: 100 }).start();
    cleanups.push(() => legit.stop());
    await legit.waitFor((p) => p.snapshotReceived);
    const legitId = s.connections()[0]!.id;

    // The attacker: a new connection every 200 ms, hello, then silence (it reads its first request, never acks).
    const hostile: UnixConnection[] = [];
    const firstRecord: Array<() => void> = [];
    let churning = true;
    const churn = (async () => {
      while (churning) {
        const c = await connect(z.sock.path);
        hostile.push(c);
        await c.send(encodeHello());
        void c.recv({ maxBytes: 1024, maxFds: 1 }).then((m) => {
          for (const f of m?.fds ?? []) f.close();
          if (m) for (const w of firstRecord.splice(0)) w();
        }, () => {});
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
    cleanups.push(() => hostile.forEach((c) => c.close()));

    const fd = nullFd();
    for (let i = 0; i < 8; i++) {
      // Right when a hostile connection got its snapshot request it is the newest routable one,
      // far from its ack deadline.
      await new Promise<void>((r) => firstRecord.push(r));
      const newest = s.connections().at(-1)!;
      expect(newest.id).not.toBe(legitId);
      expect(newest.state).toBe('snapshot');
      await s.podAdded({ uid: `live-${i}`, workloadInfo: info(`live-${i}`) }, fd);
      expect(legit.active.has(`live-${i}`)).toBe(true);
      // The add went straight to the ztunnel that acked, not through a failed hostile attempt.
      expect(s.stats.failovers).toBe(0);
    }
    churning = false;
    await churn;
    // Every hostile connection is failed at its ack deadline and closed; the legitimate one stays.
    expect((await Promise.all(hostile.map((c) => hungUpRaw(c, 3000)))).every(Boolean)).toBe(true);
    await until(() => s.connectionCount === 1);
    expect(s.connections()[0]!.id).toBe(legitId);
    expect(gone.length).toBe(hostile.length);
    expect(gone.every((g) => g.reason.code === 'ZDS_TIMEOUT')).toBe(true);
    expect(legit.log.filter((e) => e.type === 'add').map((e) => e.uid)).toEqual([...Array(8).keys()].map((i) => `live-${i}`));
  });

  it('a real ztunnel restart: the new connection becomes the target once it acked its snapshot; the old one is kept for deletes and as fallback', async () => {
    const s = server({ acceptsPerSecond: 1000, provider: { snapshot: () => [{ uid: 'old-pod', workloadInfo: info('old-pod'), netns: nullFd() }] } });
    const oldZ = await client();
    await oldZ.snapshot();
    await until(() => s.connections()[0]?.state === 'ready');
    const newZ = await client();
    const first = await newZ.read();  // its snapshot is under way, not acked yet
    expect(first.req).toMatchObject({ type: 'add', uid: 'old-pod' });
    await until(() => s.connectionCount === 2);

    // During the new one's snapshot the add goes to the old (acked) ztunnel, and is queued for the new one too.
    const during = s.podAdded({ uid: 'during', workloadInfo: info('during') }, nullFd());
    expect(await oldZ.read()).toEqual({ req: { type: 'add', uid: 'during', workloadInfo: info('during') }, fds: 1 });
    await oldZ.ack();
    await during;
    await newZ.ack();
    expect((await newZ.read()).req).toEqual({ type: 'snapshot_sent' });
    await newZ.ack();
    expect(await newZ.read()).toEqual({ req: { type: 'add', uid: 'during', workloadInfo: info('during') }, fds: 1 });
    await newZ.ack();
    await until(() => s.connections()[1]?.state === 'ready');

    // Snapshot acked: the new one is the target; the old one gets no more adds but stays connected.
    const after = s.podAdded({ uid: 'after', workloadInfo: info('after') }, nullFd());
    expect((await newZ.read()).req).toMatchObject({ type: 'add', uid: 'after' });
    await newZ.ack();
    await after;
    await expect(oldZ.read(100)).rejects.toMatchObject({ code: 'ETIMEDOUT' });
    expect(s.connectionCount).toBe(2);
    // Deletes still go to both, oldest first.
    const del = s.podDeleted('after');
    expect((await oldZ.read()).req).toEqual({ type: 'del', uid: 'after' });
    await oldZ.ack();
    expect((await newZ.read()).req).toEqual({ type: 'del', uid: 'after' });
    await newZ.ack();
    await del;
    // The new one goes away: the old one is the target again.
    newZ.close();
    const fallback = s.podAdded({ uid: 'fallback', workloadInfo: info('fallback') }, nullFd());
    expect((await oldZ.read(2000)).req).toMatchObject({ type: 'add', uid: 'fallback' });
    await oldZ.ack();
    await fallback;
  });

  it('with no connection acked yet, an add is not held hostage by a newer silent one: the first to ack its snapshot takes it', async () => {
    const s = server({ acceptsPerSecond: 1000, ackTimeoutMs: 30_000 });
    const legit = await client();
    expect((await legit.read()).req).toEqual({ type: 'snapshot_sent' });  // not acked yet
    const silent = await client();
    expect((await silent.read()).req).toEqual({ type: 'snapshot_sent' });  // never acked
    await until(() => s.connectionCount === 2);
    const silentId = s.connections()[1]!.id;
    const added = s.podAdded({ uid: 'early', workloadInfo: info('early') }, nullFd());
    await legit.ack();
    expect(await legit.read()).toEqual({ req: { type: 'add', uid: 'early', workloadInfo: info('early') }, fds: 1 });
    await legit.ack();
    await added;
    // Resolved through the legitimate ztunnel while the silent one is still connected (its deadline is far).
    expect(s.connections().map((c) => c.id)).toContain(silentId);
    expect(s.stats).toMatchObject({ failovers: 0, timeouts: 0 });
  });
});

describe('ZDS admission queue (said hello, waiting for a token)', () => {
  it('is capped: connections over the cap are closed at once', async () => {
    // One token per 60 s: after the first, everybody waits.
    const s = server({ acceptsPerSecond: 1 / 60, maxAdmissionQueue: 3 });
    const gone = disconnects(s);
    const first = await client();
    await first.snapshot();
    const waiting: FakeZtunnel[] = [];
    for (let i = 0; i < 7; i++) waiting.push(await client());
    await until(() => gone.length === 4);
    expect(gone.every((g) => g.reason.code === 'ZDS_OVERLOAD')).toBe(true);
    expect(s.admissionQueue).toBe(3);
    expect(s.stats.overloaded).toBe(4);
    const hung = await Promise.all(waiting.map((c) => hungUp(c, 200)));
    expect(hung.filter(Boolean)).toHaveLength(4);
    expect(s.connectionCount).toBe(1);
  });

  it('gives every waiting connection a deadline', async () => {
    const s = server({ acceptsPerSecond: 1 / 60, admissionTimeoutMs: 200 });
    const gone = disconnects(s);
    const first = await client();
    await first.snapshot();
    const late = await client();
    expect(await hungUp(late, 3000)).toBe(true);
    expect(gone.map((g) => g.reason.code)).toEqual(['ZDS_TIMEOUT']);
    expect(s.admissionQueue).toBe(0);
    expect(s.connectionCount).toBe(1);
  });

  it('caps the routable connections: a peer that completes the protocol again and again cannot pile up fds', async () => {
    const s = server({ acceptsPerSecond: 1000, maxConnections: 3 });
    const gone = disconnects(s);
    const cs: FakeZtunnel[] = [];
    for (let i = 0; i < 3; i++) {
      const c = await client();
      await c.snapshot();
      cs.push(c);
    }
    const extra = await client();
    expect(await hungUp(extra, 3000)).toBe(true);
    expect(gone.map((g) => g.reason.code)).toEqual(['ZDS_OVERLOAD']);
    expect(s.connectionCount).toBe(3);
  });
});

describe('ZDS snapshot: never sent with holes', () => {
  it('fails the connection (and says so) when a netns cannot be dup\'ed for lack of fds (EMFILE), instead of skipping the pod; the next connection gets everything', async () => {
    const pods: ZdsPod[] = ['a', 'b', 'c'].map((n) => ({ uid: `uid-${n}`, workloadInfo: info(n), netns: nullFd() }));
    const warned: ZdsError[] = [];
    const s = server({ acceptsPerSecond: 1000, provider: { snapshot: () => pods }, warn: (e) => warned.push(e as ZdsError) });
    const gone = disconnects(s);
    const c = await client();
    expect((await c.read()).req).toMatchObject({ type: 'add', uid: 'uid-a' });  // its fd is closed again
    let got;
    const restore = exhaustFds();  // from here no fd can be made in this process
    try {
      await c.ack();
      got = await c.conn.recv({ maxBytes: 1024, maxFds: 0, timeoutMs: 3000 });
    } finally {
      restore();
    }
    expect(got).toBeNull();  // hung up: no snapshot_sent after a missing pod
    expect(gone).toHaveLength(1);
    expect(gone[0]!.reason.code).toBe('ZDS_SNAPSHOT_INCOMPLETE');
    expect((gone[0]!.reason.cause as { code: string }).code).toBe('EMFILE');
    expect(warned.map((e) => e.code)).toEqual(['ZDS_SNAPSHOT_INCOMPLETE']);
    expect(s.stats).toMatchObject({ incompleteSnapshots: 1, snapshots: 0 });
    // ztunnel reconnects and gets the whole cache.
    const again = await client();
    expect((await again.snapshot()).map((r) => [r.req.type, 'uid' in r.req ? r.req.uid : '', r.fds])).toEqual([
      ['add', 'uid-a', 1], ['add', 'uid-b', 1], ['add', 'uid-c', 1], ['snapshot_sent', '', 0],
    ]);
  });

  it('fails the connection when a netns handle is closed and the pod is still in the cache with it', async () => {
    const closed = new OwnedFd(devNull());
    closed.close();
    const pods: ZdsPod[] = [
      { uid: 'uid-a', workloadInfo: info('a'), netns: nullFd() },
      { uid: 'uid-b', workloadInfo: info('b'), netns: closed },
      { uid: 'uid-c', workloadInfo: info('c'), netns: nullFd() },
    ];
    const warned: ZdsError[] = [];
    const s = server({ acceptsPerSecond: 1000, provider: { snapshot: () => pods }, warn: (e) => warned.push(e as ZdsError) });
    const gone = disconnects(s);
    const c = await client();
    expect((await c.read()).req).toMatchObject({ type: 'add', uid: 'uid-a' });
    await c.ack();
    expect(await hungUp(c, 3000)).toBe(true);
    expect(gone.map((g) => g.reason.code)).toEqual(['ZDS_SNAPSHOT_INCOMPLETE']);
    expect(warned.map((e) => e.code)).toEqual(['ZDS_SNAPSHOT_INCOMPLETE']);
    expect(s.stats).toMatchObject({ incompleteSnapshots: 1, snapshots: 0 });
  });

  it('a handle closed because the pod left the cache meanwhile is no hole; one replaced by a new netns is sent with the new one', async () => {
    const closed = new OwnedFd(devNull());
    closed.close();
    const fresh = nullFd();
    let reads = 0;
    let mode: 'removed' | 'replaced' = 'removed';
    const provider = {
      snapshot: (): ZdsPod[] => {
        const stale = reads++ % 2 === 0;  // the first read of each connection has the stale handle
        const b: ZdsPod[] = stale ? [{ uid: 'uid-b', workloadInfo: info('b'), netns: closed }]
          : mode === 'replaced' ? [{ uid: 'uid-b', workloadInfo: info('b2'), netns: fresh }] : [];
        return [{ uid: 'uid-a', workloadInfo: info('a'), netns: nullFd() }, ...b, { uid: 'uid-c', workloadInfo: info('c'), netns: undefined }];
      },
    };
    const s = server({ acceptsPerSecond: 1000, provider });
    const brief = (rs: Awaited<ReturnType<FakeZtunnel['snapshot']>>) => rs.map((r) => [r.req.type, 'uid' in r.req ? r.req.uid : '', r.fds]);
    const c1 = await client();
    expect(brief(await c1.snapshot())).toEqual([['add', 'uid-a', 1], ['keep', 'uid-c', 0], ['snapshot_sent', '', 0]]);
    mode = 'replaced';
    const c2 = await client();
    const got = await c2.snapshot();
    expect(brief(got)).toEqual([['add', 'uid-a', 1], ['add', 'uid-b', 1], ['keep', 'uid-c', 0], ['snapshot_sent', '', 0]]);
    expect(got[1]!.req).toMatchObject({ workloadInfo: info('b2') });
    await until(() => s.stats.snapshots === 2);
    expect(s.stats.incompleteSnapshots).toBe(0);
  });
});

async function hungUpRaw(c: UnixConnection, timeoutMs: number): Promise<boolean> {
  try {
    for (;;) {
      const m = await c.recv({ maxBytes: 1024, maxFds: 1, timeoutMs });
      if (m === null) return true;
      for (const f of m.fds) f.close();
    }
  } catch (err) {
    return (err as { code?: string }).code === 'ECONNRESET';
  }
}

