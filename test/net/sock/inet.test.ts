// Inet sockets inside a netns: one path (ns.socket) for unbound, bound and
// listening sockets; connect and UDP failures are NetErrors with `op`.
import { createSocket } from 'node:dgram';
import { describe, expect, it } from 'vitest';
import { NetError } from '../../../lib/net/errors.js';
import { Netns } from '../../../lib/net/netns/netns.js';
import { connectTcp } from '../../../lib/net/sock/connect.js';
import { listenTcp, udpExchange, udpSocket } from '../../../lib/net/sock/listen.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

async function rejection(p: Promise<unknown>): Promise<NetError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(NetError);
  return err as NetError;
}

describe.skipIf(!privileged())('sockets in a netns', () => {
  it('connectTcp to a closed port fails with NetError ECONNREFUSED, op connect', async () => {
    const ns = await freshNetns();
    const err = await rejection(connectTcp(ns, '127.0.0.1', 9, { timeoutMs: 2000 }));
    expect(err).toMatchObject({ code: 'ECONNREFUSED', errno: 111, op: 'connect' });
  });

  it('connectTcp that gets no answer times out with NetError ETIMEDOUT, op connect', async () => {
    const ns = await freshNetns();
    const nl = await ns.netlink();
    // A portless bridge with a permanent neighbour: SYNs go nowhere and nothing answers.
    await nl.links.add({ kind: 'bridge', name: 'd0' });
    await nl.links.set('d0', { up: true });
    await nl.addrs.add('d0', '192.0.2.1/24');
    await nl.neigh.replace({ dev: 'd0', address: '192.0.2.9', lladdr: '02:00:00:00:00:09' });
    const err = await rejection(connectTcp(ns, '192.0.2.9', 80, { timeoutMs: 200 }));
    expect(err).toMatchObject({ code: 'ETIMEDOUT', errno: 110, op: 'connect' });
  });

  it('udpExchange with no reply times out with NetError ETIMEDOUT, op udp-exchange', async () => {
    const ns = await freshNetns();
    const err = await rejection(udpExchange(ns, '127.0.0.1', 9, 'x', { timeoutMs: 200 }));
    expect(err).toMatchObject({ code: 'ETIMEDOUT', errno: 110, op: 'udp-exchange' });
  });

  it('refuses timeouts a timer cannot honour (2^31 ms would fire at once), before any socket is made', async () => {
    const ns = await freshNetns();
    for (const timeoutMs of [2 ** 31, -1, 1.5, Number.NaN]) {
      await expect(connectTcp(ns, '127.0.0.1', 9, { timeoutMs })).rejects.toThrow(RangeError);
      await expect(udpExchange(ns, '127.0.0.1', 9, 'x', { timeoutMs })).rejects.toThrow(RangeError);
    }
  });

  it('listenTcp and connectTcp meet inside the netns, both through ns.socket', async () => {
    const ns = await freshNetns();
    const server = await listenTcp(ns, { address: '127.0.0.1', port: 0 }, (s) => s.end('hi'));
    try {
      const { port } = server.address() as { port: number };
      const sock = await connectTcp(ns, '127.0.0.1', port);
      const data: Buffer[] = [];
      for await (const chunk of sock) data.push(chunk as Buffer);
      expect(Buffer.concat(data).toString()).toBe('hi');
    } finally {
      server.close();
    }
  });

  it('udpExchange gets an answer from a UDP socket bound by ns.socket', async () => {
    const ns = await freshNetns();
    const fd = await ns.socket({ type: 'udp', bind: { address: '127.0.0.1', port: 0 } });
    const echo = createSocket('udp4');
    await new Promise<void>((resolve) => echo.bind({ fd }, resolve));
    echo.on('message', (msg, r) => echo.send(msg, r.port, r.address));
    try {
      const { port } = echo.address();
      const r = await udpExchange(ns, '127.0.0.1', port, 'ping', { timeoutMs: 2000 });
      expect(r.data.toString()).toBe('ping');
    } finally {
      echo.close();
    }
  });

  it('ns.socket validates before the kernel and reports bind failures as NetError', async () => {
    const ns = await freshNetns();
    await expect(ns.socket({ type: 'tcp' })).rejects.toThrow(RangeError);
    await expect(ns.socket({ type: 'tcp', bind: { address: 'localhost', port: 1 } })).rejects.toThrow(TypeError);
    await expect(ns.socket({ type: 'tcp', family: 6, bind: { address: '127.0.0.1', port: 1 } })).rejects.toThrow(RangeError);
    await expect(ns.socket({ type: 'udp', bind: { address: '127.0.0.1', port: 70000 } })).rejects.toThrow(RangeError);
    const err = await rejection(ns.socket({ type: 'udp', bind: { address: '192.0.2.1', port: 0 } }));
    expect(err).toMatchObject({ code: 'EADDRNOTAVAIL', op: 'bind' });
    const u = await udpSocket(ns, { family: 6 });
    u.close();
  });

  it('a closed Netns refuses to make sockets (EBADF)', async () => {
    const ns = await freshNetns();
    const again = Netns.open(ns.path);
    again.close();
    await expect(again.socket({ type: 'udp', family: 4 })).rejects.toMatchObject({ code: 'EBADF' });
    await expect(listenTcp(again, { address: '127.0.0.1', port: 0 })).rejects.toMatchObject({ code: 'EBADF' });
  });
});
