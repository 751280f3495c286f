// The ztunnel-like peer against the real ZDS server and real pod netns:
// listeners opened inside the pod, reachable from inside the pod, capture of
// original destinations, ztunnel's state machine and rejections, fault knobs.
import { execFileSync } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listen, type UnixConnection } from '../../lib/net/sock/seqpacket.js';
import type { Netns } from '../../lib/net/netns/netns.js';
import { encodeRequest, decodeResponse, encodeHello } from '../../lib/zds/codec.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { ZdsServer, type ZdsPod } from '../../lib/zds/server.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { devNull, info, openFds, tempSocketPath, until } from './helpers.js';

let sock: ReturnType<typeof tempSocketPath>;
const stops: Array<() => Promise<void> | void> = [];
let fdsBefore: number;

beforeEach(() => {
  sock = tempSocketPath();
  fdsBefore = openFds();
});
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
  sock.remove();
});

// Real in-pod client: a node child born inside the netns.
async function tcpFromPod(ns: Netns, host: string, port: number): Promise<string> {
  const script = `const s=require('net').connect(${port},${JSON.stringify(host)});let d='';s.on('data',c=>d+=c);` +
    `s.on('end',()=>{process.stdout.write(d)});s.on('error',e=>{process.stdout.write('ERR '+e.code)});`;
  return (await ns.spawn([process.execPath, '-e', script], { timeoutMs: 10_000 })).stdout.trim();
}
async function udpFromPod(ns: Netns, host: string, port: number): Promise<string> {
  const script = `const s=require('dgram').createSocket('udp4');s.on('message',m=>{process.stdout.write(m.toString());s.close()});` +
    `s.send('dns?',${port},${JSON.stringify(host)});setTimeout(()=>{process.stdout.write('TIMEOUT');process.exit(0)},3000).unref();`;
  return (await ns.spawn([process.execPath, '-e', script], { timeoutMs: 10_000 })).stdout.trim();
}

function setup(pods: ZdsPod[], peerOpts: ConstructorParameters<typeof ZtunnelPeer>[0] = {}) {
  const cache = new Map(pods.map((p) => [p.uid, p]));
  const server = new ZdsServer({ path: sock.path, acceptsPerSecond: 1000, keepaliveIntervalMs: 100, provider: { snapshot: () => cache.values() } }).listen();
  const peer = new ZtunnelPeer({ path: sock.path, backoffInitialMs: 5, backoffMaxMs: 50, ...peerOpts }).start();
  stops.push(() => server.close(), () => peer.stop());
  return { server, peer, cache };
}

describe.skipIf(!privileged())('ztunnel-like peer with real pod netns', () => {
  it('opens ztunnel listeners inside the pod, reachable from inside it, marked 0x539, and records what it captured', async () => {
    const ns = await freshNetns();
    const { peer } = setup([{ uid: 'pod-1', workloadInfo: info('pod-1'), netns: ns }]);
    await peer.waitFor((p) => p.ready);
    expect(peer.active.get('pod-1')).toBe(ns.key);
    expect(peer.netnsOf('pod-1')).toBe(ns.key);
    expect(peer.activeCount).toBe(peer.active.size);
    expect(peer.netnsOf('no-such-pod')).toBeUndefined();
    expect(peer.boundPorts('pod-1').sort()).toEqual(
      ['tcp 127.0.0.1:15053', 'tcp [::1]:15053', 'tcp [::]:15001', 'tcp [::]:15006', 'tcp [::]:15008', 'udp 127.0.0.1:15053', 'udp [::1]:15053'].sort());
    // The sockets live in the pod netns, carry the mark, and nothing of it is in ours.
    const ss = execFileSync('ip', ['netns', 'exec', ns.name, 'ss', '-tlnHe', 'sport', '= :15001'], { encoding: 'utf8' });
    expect(ss).toMatch(/fwmark:0x539/);
    const reply = await tcpFromPod(ns, '127.0.0.1', 15001);
    expect(reply).toBe('ztunnel-sim uid=pod-1 port=15001 orig_dst=127.0.0.1:15001 redirected=false');
    expect(await tcpFromPod(ns, '::1', 15006)).toMatch(/^ztunnel-sim uid=pod-1 port=15006 orig_dst=\[::1\]:15006/);
    expect(await udpFromPod(ns, '127.0.0.1', 15053)).toBe('dns?');
    expect(peer.podCounters('pod-1')!.byPort).toEqual({ 15001: 1, 15006: 1, 15053: 1 });
    expect(peer.portCounters[15001]).toBe(1);
    expect(peer.captures.map((c) => `${c.proto}:${c.port}`)).toEqual(['tcp:15001', 'tcp:15006', 'udp:15053']);
    ns.close();
  });

  it('records the original destination of a REDIRECTed connection', async () => {
    const ns = await freshNetns();
    await ns.spawn(['iptables', '-t', 'nat', '-A', 'OUTPUT', '-p', 'tcp', '-d', '127.0.0.1', '--dport', '8080', '-j', 'REDIRECT', '--to-ports', '15001']);
    const { peer } = setup([{ uid: 'pod-r', workloadInfo: info('pod-r'), netns: ns }]);
    await peer.waitFor((p) => p.ready);
    expect(await tcpFromPod(ns, '127.0.0.1', 8080)).toBe('ztunnel-sim uid=pod-r port=15001 orig_dst=127.0.0.1:8080 redirected=true');
    expect(peer.captures[0]).toMatchObject({ uid: 'pod-r', port: 15001, redirected: true, origDst: { address: '127.0.0.1', port: 8080 } });
    ns.close();
  });

  it('removes the listeners on del, and reconciles away pods missing from a new snapshot', async () => {
    const ns1 = await freshNetns();
    const ns2 = await freshNetns();
    const { server, peer, cache } = setup([
      { uid: 'u1', workloadInfo: info('u1'), netns: ns1 },
      { uid: 'u2', workloadInfo: info('u2'), netns: ns2 },
    ]);
    await peer.waitFor((p) => p.ready && p.active.size === 2);
    cache.delete('u1');
    await server.podDeleted('u1');
    expect([...peer.active.keys()]).toEqual(['u2']);
    expect(await tcpFromPod(ns1, '127.0.0.1', 15001)).toBe('ERR ECONNREFUSED');
    // u2 goes while no ztunnel is connected; the next snapshot drops it.
    cache.delete('u2');
    const connects = peer.counters.connects;
    await server.close();
    const server2 = new ZdsServer({ path: sock.path, acceptsPerSecond: 1000, provider: { snapshot: () => cache.values() } }).listen();
    stops.push(() => server2.close());
    await peer.waitFor((p) => p.counters.connects > connects && p.ready);
    expect(peer.active.size).toBe(0);
    expect(peer.counters).toMatchObject({ proxiesStarted: 2, proxiesStopped: 2 });
    ns1.close();
    ns2.close();
  });

  it('treats the same netns again as a no-op and a new netns as a replacement', async () => {
    const ns1 = await freshNetns();
    const ns2 = await freshNetns();
    const { server, peer } = setup([{ uid: 'same', workloadInfo: info('same'), netns: ns1 }]);
    await peer.waitFor((p) => p.ready);
    await server.podAdded({ uid: 'same', workloadInfo: info('same') }, ns1);
    expect(peer.counters.proxiesStarted).toBe(1);
    await server.podAdded({ uid: 'same', workloadInfo: info('same') }, ns2);
    expect(peer.counters).toMatchObject({ proxiesStarted: 2, proxiesStopped: 1 });
    expect(peer.active.get('same')).toBe(ns2.key);
    expect(await tcpFromPod(ns1, '127.0.0.1', 15008)).toBe('ERR ECONNREFUSED');
    expect(await tcpFromPod(ns2, '127.0.0.1', 15008)).toMatch(/uid=same port=15008/);
    ns1.close();
    ns2.close();
  });

  it('nacks a proxy that cannot start (port taken), stays not ready, and retries until it works', async () => {
    const ns = await freshNetns();
    // A conflicting listener without SO_REUSEPORT, as ztunnel's create_proxy_conflict.
    const conflict = await import('../../lib/net/binding.js').then(({ native }) =>
      native().inetOpen(ns.fd, [{ udp: false, address: '0.0.0.0', port: 15008, reusePort: false, transparent: false, optional: false }]));
    const { server, peer } = setup([], { retryMs: 100 });
    const nacks: string[] = [];
    server.on('nack', (e) => nacks.push(e.error));
    await peer.waitFor((p) => p.ready);
    await expect(server.podAdded({ uid: 'busy', workloadInfo: info('busy') }, ns)).rejects.toMatchObject({ code: 'ZDS_NACK' });
    expect(nacks[0]).toMatch(/^failure to start proxy : .*15008/);
    expect(peer.ready).toBe(false);
    expect(peer.pending).toEqual(['busy']);
    const { native } = await import('../../lib/net/binding.js');
    native().fdClose(conflict[0]!.fd!);
    await peer.waitFor((p) => p.ready, 3000);
    expect(peer.active.has('busy')).toBe(true);
    ns.close();
  });

  it('fault knobs: nack a uid, delay acks past the agent deadline, close after N messages, crash mid-snapshot', async () => {
    const ns = await freshNetns();
    const pods = [0, 1, 2].map((i) => ({ uid: `f${i}`, workloadInfo: info(`f${i}`), netns: ns }));
    const { server, peer, cache } = setup(pods, { listeners: false, faults: { nackUids: new Map([['f1', 'no thanks']]), crashMidSnapshot: 2 } });
    const disconnects: string[] = [];
    server.on('disconnect', (_i, r) => disconnects.push(r.code));
    await peer.waitFor((p) => p.ready && p.counters.connects === 2);
    expect(disconnects[0]).toBe('ZDS_CONNECTION_CLOSED');  // the crash mid-snapshot
    expect(peer.active.size).toBe(2);  // f0, f2 (f1 nacked)
    peer.faults.closeAfterMessages = 1;
    cache.delete('f0');
    await server.podDeleted('f0');
    await peer.waitFor((p) => p.counters.connects === 3 && p.ready);
    await until(() => disconnects.length === 2);  // noticed by the keepalive probe
    expect(disconnects[1]).toBe('ZDS_CONNECTION_CLOSED');  // closed after acking the del
    expect(peer.active.has('f0')).toBe(false);
    peer.faults.ackDelayMs = 400;
    await server.close();
    const server2 = new ZdsServer({ path: sock.path, acceptsPerSecond: 1000, ackTimeoutMs: 100 }).listen();
    stops.push(() => server2.close());
    const timeouts = new Promise((r) => server2.once('disconnect', (_i, reason) => r(reason.code)));
    expect(await timeouts).toBe('ZDS_TIMEOUT');
    ns.close();
  });
});

describe('ztunnel-like peer: protocol rejections (as ztunnel)', () => {
  // A raw agent that can send what ZdsServer never would.
  async function rawAgent(peerOpts: ConstructorParameters<typeof ZtunnelPeer>[0] = {}) {
    const l = listen(sock.path);
    const peer = new ZtunnelPeer({ path: sock.path, listeners: false, backoffInitialMs: 5, reconnect: false, ...peerOpts }).start();
    stops.push(() => l.close(), () => peer.stop());
    const conn: UnixConnection = await l.accept();
    stops.push(() => conn.close());
    const hello = await conn.recv();
    expect(hello!.data).toEqual(encodeHello());
    const ask = async (req: Parameters<typeof encodeRequest>[0], fds: number[] = []) => {
      await conn.send(encodeRequest(req), fds);
      const m = await conn.recv({ timeoutMs: 2000 });
      return m ? decodeResponse(m.data).ack!.error : null;
    };
    return { peer, conn, ask };
  }

  it('rejects an add without an fd and a del with one, then drops the connection', async () => {
    const { peer, ask, conn } = await rawAgent();
    expect(await ask({ type: 'add', uid: 'x', workloadInfo: info('x') })).toBe('failure to read message : No control message');
    expect(await conn.recv({ timeoutMs: 2000 })).toBeNull();
    await peer.stop();
  });

  it('rejects fds on a non-add', async () => {
    const fd = devNull();
    const { ask } = await rawAgent();
    expect(await ask({ type: 'del', uid: 'x' }, [fd])).toBe('failure to read message : Unexpected control message');
    (await import('node:fs')).closeSync(fd);
  });

  it('exits (fatal) on keep after the snapshot, a second snapshot_sent, or a missing workload_info', async () => {
    for (const [first, fatal] of [
      [{ type: 'snapshot_sent' as const }, { type: 'keep' as const, uid: 'k' }],
      [{ type: 'snapshot_sent' as const }, { type: 'snapshot_sent' as const }],
    ] as const) {
      const { peer, ask } = await rawAgent();
      expect(await ask(first)).toBe('');
      expect(await ask(fatal)).toMatch(/^failure to process message : ProtocolError\("pod (keep received after snapshot|snapshot received already)"\)$/);
      await peer.waitFor((p) => p.state === 'exited');
      await peer.stop();
      for (const s of stops.splice(0).reverse()) await s();
    }
    const fd = devNull();
    const { peer, ask } = await rawAgent();
    expect(await ask({ type: 'add', uid: 'n', workloadInfo: undefined }, [fd])).toBe(
      'failure to process message : ProtocolError("workload_info is required but not present")');
    (await import('node:fs')).closeSync(fd);
    await peer.waitFor((p) => p.state === 'exited');
  });

  it('applies keep and del before the snapshot, and answers every request with exactly one ack', async () => {
    const fd = devNull();
    const { peer, ask } = await rawAgent();
    expect(await ask({ type: 'keep', uid: 'k' })).toBe('');
    expect(await ask({ type: 'add', uid: 'a', workloadInfo: info('a') }, [fd])).toBe('');
    expect(await ask({ type: 'del', uid: 'a' })).toBe('');   // before the snapshot: only forgets the name
    expect(peer.active.has('a')).toBe(true);
    expect(await ask({ type: 'snapshot_sent' })).toBe('');   // reconcile drops it
    expect(peer.active.size).toBe(0);
    expect(peer.ready).toBe(true);
    expect(peer.log.map((e) => `${e.type}:${e.fds}:${e.response}`)).toEqual(['keep:0:', 'add:1:', 'del:0:', 'snapshot_sent:0:']);
    (await import('node:fs')).closeSync(fd);
  });

  it('keeps only the newest log entries (default 1000, maxLogEntries) so a long session does not grow memory', async () => {
    const { peer, ask } = await rawAgent();
    expect(await ask({ type: 'snapshot_sent' })).toBe('');
    for (let i = 0; i < 1100; i++) expect(await ask({ type: 'del', uid: `d${i}` })).toBe('');
    expect(peer.log).toHaveLength(1000);
    expect(peer.log[0]).toMatchObject({ type: 'del', uid: 'd100' });
    expect(peer.log[999]).toMatchObject({ type: 'del', uid: 'd1099' });
    expect(peer.counters.messages).toBe(1101);  // the counters still count everything
    await peer.stop();
    for (const s of stops.splice(0).reverse()) await s();
    const small = await rawAgent({ maxLogEntries: 3 });
    for (const uid of ['a', 'b', 'c', 'd', 'e']) expect(await small.ask({ type: 'keep', uid })).toBe('');
    expect(small.peer.log.map((e) => e.uid)).toEqual(['c', 'd', 'e']);
    expect(() => new ZtunnelPeer({ maxLogEntries: -1 })).toThrow(RangeError);
    expect(() => new ZtunnelPeer({ maxLogEntries: 1.5 })).toThrow(RangeError);
  });

  it('refuses peer timeouts a timer cannot honour (>= 2^31 ms)', () => {
    for (const name of ['backoffInitialMs', 'backoffMaxMs', 'retryMs'] as const)
      for (const bad of [2 ** 31, 0, -5, 2.5]) expect(() => new ZtunnelPeer({ [name]: bad }), `${name}=${bad}`).toThrow(RangeError);
    expect(() => new ZtunnelPeer({ faults: { ackDelayMs: 2 ** 31 } })).toThrow(RangeError);
    const peer = new ZtunnelPeer({ retryMs: 2 ** 31 - 1 });
    expect(() => peer.waitFor(() => false, 2 ** 31)).toThrow(RangeError);
  });

  it('leaks no fds over a whole session', async () => {
    const fd = devNull();
    const { peer, ask, conn } = await rawAgent();
    for (let i = 0; i < 5; i++) expect(await ask({ type: 'add', uid: `l${i}`, workloadInfo: info('l') }, [fd])).toBe('');
    expect(await ask({ type: 'snapshot_sent' })).toBe('');
    for (let i = 0; i < 5; i++) expect(await ask({ type: 'del', uid: `l${i}` })).toBe('');
    (await import('node:fs')).closeSync(fd);
    conn.close();
    await peer.stop();
    for (const s of stops.splice(0).reverse()) await s();
    expect(openFds()).toBe(fdsBefore);
  });
});
