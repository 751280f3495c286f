// Real traffic between test namespaces: a "node" netns and a "pod" netns
// joined by a veth (v4 and v6, nodad), optionally a "client" netns routed
// through the node; listeners opened inside a netns with the native inet
// sockets (SO_MARK, IP_TRANSPARENT) and served from this process; probes
// run by one python3 child per batch inside the netns.
import { execFileSync } from 'node:child_process';
import * as dgram from 'node:dgram';
import * as net from 'node:net';
import { native } from '../../lib/net/binding.js';
import type { Netns } from '../../lib/net/netns/netns.js';
import { freshNetns } from './netns.js';

export const NODE4 = '10.99.0.1';
export const NODE6 = 'fd00:99::1';
export const POD4 = '10.99.0.2';
export const POD6 = 'fd00:99::2';
export const CLIENT4 = '10.98.0.2';
export const CLIENT6 = 'fd00:98::2';

export type TestNs = Netns & { name: string };

export interface Topology {
  node: TestNs;
  pod: TestNs;
  client?: TestNs;
}

async function wire(a: TestNs, aIf: string, aAddrs: string[], b: TestNs, bAddrs: string[], bGw: [string, string]): Promise<void> {
  const anl = await a.netlink();
  await anl.links.add({ kind: 'veth', name: aIf, peer: { name: 'eth0', netns: b } });
  for (const cidr of aAddrs) await anl.addrs.add(aIf, cidr, { noDad: cidr.includes(':') });
  await anl.links.set(aIf, { up: true });
  const bnl = await b.netlink();
  for (const cidr of bAddrs) await bnl.addrs.add('eth0', cidr, { noDad: cidr.includes(':') });
  await bnl.links.set('eth0', { up: true });
  await bnl.routes.add({ dst: 'default', gateway: bGw[0] });
  await bnl.routes.add({ dst: 'default', gateway: bGw[1] });
  await pinNeighbours(a, aIf, aAddrs, b, bAddrs);
}

/**
 * Permanent neighbour entries both ways, so ARP/NDP never races the test's
 * first packets (a node cannot even solicit for a packet whose source was
 * SNATed to an address it does not own); these tests are about netfilter.
 */
async function pinNeighbours(a: TestNs, aIf: string, aAddrs: string[], b: TestNs, bAddrs: string[]): Promise<void> {
  const aMac = (await (await a.netlink()).links.get(aIf)).address!;
  const bMac = (await (await b.netlink()).links.get('eth0')).address!;
  const pin = (ns: TestNs, dev: string, ip: string, mac: string) =>
    execFileSync('ip', ['-n', ns.name, 'neigh', 'replace', ip, 'lladdr', mac, 'dev', dev, 'nud', 'permanent']);
  for (const ip of bAddrs) pin(a, aIf, ip.split('/')[0]!, bMac);
  for (const ip of aAddrs) pin(b, 'eth0', ip.split('/')[0]!, aMac);
}

/** node ⇄ pod (and client ⇄ node, forwarded by the node, when asked). */
export async function topology(opts: { client?: boolean } = {}): Promise<Topology> {
  const node = await freshNetns();
  const pod = await freshNetns();
  await wire(node, 'pwpod0', [`${NODE4}/24`, `${NODE6}/64`], pod, [`${POD4}/24`, `${POD6}/64`], [NODE4, NODE6]);
  if (!opts.client) return { node, pod };
  const client = await freshNetns();
  await wire(node, 'pwcli0', ['10.98.0.1/24', 'fd00:98::1/64'], client, [`${CLIENT4}/24`, `${CLIENT6}/64`], ['10.98.0.1', 'fd00:98::1']);
  await node.sysctl.set('net.ipv4.ip_forward', 1);
  await node.sysctl.set('net.ipv6.conf.all.forwarding', 1);
  return { node, pod, client };
}

export interface ListenSpec {
  /** Name in the reply (`ztunnel`, `app`, `node`). */
  name: string;
  port: number;
  udp?: boolean;
  /** Default `::` (dual stack) for TCP. */
  address?: string;
  mark?: number;
  transparent?: boolean;
}

export interface Listeners {
  close(): void;
}

const plain = (a: string | undefined) => (a ?? '').replace(/^::ffff:/, '');

/**
 * Opens the sockets inside `ns` and answers every TCP connection with
 * `NAME port=P orig=ADDR:PORT redirected=BOOL peer=ADDR` (the original
 * destination from SO_ORIGINAL_DST, or the local address when not NATed) and
 * every UDP datagram with `NAME port=P`.
 */
export async function listen(ns: Netns, specs: ListenSpec[]): Promise<Listeners> {
  const opened = await native().inetOpen(ns.fd, specs.map((s) => ({
    udp: !!s.udp, address: s.address ?? '::', port: s.port, mark: s.mark ?? 0, reusePort: false,
    transparent: !!s.transparent, optional: false,
  })));
  const closers: Array<() => void> = [];
  for (const [i, s] of specs.entries()) {
    const fd = opened[i]!.fd!;
    if (s.udp) {
      const sock = dgram.createSocket({ type: (s.address ?? '::').includes(':') ? 'udp6' : 'udp4' });
      sock.on('error', () => {});
      sock.on('message', (_msg, rinfo) => sock.send(`${s.name} port=${s.port}\n`, rinfo.port, rinfo.address));
      sock.bind({ fd });
      closers.push(() => sock.close());
      continue;
    }
    const server = net.createServer((c) => {
      c.on('error', () => {});
      const cfd = (c as unknown as { _handle?: { fd?: number } })._handle?.fd ?? -1;
      const o = native().inetOriginalDst(cfd);
      const dst = o.family === 6 ? `[${o.address}]:${o.port}` : `${o.address}:${o.port}`;
      c.end(`${s.name} port=${s.port} orig=${dst} redirected=${o.redirected} peer=${plain(c.remoteAddress)}\n`);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ fd }, () => resolve());
    });
    closers.push(() => server.close());
  }
  return { close: () => { for (const c of closers) c(); } };
}

/** ztunnel's in-pod sockets: 15001, 15006, 15008 and DNS 15053 (TCP + UDP, v4 + v6), all marked 0x539. */
export function ztunnelSpecs(opts: { mark?: number; transparent?: boolean } = {}): ListenSpec[] {
  const mark = opts.mark ?? 0x539;
  const t = { mark, transparent: !!opts.transparent };
  return [
    { name: 'ztunnel', port: 15001, ...t },
    { name: 'ztunnel', port: 15006, ...t },
    { name: 'ztunnel', port: 15008, ...t },
    { name: 'ztunnel-dns', port: 15053, address: '127.0.0.1', ...t },
    { name: 'ztunnel-dns', port: 15053, address: '::1', ...t },
    { name: 'ztunnel-dns', port: 15053, address: '127.0.0.1', udp: true, mark },
    { name: 'ztunnel-dns', port: 15053, address: '::1', udp: true, mark },
  ];
}

export interface Probe {
  proto: 'tcp' | 'udp';
  host: string;
  port: number;
  /** SO_MARK on the client socket. */
  mark?: number;
}

export interface Reply {
  /** The raw answer, or `ERR:<python exception>`. */
  text: string;
  name?: string;
  port?: number;
  orig?: string;
  redirected?: boolean;
  peer?: string;
}

const PROBER = `
import json, os, socket, sys
from concurrent.futures import ThreadPoolExecutor
cfg = json.loads(sys.argv[1])
if cfg.get('uid') is not None:
    os.setgid(cfg['uid']); os.setuid(cfg['uid'])
def run(p):
    fam = socket.AF_INET6 if ':' in p['host'] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM if p['proto'] == 'tcp' else socket.SOCK_DGRAM)
    try:
        s.settimeout(3)
        if p.get('mark'): s.setsockopt(socket.SOL_SOCKET, 36, p['mark'])
        if p['proto'] == 'tcp':
            s.connect((p['host'], p['port'])); data = b''
            while True:
                chunk = s.recv(512)
                if not chunk: break
                data += chunk
        else:
            # Datagrams may be lost while a neighbour is resolved: retry like a DNS client.
            s.settimeout(0.5)
            for attempt in range(6):
                s.sendto(b'q', (p['host'], p['port']))
                try:
                    data, _ = s.recvfrom(512); break
                except socket.timeout:
                    if attempt == 5: raise
        return data.decode().strip()
    except Exception as e:
        return 'ERR:' + type(e).__name__
    finally:
        s.close()
with ThreadPoolExecutor(16) as ex:
    print(json.dumps(list(ex.map(run, cfg['probes']))))
`;

function parseReply(text: string): Reply {
  const r: Reply = { text };
  const m = /^(\S+) port=(\d+)(?: orig=(\S+) redirected=(\w+) peer=(\S*))?$/.exec(text);
  if (!m) return r;
  r.name = m[1]!;
  r.port = Number(m[2]);
  if (m[3] !== undefined) {
    r.orig = m[3];
    r.redirected = m[4] === 'true';
    r.peer = m[5]!;
  }
  return r;
}

/** Runs the probes concurrently from inside `ns` (as `uid` when given); one reply per probe, in order. */
export async function probe(ns: Netns, probes: Probe[], opts: { uid?: number } = {}): Promise<Reply[]> {
  const r = await ns.spawn(['python3', '-c', PROBER, JSON.stringify({ probes, uid: opts.uid ?? null })], { timeoutMs: 20_000 });
  if (r.code !== 0) throw new Error(`prober failed (${r.code}): ${r.stderr}`);
  return (JSON.parse(r.stdout) as string[]).map(parseReply);
}

export const tcp = (host: string, port: number, mark?: number): Probe => ({ proto: 'tcp', host, port, ...(mark ? { mark } : {}) });
export const udp = (host: string, port: number, mark?: number): Probe => ({ proto: 'udp', host, port, ...(mark ? { mark } : {}) });
