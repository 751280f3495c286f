// Real traffic through an enrolled node, and what each connection proves:
// which listener answered (the app, or the ztunnel-like peer on 15001/15006/
// 15008/15053) and the original destination it recorded.
import type { Socket } from 'node:net';
import { connectTcp } from '../net/sock/connect.js';
import { udpExchange } from '../net/sock/listen.js';
import type { Netns } from '../net/netns/netns.js';
import { parseAppReply } from './app.js';

export interface Reply {
  /** 'ztunnel' when the ztunnel-like peer answered, 'app' when the pod's app did. */
  by: 'ztunnel' | 'app' | 'unknown';
  line: string;
  /** ztunnel: the pod whose ztunnel proxy answered and on which port. */
  uid?: string;
  port?: number;
  origDst?: string;
  redirected?: boolean;
  /** app: the pod name and the peer address the app saw. */
  pod?: string;
  peer?: string;
}

export function parseReply(line: string): Reply {
  const z = /^ztunnel-sim uid=(\S+) port=(\d+) orig_dst=(\S+) redirected=(true|false)/.exec(line);
  if (z) return { by: 'ztunnel', line, uid: z[1]!, port: Number(z[2]), origDst: z[3]!, redirected: z[4] === 'true' };
  const a = parseAppReply(line);
  if (a) return { by: 'app', line, pod: a.pod, peer: a.peer };
  return { by: 'unknown', line };
}

function readLine(sock: Socket, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(Object.assign(new Error('no reply'), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      buf += d;
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(buf.split('\n')[0] ?? '');
    });
  });
}

/** Opens a TCP connection from inside `from` and returns who answered. */
export async function tcpProbe(from: Netns, host: string, port: number, opts: { mark?: number; timeoutMs?: number } = {}): Promise<Reply> {
  const sock = await connectTcp(from, host, port, opts);
  return parseReply(await readLine(sock, opts.timeoutMs ?? 3000));
}

/** A DNS-sized UDP datagram from inside `from`; the peer's 15053 echoes it. */
export async function udpProbe(from: Netns, host: string, port: number, opts: { timeoutMs?: number } = {}): Promise<{ from: string }> {
  const r = await udpExchange(from, host, port, 'podwire-demo dns probe', opts);
  return { from: `${r.from.address}:${r.from.port}` };
}

export const hostPort = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);
