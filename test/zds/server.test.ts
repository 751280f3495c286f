// The ZDS server against Istio-style fake ztunnel clients over a real
// SOCK_SEQPACKET socket: upstream's scenarios (zds.md §5.2) plus ack
// timeouts, garbage, oversized records, rate limiting and fd hygiene.
import { closeSync, statSync } from 'node:fs';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connect, socketPair } from '../../lib/net/sock/seqpacket.js';
import { native } from '../../lib/net/binding.js';
import { ZdsServer, type ZdsPod, type ZdsServerOptions } from '../../lib/zds/server.js';
import { ZdsError } from '../../lib/zds/errors.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { devNull, FakeZtunnel, hungUp, info, openFds, tempSocketPath, until } from './helpers.js';

let sock: ReturnType<typeof tempSocketPath>;
let servers: ZdsServer[] = [];
let clients: FakeZtunnel[] = [];
let fdsBefore: number;
let ownFds: number[] = [];

// The first native socket makes libuv create its lasting async eventfd:
// before any test counts fds.
beforeAll(() => {
  for (const c of socketPair()) c.close();
});
beforeEach(() => {
  fdsBefore = openFds();
  sock = tempSocketPath();
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) await s.close();
  for (const fd of ownFds.splice(0)) closeSync(fd);
  sock.remove();
  expect(openFds()).toBe(fdsBefore);  // no fd leaks, received or sent
});

function server(opts: ZdsServerOptions = {}): ZdsServer {
  const s = new ZdsServer({ path: sock.path, acceptsPerSecond: 1000, keepaliveIntervalMs: 50, ...opts });
  servers.push(s);
  return s.listen();
}
async function client(hello = true): Promise<FakeZtunnel> {
  const c = await FakeZtunnel.connect(sock.path, hello);
  clients.push(c);
  return c;
}
function nullFd(): number {
  const fd = devNull();
  ownFds.push(fd);
  return fd;
}

describe('ZDS server', () => {
  it('listens with mode 0600, counts a connection and notices it going away', async () => {
    const s = server();
    expect(statSync(sock.path).mode & 0o777).toBe(0o600);
    const c = await client();
    await until(() => s.connectionCount === 1);
    expect(await c.snapshot()).toEqual([{ req: { type: 'snapshot_sent' }, fds: 0 }]);
    await until(() => s.connections()[0]?.state === 'ready');
    expect(s.connections()[0]).toMatchObject({ pid: process.pid, version: 1, sent: 1, acked: 1 });
    c.close();
    await until(() => s.connectionCount === 0);  // found by the keepalive probe
    await s.close();
    expect(() => statSync(sock.path)).toThrow();
  });

  it('sends the snapshot: add with one fd per known netns, keep without fd, then snapshot_sent', async () => {
    const pods: ZdsPod[] = [
      { uid: 'uid-a', workloadInfo: info('a'), netns: nullFd() },
      { uid: 'uid-b', workloadInfo: info('b'), netns: undefined },
      { uid: 'uid-c', workloadInfo: info('c'), netns: nullFd() },
    ];
    server({ provider: { snapshot: () => pods } });
    const c = await client();
    const got = await c.snapshot();
    expect(got).toEqual([
      { req: { type: 'add', uid: 'uid-a', workloadInfo: info('a') }, fds: 1 },
      { req: { type: 'keep', uid: 'uid-b' }, fds: 0 },
      { req: { type: 'add', uid: 'uid-c', workloadInfo: info('c') }, fds: 1 },
      { req: { type: 'snapshot_sent' }, fds: 0 },
    ]);
  });

  it('keeps sending the snapshot after a nack and reports it', async () => {
    const s = server({ provider: { snapshot: () => [{ uid: 'u1', workloadInfo: info('a'), netns: nullFd() }, { uid: 'u2', workloadInfo: info('b'), netns: nullFd() }] } });
    const nacks: unknown[] = [];
    s.on('nack', (e) => nacks.push(e));
    const c = await client();
    expect((await c.read()).req).toMatchObject({ uid: 'u1' });
    await c.ack('failure to start proxy : busy');
    expect((await c.read()).req).toMatchObject({ uid: 'u2' });
    await c.ack();
    expect((await c.read()).req.type).toBe('snapshot_sent');
    await c.ack();
    expect(nacks).toEqual([{ connection: 1, type: 'add', uid: 'u1', error: 'failure to start proxy : busy' }]);
  });

  it('podAdded: add + fd to the ztunnel, resolves on ack, ZDS_NACK on a nack; podDeleted: del without fd', async () => {
    const s = server();
    const c = await client();
    await c.snapshot();
    const fd = nullFd();
    const added = s.podAdded({ uid: 'p1', workloadInfo: info('p1') }, fd);
    expect(await c.read()).toEqual({ req: { type: 'add', uid: 'p1', workloadInfo: info('p1') }, fds: 1 });
    await c.ack();
    await added;
    const nacked = s.podAdded({ uid: 'p2', workloadInfo: info('p2') }, fd);
    await c.read();
    await c.ack('failure to start proxy : nope');
    await expect(nacked).rejects.toMatchObject({ code: 'ZDS_NACK', nack: 'failure to start proxy : nope' });
    const deleted = s.podDeleted('p1');
    expect(await c.read()).toEqual({ req: { type: 'del', uid: 'p1' }, fds: 0 });
    await c.ack('ignored for deletes');
    await deleted;
    expect(s.stats).toMatchObject({ adds: 2, dels: 1, nacks: 2 });
  });

  it('podAdded with no ztunnel connected fails with ZDS_NO_CONNECTION; oversized requests never go out', async () => {
    const s = server();
    await expect(s.podAdded({ uid: 'x', workloadInfo: info('x') }, nullFd())).rejects.toMatchObject({ code: 'ZDS_NO_CONNECTION' });
    const c = await client();
    await c.snapshot();
    await expect(s.podAdded({ uid: 'x', workloadInfo: info('y'.repeat(1100)) }, nullFd())).rejects.toMatchObject({ code: 'ZDS_TOO_LARGE' });
    await expect(s.podAdded({ uid: '', workloadInfo: info('x') }, nullFd())).rejects.toThrow(TypeError);
    await expect(c.read(100)).rejects.toMatchObject({ code: 'ETIMEDOUT' });  // nothing was sent
  });

  it('routes adds to the newest ztunnel, deletes to all (oldest first), and falls back when the newest leaves', async () => {
    const s = server();
    const c1 = await client();
    await c1.snapshot();
    const c2 = await client();
    await c2.snapshot();
    // Both acked their snapshots (until then the older, proved one would get the add).
    await until(() => s.connectionCount === 2 && s.connections().every((c) => c.state === 'ready'));
    const order: string[] = [];
    const added = s.podAdded({ uid: 'n1', workloadInfo: info('n1') }, nullFd());
    expect((await c2.read()).req).toMatchObject({ type: 'add', uid: 'n1' });
    await c2.ack();
    await added;
    await expect(c1.read(100)).rejects.toMatchObject({ code: 'ETIMEDOUT' });
    const deleted = s.podDeleted('n1');
    const r1 = await c1.read();
    order.push('c1');
    await c1.ack();
    const r2 = await c2.read();
    order.push('c2');
    await c2.ack();
    await deleted;
    expect([r1.req, r2.req]).toEqual([{ type: 'del', uid: 'n1' }, { type: 'del', uid: 'n1' }]);
    expect(order).toEqual(['c1', 'c2']);
    // The newest goes away: the older one is the latest again.
    c2.close();
    await until(() => s.connectionCount === 1);
    const again = s.podAdded({ uid: 'n2', workloadInfo: info('n2') }, nullFd());
    expect((await c1.read()).req).toMatchObject({ type: 'add', uid: 'n2' });
    await c1.ack();
    await again;
    c1.close();
    await until(() => s.connectionCount === 0);
  });

  it('drops a connection whose write fails and tells the caller', async () => {
    const s = server({ keepaliveIntervalMs: 60_000 });
    const c = await client();
    await c.snapshot();
    await until(() => s.connections()[0]?.state === 'ready');
    c.close();
    const disconnected = new Promise((r) => s.once('disconnect', (_i, reason) => r(reason)));
    await expect(s.podAdded({ uid: 'w', workloadInfo: info('w') }, nullFd())).rejects.toMatchObject({ code: 'ZDS_CONNECTION_CLOSED' });
    const reason = (await disconnected) as ZdsError;
    expect((reason.cause as { code: string }).code).toBe('EPIPE');
    expect(s.connectionCount).toBe(0);
  });

  it('closes the connection on an ack timeout (a late ack is never taken for the next request)', async () => {
    const s = server({ ackTimeoutMs: 100 });
    const c = await client();
    await c.snapshot();
    const added = s.podAdded({ uid: 't', workloadInfo: info('t') }, nullFd());
    await c.read();
    await expect(added).rejects.toMatchObject({ code: 'ZDS_TIMEOUT' });
    expect(s.connectionCount).toBe(0);
    expect(s.stats.timeouts).toBe(1);
    expect(await hungUp(c)).toBe(true);  // the server hung up
  });

  it('fails the snapshot after the hello deadline and for a client that never says hello', async () => {
    const s = server({ helloTimeoutMs: 100 });
    const reasons: string[] = [];
    s.on('disconnect', (_i, r: ZdsError) => reasons.push(r.code));
    await client(false);
    await until(() => s.stats.disconnects === 1);
    expect(reasons).toEqual(['ZDS_TIMEOUT']);
  });

  it('drops peers that send garbage, oversized records or fds, and keeps serving', async () => {
    const s = server();
    const reasons: string[] = [];
    s.on('disconnect', (_i, r: ZdsError) => reasons.push(r.code));
    const garbage = await connect(sock.path);
    await garbage.send(Buffer.from([0xff, 0xff, 0xff]));
    const big = await connect(sock.path);
    await big.send(Buffer.alloc(4096, 0x08));
    const withFd = await connect(sock.path);
    await withFd.send(Buffer.from([0x08, 0x01]), [nullFd()]);
    await until(() => s.stats.disconnects === 3);
    expect(reasons.sort()).toEqual(['ZDS_PROTOCOL', 'ZDS_PROTOCOL', 'ZDS_PROTOCOL']);
    for (const c of [garbage, big, withFd]) c.close();
    // A bad response is protocol breakage too: oversized (> 64 KiB) nack.
    const c = await client();
    await c.snapshot();
    const added = s.podAdded({ uid: 'o', workloadInfo: info('o') }, nullFd());
    await c.read();
    await c.conn.send(Buffer.alloc(70_000, 0x0a));
    await expect(added).rejects.toMatchObject({ code: 'ZDS_PROTOCOL' });
    // Still serving.
    const ok = await client();
    expect((await ok.snapshot()).map((r) => r.req.type)).toEqual(['snapshot_sent']);
  });

  it('closes a connection that sends unsolicited data while idle (keepalive)', async () => {
    const s = server({ keepaliveIntervalMs: 30 });
    const c = await client();
    await c.snapshot();
    await until(() => s.connections()[0]?.state === 'ready');
    await c.ack();  // unsolicited
    await until(() => s.connectionCount === 0);
    expect(await hungUp(c)).toBe(true);
  });

  it('does not deadlock: a delete stuck on a silent ztunnel returns when it is reaped, and new connections are served meanwhile', async () => {
    const s = server({ keepaliveIntervalMs: 60_000 });
    const silent = await client();
    await silent.snapshot();
    await until(() => s.connections()[0]?.state === 'ready');
    const deleted = s.podDeleted('stuck');
    await silent.read();  // never acked
    const fresh = await client();  // not blocked by the pending delete
    await fresh.snapshot();
    await until(() => s.connectionCount === 2);
    silent.close();
    await expect(deleted).rejects.toMatchObject({ code: 'ZDS_CONNECTION_CLOSED' });
    expect(s.connectionCount).toBe(1);
  });

  it('queues live updates behind the snapshot, in order, one at a time', async () => {
    const s = server({ provider: { snapshot: () => [{ uid: 's1', workloadInfo: info('s1'), netns: nullFd() }] } });
    const c = await client();
    await until(() => s.connectionCount === 1);
    const a = s.podAdded({ uid: 'q1', workloadInfo: info('q1') }, nullFd());
    const d = s.podDeleted('q0');
    expect(s.connections()[0]!.queued).toBe(2);
    const seen: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await c.read();
      seen.push(`${r.req.type}:${'uid' in r.req ? r.req.uid : ''}`);
      await c.ack();
    }
    await Promise.all([a, d]);
    expect(seen).toEqual(['add:s1', 'snapshot_sent:', 'add:q1', 'del:q0']);
  });

  it('admits (starts snapshots for) at most N speaking connections per second', async () => {
    const s = new ZdsServer({ path: sock.path, acceptsPerSecond: 10 });
    servers.push(s.listen());
    const times: number[] = [];
    s.on('ready', () => times.push(Date.now()));
    const cs = [];
    for (let i = 0; i < 3; i++) cs.push(await client());
    await Promise.all(cs.map((c) => c.snapshot()));
    await until(() => times.length === 3);
    expect(times[2]! - times[0]!).toBeGreaterThanOrEqual(190);
  });

  it('rejects peers whose uid is not allowed', async () => {
    const s = server({ allowedUids: [4242] });
    const rejected = new Promise((r) => s.once('rejected', r));
    const c = await client();
    expect(await rejected).toMatchObject({ uid: process.getuid!() });
    expect(await hungUp(c)).toBe(true);
    expect(s.connectionCount).toBe(0);
  });

  it('close() fails pending requests with ZDS_SERVER_CLOSED', async () => {
    const s = server();
    const c = await client();
    await c.snapshot();
    const added = s.podAdded({ uid: 'c', workloadInfo: info('c') }, nullFd());
    await c.read();
    const failed = expect(added).rejects.toMatchObject({ code: 'ZDS_SERVER_CLOSED' });
    await s.close();
    await failed;
    await expect(s.podDeleted('c')).rejects.toMatchObject({ code: 'ZDS_SERVER_CLOSED' });
  });

  it('rejects bad options and input up front', () => {
    expect(() => new ZdsServer({ path: sock.path, mode: 0o1777 })).toThrow(RangeError);
    expect(() => new ZdsServer({ path: sock.path, ackTimeoutMs: 0 })).toThrow(RangeError);
    expect(() => new ZdsServer({ path: sock.path, allowedUids: [-1] })).toThrow(TypeError);
    expect(() => new ZdsServer({ path: sock.path, maxPendingHellos: 0 })).toThrow(RangeError);
  });

  it('refuses every timeout/interval option a timer cannot honour (>= 2^31 ms would fire after 1 ms)', () => {
    const names = ['helloTimeoutMs', 'writeTimeoutMs', 'ackTimeoutMs', 'keepaliveIntervalMs', 'keepaliveProbeMs'] as const;
    for (const name of names) {
      for (const bad of [2 ** 31, 2 ** 40, 1.5, 0, -1, Number.NaN, Infinity]) {
        expect(() => new ZdsServer({ path: sock.path, [name]: bad }), `${name}=${bad}`).toThrow(RangeError);
      }
      expect(() => new ZdsServer({ path: sock.path, [name]: 2 ** 31 - 1 })).not.toThrow();
    }
    // The interval between admissions is a timer delay too.
    expect(() => new ZdsServer({ path: sock.path, acceptsPerSecond: 1e-7 })).toThrow(RangeError);
  });

  it('the largest honoured timeouts (2^31 - 1 ms) really wait: nothing is dropped early', async () => {
    const s = server({ ackTimeoutMs: 2 ** 31 - 1, writeTimeoutMs: 2 ** 31 - 1, keepaliveIntervalMs: 2 ** 31 - 1 });
    const c = await client();
    await c.snapshot();
    const added = s.podAdded({ uid: 'slow', workloadInfo: info('slow') }, nullFd());
    await c.read();
    await new Promise((r) => setTimeout(r, 300));
    expect(s.connectionCount).toBe(1);
    await c.ack();
    await added;
    expect(s.stats).toMatchObject({ timeouts: 0, disconnects: 0, adds: 1 });
  });

  it('podAdded never settles on a dead connection: it falls back to the next newest live one (EPIPE, ack timeout, silent newest)', async () => {
    const s = server({ keepaliveIntervalMs: 60_000, ackTimeoutMs: 200 });
    const c1 = await client();
    await c1.snapshot();
    const c2 = await client();
    await c2.snapshot();
    await until(() => s.connectionCount === 2 && s.connections().every((c) => c.state === 'ready'));
    // The newest died without the server noticing yet (the keepalive is far away).
    c2.close();
    const a1 = s.podAdded({ uid: 'f1', workloadInfo: info('f1') }, nullFd());
    expect(await c1.read()).toEqual({ req: { type: 'add', uid: 'f1', workloadInfo: info('f1') }, fds: 1 });
    await c1.ack();
    await a1;
    expect(s.connectionCount).toBe(1);
    // The newest does not answer: after the ack timeout it is dropped, and the older one gets the add.
    const c3 = await client();
    await c3.snapshot();
    await until(() => s.connectionCount === 2 && s.connections()[1]?.state === 'ready');
    const a2 = s.podAdded({ uid: 'f2', workloadInfo: info('f2') }, nullFd());
    expect((await c3.read()).req).toMatchObject({ type: 'add', uid: 'f2' });
    expect((await c1.read(2000)).req).toMatchObject({ type: 'add', uid: 'f2' });
    await c1.ack();
    await a2;
    expect(await hungUp(c3)).toBe(true);
    // A newer connection that never says hello is never the one chosen.
    const silent = await client(false);
    await until(() => s.pendingHellos === 1);
    const a3 = s.podAdded({ uid: 'f3', workloadInfo: info('f3') }, nullFd());
    expect((await c1.read(500)).req).toMatchObject({ type: 'add', uid: 'f3' });
    await c1.ack();
    await a3;
    silent.close();
    expect(s.stats.failovers).toBe(2);
    // Only when no connection is live does it fail.
    c1.close();
    await expect(s.podAdded({ uid: 'f4', workloadInfo: info('f4') }, nullFd())).rejects.toMatchObject({ code: 'ZDS_CONNECTION_CLOSED' });
    expect(s.connectionCount).toBe(0);
    await expect(s.podAdded({ uid: 'f5', workloadInfo: info('f5') }, nullFd())).rejects.toMatchObject({ code: 'ZDS_NO_CONNECTION' });
  });

  it('sends an entry it cannot encode as keep, leaves out one it cannot name, and reports both (one bad pod never stops the snapshot)', async () => {
    const pods = [
      { uid: 'good-1', workloadInfo: info('g1'), netns: nullFd() },
      { uid: '', workloadInfo: info('empty-uid'), netns: nullFd() },
      { uid: 42, workloadInfo: info('number-uid'), netns: undefined },
      { uid: 'bad-name', workloadInfo: { name: 7, namespace: 'default', serviceAccount: 'sa' }, netns: nullFd() },
      { uid: 'no-ns', workloadInfo: { name: 'x', serviceAccount: 'sa' }, netns: undefined },
      { uid: 'no-info', netns: undefined },
      { uid: 'too-big', workloadInfo: info('y'.repeat(1100)), netns: nullFd() },
      { uid: 'u'.repeat(1100), workloadInfo: info('uid-too-big'), netns: nullFd() },
      null,
      { uid: 'good-keep', workloadInfo: info('gk'), netns: undefined },
      { uid: 'good-2', workloadInfo: info('g2'), netns: nullFd() },
    ] as unknown as ZdsPod[];
    const warned: ZdsError[] = [];
    const s = server({ provider: { snapshot: () => pods }, warn: (e) => warned.push(e as ZdsError) });
    const events: ZdsError[] = [];
    s.on('warning', (e: ZdsError) => events.push(e));
    const snapshots = [];
    for (let i = 0; i < 2; i++) {  // every new connection gets the same
      const c = await client();
      snapshots.push(await c.snapshot());
    }
    const want = [
      { req: { type: 'add', uid: 'good-1', workloadInfo: info('g1') }, fds: 1 },
      { req: { type: 'keep', uid: 'bad-name' }, fds: 0 },  // its add cannot be encoded
      // An unknown netns is a keep whatever the info: nothing else of it is sent.
      { req: { type: 'keep', uid: 'no-ns' }, fds: 0 },
      { req: { type: 'keep', uid: 'no-info' }, fds: 0 },
      { req: { type: 'keep', uid: 'too-big' }, fds: 0 },  // its add is over 1024 bytes
      { req: { type: 'keep', uid: 'good-keep' }, fds: 0 },
      { req: { type: 'add', uid: 'good-2', workloadInfo: info('g2') }, fds: 1 },
      { req: { type: 'snapshot_sent' }, fds: 0 },
    ];
    expect(snapshots).toEqual([want, want]);
    // Per connection: 4 left out (empty, number, 1100-byte uid, null), 2 sent as keep (bad-name, too-big).
    expect(s.stats.skipped).toBe(2 * 6);
    expect(warned).toHaveLength(12);
    expect(warned.every((e) => e.code === 'ZDS_BAD_ENTRY')).toBe(true);
    expect(events).toEqual(warned);
    await until(() => s.stats.snapshots === 2);
    expect(s.stats.incompleteSnapshots).toBe(0);
    // Healthy pods are still served.
    const c = clients[clients.length - 1]!;
    const added = s.podAdded({ uid: 'after', workloadInfo: info('after') }, nullFd());
    expect((await c.read()).req).toMatchObject({ type: 'add', uid: 'after' });
    await c.ack();
    await added;
  });
});

describe.skipIf(!privileged())('ZDS server with real netns fds', () => {
  it('hands the pod netns itself to ztunnel and closes nothing of the caller', async () => {
    const ns = await freshNetns();
    const s = server({ provider: { snapshot: () => [{ uid: 'real', workloadInfo: info('real'), netns: ns }] } });
    const c = await client();
    const m = (await c.conn.recv({ maxFds: 1 }))!;
    expect(m.fds).toHaveLength(1);
    expect(native().nsStat(m.fds[0]!.fd)).toEqual(ns.id);
    m.fds[0]!.close();
    await c.ack();
    await c.snapshot();
    // podAdded copies the fd at once: closing the Netns right after is safe.
    const added = s.podAdded({ uid: 'real2', workloadInfo: info('real2') }, ns);
    const m2 = (await c.conn.recv({ maxFds: 1 }))!;
    expect(native().nsStat(m2.fds[0]!.fd)).toEqual(ns.id);
    m2.fds[0]!.close();
    await c.ack();
    await added;
    expect(ns.closed).toBe(false);
    ns.close();  // before the fd count of afterEach
  });
});
