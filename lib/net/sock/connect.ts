// TCP connections made from inside a netns without entering it: the socket is
// created in the namespace by the addon, then adopted and driven by Node.
import { optionalTimeout } from '../../util/timeout.js';
import { isIP, Socket } from 'node:net';
import { constants as osc } from 'node:os';
import { NetError, fromNodeError } from '../errors.js';
import type { Netns } from '../netns/netns.js';

export interface ConnectOptions {
  /** SO_MARK on the socket (e.g. ztunnel's 0x539). */
  mark?: number;
  /** Give up (ETIMEDOUT) after this long. Default 5000. */
  timeoutMs?: number;
}

/**
 * Connects from inside `ns` to host:port (numeric host); resolves once
 * connected. Failures are NetErrors: op `connect` with the kernel's code
 * (`ECONNREFUSED`, `ENETUNREACH`, ...), or code `ETIMEDOUT` with op `connect`
 * when `timeoutMs` passes first; socket creation fails with op `socket`.
 */
export async function connectTcp(ns: Netns, host: string, port: number, opts: ConnectOptions = {}): Promise<Socket> {
  const family = isIP(host);
  if (family === 0) throw new TypeError(`host must be a numeric IP address, got ${JSON.stringify(host)}`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port ${port} is out of range 1-65535`);
  const timeoutMs = optionalTimeout(opts.timeoutMs, 'timeoutMs', 5000);
  const fd = await ns.socket({ family: family as 4 | 6, type: 'tcp', ...(opts.mark !== undefined ? { mark: opts.mark } : {}) });
  const sock = new Socket({ fd, readable: true, writable: true });  // Node owns (and closes) the fd now
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new NetError(`connect ${host}:${port} timed out after ${timeoutMs} ms`, { errno: osc.errno.ETIMEDOUT, op: 'connect' }));
    }, timeoutMs);
    sock.once('error', (err) => {
      clearTimeout(timer);
      sock.destroy();
      reject(fromNodeError(err, 'connect'));
    });
    sock.connect({ host, port }, () => {
      clearTimeout(timer);
      sock.removeAllListeners('error');
      resolve(sock);
    });
  });
}
