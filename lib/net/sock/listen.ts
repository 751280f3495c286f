// Listening and UDP sockets that live inside a netns, driven by Node: the
// addon creates (and for TCP binds and listens) them inside the namespace on
// a job thread (`ns.socket`), and Node adopts the fds. No thread of Node's
// enters the netns.
import { optionalTimeout } from '../../util/timeout.js';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import { native } from '../binding.js';
import { NetError, fromNodeError } from '../errors.js';
import type { Netns } from '../netns/netns.js';
import { constants as osc } from 'node:os';

export interface ListenTcpOptions {
  /** Numeric address; `::` also takes IPv4 (v4-mapped). */
  address: string;
  port: number;
  mark?: number;
  reusePort?: boolean;
  transparent?: boolean;
  backlog?: number;
}

function checkPort(port: number, allowZero = false): void {
  if (!Number.isInteger(port) || port < (allowZero ? 0 : 1) || port > 65535) throw new RangeError(`port ${port} is out of range`);
}

/** A TCP server listening inside `ns`. `onConnection` is the usual net.Server connection listener. */
export async function listenTcp(ns: Netns, opts: ListenTcpOptions, onConnection?: (sock: net.Socket) => void): Promise<net.Server> {
  if (net.isIP(opts.address) === 0) throw new TypeError(`address must be numeric, got ${JSON.stringify(opts.address)}`);
  checkPort(opts.port, true);
  const fd = await ns.socket({
    type: 'tcp', ...(opts.mark !== undefined ? { mark: opts.mark } : {}),
    bind: { address: opts.address, port: opts.port, backlog: opts.backlog ?? 511, reusePort: opts.reusePort ?? false, transparent: opts.transparent ?? false },
  });
  return adoptTcpServer(fd, onConnection);
}

/** A net.Server driving a listening fd (Node owns the fd from here; closed if adoption fails). */
export function adoptTcpServer(fd: number, onConnection?: (sock: net.Socket) => void): Promise<net.Server> {
  const server = net.createServer(onConnection);
  return new Promise((resolve, reject) => {
    server.once('error', (err) => {
      native().fdClose(fd);
      reject(err);
    });
    server.listen({ fd }, () => {
      server.removeAllListeners('error');
      resolve(server);
    });
  });
}

/** An unbound UDP socket created inside `ns` (the kernel binds it on first send). */
export async function udpSocket(ns: Netns, opts: { family: 4 | 6; mark?: number }): Promise<dgram.Socket> {
  const fd = await ns.socket({ family: opts.family, type: 'udp', ...(opts.mark !== undefined ? { mark: opts.mark } : {}) });
  const sock = dgram.createSocket({ type: opts.family === 4 ? 'udp4' : 'udp6' });
  await new Promise<void>((resolve, reject) => {
    sock.once('error', reject);
    sock.bind({ fd }, () => {
      sock.removeListener('error', reject);
      resolve();
    });
  });
  return sock;
}

/**
 * Sends one datagram from inside `ns` and waits for one reply. No reply in
 * `timeoutMs` (default 3000) → NetError ETIMEDOUT, op `udp-exchange`; a send
 * failure → NetError with its errno, op `send`.
 */
export async function udpExchange(ns: Netns, host: string, port: number, payload: Buffer | string,
  opts: { mark?: number; timeoutMs?: number } = {}): Promise<{ data: Buffer; from: { address: string; port: number } }> {
  const family = net.isIP(host);
  if (family === 0) throw new TypeError(`host must be numeric, got ${JSON.stringify(host)}`);
  checkPort(port);
  const timeoutMs = optionalTimeout(opts.timeoutMs, 'timeoutMs', 3000);
  const sock = await udpSocket(ns, { family: family as 4 | 6, ...(opts.mark !== undefined ? { mark: opts.mark } : {}) });
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new NetError(`no UDP reply from ${host}:${port} in ${timeoutMs} ms`, { errno: osc.errno.ETIMEDOUT, op: 'udp-exchange' })), timeoutMs);
      sock.once('message', (data, rinfo) => {
        clearTimeout(timer);
        resolve({ data, from: { address: rinfo.address, port: rinfo.port } });
      });
      sock.send(payload, port, host, (err) => {
        if (err) {
          clearTimeout(timer);
          reject(fromNodeError(err, 'send'));
        }
      });
    });
  } finally {
    sock.close();
  }
}
