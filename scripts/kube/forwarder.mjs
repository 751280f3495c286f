#!/usr/bin/env node
// A TCP relay from inside a netns to the host's loopback, for a test node's kubelet and
// hostNetwork pods to reach the apiserver that listens on the host's 127.0.0.1 (the node netns
// has no route to it, and the host's interfaces and routes are never changed):
//   node scripts/kube/forwarder.mjs <netns path> <listen ip:port> <target ip:port>
// The listening socket is made inside the netns by podwire's addon (listenTcp); the outgoing
// connections are ordinary host sockets. Capped: connections, and idle time per connection.
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';

const MAX_CONNECTIONS = 256;
const IDLE_MS = 10 * 60_000; // a watch may be quiet for minutes; a stuck peer is not forever

const [nsPath, listen, target] = process.argv.slice(2);
const split = (a) => {
  const i = a?.lastIndexOf(':') ?? -1;
  const port = Number(a?.slice(i + 1));
  if (i < 1 || !Number.isInteger(port) || port < 1 || port > 65535) {
    console.error(`usage: forwarder.mjs <netns path> <listen ip:port> <target ip:port> (got ${JSON.stringify(a)})`);
    process.exit(2);
  }
  return { address: a.slice(0, i), port };
};
const from = split(listen);
const to = split(target);
const dist = new URL('../../dist/', import.meta.url);
const { Netns } = await import(fileURLToPath(new URL('net/netns/netns.js', dist)));
const { listenTcp } = await import(fileURLToPath(new URL('net/sock/listen.js', dist)));

const ns = Netns.open(nsPath);
let open = 0;
const server = await listenTcp(ns, { address: from.address, port: from.port }, (sock) => {
  if (open >= MAX_CONNECTIONS) {
    sock.destroy();
    return;
  }
  open++;
  const up = connect(to.port, to.address);
  const done = () => {
    sock.destroy();
    up.destroy();
  };
  sock.once('close', () => {
    open--;
    up.destroy();
  });
  for (const s of [sock, up]) {
    s.setTimeout(IDLE_MS, done);
    s.on('error', done);
  }
  sock.pipe(up).pipe(sock);
});
ns.close();
server.on('error', (err) => {
  console.error(`forwarder: ${err.message}`);
});
console.error(`forwarder: ${nsPath} ${listen} → ${target}`);
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
