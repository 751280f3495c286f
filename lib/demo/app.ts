// The "application" in every demo pod: a TCP server on port 8080 that answers
// one line naming the pod and the peer address it saw, then closes. The peer
// address is how the demo proves that node probes arrive SNATed.
import type { Server } from 'node:net';
import { listenTcp } from '../net/sock/listen.js';
import type { Netns } from '../net/netns/netns.js';

export const APP_PORT = 8080;

/** `app pod=<name> peer=<addr>` as the app writes it; parsed by parseAppReply. */
export function parseAppReply(line: string): { pod: string; peer: string } | undefined {
  const m = /^app pod=(\S+) peer=(\S+)/.exec(line);
  return m ? { pod: m[1]!, peer: m[2]! } : undefined;
}

export async function startApp(ns: Netns, podName: string): Promise<Server> {
  return listenTcp(ns, { address: '::', port: APP_PORT }, (sock) => {
    sock.on('error', () => undefined);
    const peer = (sock.remoteAddress ?? '').replace(/^::ffff:(?=\d+\.)/, '');
    sock.end(`app pod=${podName} peer=${peer}\n`);
  });
}
