// A ztunnel-like ZDS peer (zds.md §3.5, §4, §5.3) for tests, the demo and
// nodes without ztunnel. It connects with ztunnel's backoff, says hello V1,
// answers every request with exactly one ack or nack, applies ztunnel's
// per-connection state machine (snapshot names, pending retries, the fatal
// cases), and for each added pod opens ztunnel's listeners *inside the
// received netns* (on a native job thread): TCP 15001/15006/15008 on the
// wildcard address and 15053 TCP+UDP on loopback, all with SO_MARK 0x539,
// SO_REUSEPORT and IP_TRANSPARENT on listeners. Accepted connections record
// their original destination, which proves that a connection was captured.
import * as dgram from 'node:dgram';
import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import { native } from '../net/binding.js';
import { adoptTcpServer } from '../net/sock/listen.js';
import { connect, OwnedFd, type UnixConnection } from '../net/sock/seqpacket.js';
import { decodeRequest, encodeHello, encodeResponse, ZDS_MAX_RECORD, ZDS_VERSION_V1, type WorkloadInfo, type WorkloadRequest } from '../zds/codec.js';
import { ZTUNNEL_SOCKET_PATH } from '../zds/server.js';
import { checkTimeout, optionalTimeout } from '../util/timeout.js';

/** ztunnel's in-pod packet mark (DEFAULT_INPOD_MARK); the CNI rules skip it. */
export const INPOD_MARK = 0x539;
export const ZTUNNEL_PORTS = { outbound: 15001, inbound: 15006, hbone: 15008, dns: 15053 } as const;

export interface PeerFaults {
  /** Wait this long before every ack (beyond 5 s the agent gives up). */
  ackDelayMs?: number;
  /** Answer an `add` for these uids with this nack text (as a proxy-start failure). */
  nackUids?: Map<string, string>;
  /** Close the connection once this many more messages were acked, counted from the next one received (fires once). */
  closeAfterMessages?: number;
  /** Crash while receiving the snapshot: on its Nth request, drop every proxy and the connection without acking (fires once). */
  crashMidSnapshot?: number;
  /** Never send the hello. */
  noHello?: boolean;
}

export interface ZtunnelPeerOptions {
  path?: string;
  /** Open the per-pod listeners (default true). False: protocol only (netns fds are held, nothing is bound). */
  listeners?: boolean;
  mark?: number;
  /** ztunnel's connect backoff: 20 ms doubling up to 15 s. */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** Retry of failed proxy starts. Default 5000 (RETRY_DURATION). */
  retryMs?: number;
  /** Reconnect after a dropped connection (default true; never after a fatal error). */
  reconnect?: boolean;
  /** Entries kept in `log` (the newest; older ones are dropped). Default 1000; 0 keeps none. */
  maxLogEntries?: number;
  /** Entries kept in `captures` (the newest). Default 1000. */
  maxCaptures?: number;
  faults?: PeerFaults;
}

const DEFAULT_MAX_LOG = 1000;
const DEFAULT_MAX_CAPTURES = 1000;

function cap(v: number | undefined, dflt: number, what: string): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 10_000_000) throw new RangeError(`${what} must be an integer in 0..10000000`);
  return v;
}

function checkFaults(f: PeerFaults): void {
  optionalTimeout(f.ackDelayMs, 'faults.ackDelayMs', undefined, { allowZero: true });
}

export interface PeerLogEntry {
  connection: number;
  type: WorkloadRequest['type'] | 'invalid';
  uid: string | undefined;
  fds: number;
  /** '' for an ack, the nack text otherwise, undefined when nothing was sent back. */
  response: string | undefined;
}

export interface Capture {
  uid: string;
  port: number;
  proto: 'tcp' | 'udp';
  /** The original destination (SO_ORIGINAL_DST for REDIRECT, the local address otherwise). */
  origDst: { address: string; port: number; family: 4 | 6 };
  redirected: boolean;
  peer: { address: string; port: number };
}

export interface PodCounters {
  /** Accepted TCP connections / UDP datagrams per port. */
  byPort: Record<number, number>;
}

interface Proxy {
  uid: string;
  info: WorkloadInfo;
  netns: OwnedFd;
  id: string;  // dev:ino
  servers: net.Server[];
  udp: dgram.Socket[];
  sockets: Set<net.Socket>;
  counters: PodCounters;
  transparent: boolean;
}

interface Pending {
  info: WorkloadInfo;
  netns: OwnedFd;
  id: string;
}

type Outcome = { ack: string } | { fatal: string };

class ReadError extends Error {}

export class ZtunnelPeer extends EventEmitter {
  readonly path: string;
  readonly faults: PeerFaults;
  /** The newest requests received, oldest first (at most maxLogEntries). */
  readonly log: PeerLogEntry[] = [];
  /** The newest captures, oldest first (at most maxCaptures). */
  readonly captures: Capture[] = [];
  readonly counters = { connects: 0, messages: 0, acks: 0, nacks: 0, proxiesStarted: 0, proxiesStopped: 0 };
  /** Accepted TCP connections and UDP datagrams per port, all pods together. */
  readonly portCounters: Record<number, number> = {};
  state: 'idle' | 'connecting' | 'connected' | 'exited' | 'stopped' = 'idle';
  snapshotReceived = false;
  readonly #opts: Required<Omit<ZtunnelPeerOptions, 'faults' | 'path'>>;
  #proxies = new Map<string, Proxy>();
  #pending = new Map<string, Pending>();
  #snapshotNames = new Set<string>();
  #conn: UnixConnection | undefined;
  #connId = 0;
  #loop: Promise<void> | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #sleep: { timer: NodeJS.Timeout; resolve(): void } | undefined;
  #snapshotCount = 0;

  constructor(opts: ZtunnelPeerOptions = {}) {
    super();
    this.path = opts.path ?? ZTUNNEL_SOCKET_PATH;
    this.faults = opts.faults ?? {};
    checkFaults(this.faults);
    this.#opts = {
      listeners: opts.listeners ?? true,
      mark: opts.mark ?? INPOD_MARK,
      backoffInitialMs: optionalTimeout(opts.backoffInitialMs, 'backoffInitialMs', 20),
      backoffMaxMs: optionalTimeout(opts.backoffMaxMs, 'backoffMaxMs', 15_000),
      retryMs: optionalTimeout(opts.retryMs, 'retryMs', 5000),
      reconnect: opts.reconnect ?? true,
      maxLogEntries: cap(opts.maxLogEntries, DEFAULT_MAX_LOG, 'maxLogEntries'),
      maxCaptures: cap(opts.maxCaptures, DEFAULT_MAX_CAPTURES, 'maxCaptures'),
    };
  }

  /** snapshot_sent seen on this connection and no proxy start pending (ztunnel's readiness). */
  get ready(): boolean {
    return this.snapshotReceived && this.#pending.size === 0;
  }

  /** Running proxies: uid → netns identity `dev:ino` (a copy: O(pods); see activeCount, netnsOf). */
  get active(): Map<string, string> {
    return new Map([...this.#proxies].map(([uid, p]) => [uid, p.id]));
  }

  /** How many proxies run. */
  get activeCount(): number {
    return this.#proxies.size;
  }

  /** The netns identity `dev:ino` of a running proxy. */
  netnsOf(uid: string): string | undefined {
    return this.#proxies.get(uid)?.id;
  }

  get pending(): string[] {
    return [...this.#pending.keys()];
  }

  /** Per-pod counters (accepted connections / datagrams per port). */
  podCounters(uid: string): PodCounters | undefined {
    return this.#proxies.get(uid)?.counters;
  }

  /** Ports a pod's listeners are bound to (`tcp:15001`, `udp:15053`, ...), with the address. */
  boundPorts(uid: string): string[] {
    const p = this.#proxies.get(uid);
    if (!p) return [];
    const tcp = p.servers.map((s) => {
      const a = s.address() as net.AddressInfo;
      return `tcp ${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
    });
    const udp = p.udp.map((s) => {
      const a = s.address();
      return `udp ${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
    });
    return [...tcp, ...udp];
  }

  /** Starts the connect loop. */
  start(): this {
    if (this.#loop) return this;
    this.#loop = this.#run();
    return this;
  }

  /** Disconnects and tears down every proxy (closing every netns fd it holds). */
  async stop(): Promise<void> {
    if (this.state !== 'exited') this.state = 'stopped';
    this.#conn?.close();
    this.#wakeSleep();
    await this.#loop;
    this.#teardown();
  }

  /** Resolves when `pred` holds (checked after every event), or rejects after timeoutMs. */
  waitFor(pred: (peer: this) => boolean, timeoutMs = 5000): Promise<void> {
    checkTimeout(timeoutMs, 'waitFor timeoutMs');
    if (pred(this)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const events = ['message', 'ready', 'connect', 'disconnect', 'capture', 'exit', 'proxy-started', 'proxy-stopped'];
      const check = () => {
        if (!pred(this)) return;
        done();
        resolve();
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`ztunnel peer: condition not met within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        for (const e of events) this.off(e, check);
      };
      for (const e of events) this.on(e, check);
    });
  }

  #stopping(): boolean {
    return this.state === 'stopped' || this.state === 'exited';
  }

  async #run(): Promise<void> {
    let delay = this.#opts.backoffInitialMs;
    while (!this.#stopping()) {
      this.state = 'connecting';
      let conn: UnixConnection;
      try {
        conn = await connect(this.path);
      } catch (err) {
        this.emit('connect-failed', err);
        await this.#pause(delay);
        delay = Math.min(delay * 2, this.#opts.backoffMaxMs);
        continue;
      }
      delay = this.#opts.backoffInitialMs;
      if (this.#stopping()) {
        conn.close();
        break;
      }
      this.#conn = conn;
      const id = ++this.#connId;
      this.counters.connects++;
      this.state = 'connected';
      // A new connection starts a new snapshot; running proxies stay.
      this.snapshotReceived = false;
      this.#snapshotNames.clear();
      this.#snapshotCount = 0;
      this.#clearPending();
      this.emit('connect', id);
      try {
        if (!this.faults.noHello) await conn.send(encodeHello(ZDS_VERSION_V1));
        await this.#serve(conn, id);
      } catch (err) {
        this.emit('warning', err);
      }
      conn.close();
      this.#conn = undefined;
      this.snapshotReceived = false;
      this.emit('disconnect', id);
      if (!this.#opts.reconnect && !this.#stopping()) this.state = 'stopped';
    }
  }

  async #serve(conn: UnixConnection, id: number): Promise<void> {
    let closeIn: number | undefined;
    for (;;) {
      let m;
      try {
        m = await conn.recv({ maxBytes: ZDS_MAX_RECORD, maxFds: 1 });
      } catch (err) {
        if (conn.closed) return;
        // Truncation (data or fds): what ztunnel reports as a read error.
        await this.#respond(conn, { connection: id, type: 'invalid', uid: undefined, fds: 0, response: undefined },
          `failure to read message : ${(err as Error).message}`);
        return;
      }
      if (!m) return;  // EOF (or a zero-length record)
      this.counters.messages++;
      // Armed by the first message after the knob was set.
      if (closeIn === undefined && this.faults.closeAfterMessages !== undefined) closeIn = this.faults.closeAfterMessages;
      const fds = m.fds;
      const entry: PeerLogEntry = { connection: id, type: 'invalid', uid: undefined, fds: fds.length, response: undefined };
      let req: WorkloadRequest;
      try {
        req = decodeRequest(m.data);
        entry.type = req.type;
        if ('uid' in req) entry.uid = req.uid;
        if (req.type === 'none') throw new ReadError('no payload');
        if (fds.length > 1) throw new ReadError(`Expected 1 FD, got ${fds.length}`);
        if (req.type === 'add' && fds.length === 0) throw new ReadError('No control message');
        if (req.type !== 'add' && fds.length > 0) throw new ReadError('Unexpected control message');
      } catch (err) {
        for (const f of fds) f.close();
        await this.#respond(conn, entry, `failure to read message : ${(err as Error).message}`);
        return;  // ztunnel drops the connection after a read error
      }
      if (!this.snapshotReceived && req.type !== 'snapshot_sent' && this.faults.crashMidSnapshot !== undefined &&
          ++this.#snapshotCount >= this.faults.crashMidSnapshot) {
        this.faults.crashMidSnapshot = undefined;
        for (const f of fds) f.close();
        this.#log(entry);
        this.#teardown();  // a crashed process loses its proxies with it
        return;
      }
      const outcome = await this.#handle(req, fds[0]);
      if ('fatal' in outcome) {
        await this.#respond(conn, entry, `failure to process message : ProtocolError("${outcome.fatal}")`);
        this.state = 'exited';
        this.emit('exit', 1);
        return;
      }
      if (!(await this.#respond(conn, entry, outcome.ack))) return;
      if (closeIn !== undefined && --closeIn <= 0) {
        this.faults.closeAfterMessages = undefined;
        return;
      }
    }
  }

  async #respond(conn: UnixConnection, entry: PeerLogEntry, text: string): Promise<boolean> {
    // The knobs may be changed at run time: checked again at use.
    const delay = optionalTimeout(this.faults.ackDelayMs, 'faults.ackDelayMs', 0, { allowZero: true });
    if (delay) await this.#pause(delay);
    if (conn.closed) return false;
    try {
      await conn.send(encodeResponse(text));
    } catch (err) {
      this.emit('warning', err);
      return false;
    }
    entry.response = text;
    if (text === '') this.counters.acks++;
    else this.counters.nacks++;
    this.#log(entry);
    if (this.ready) this.emit('ready');
    return true;
  }

  #log(entry: PeerLogEntry): void {
    this.log.push(entry);
    if (this.log.length > this.#opts.maxLogEntries) this.log.splice(0, this.log.length - this.#opts.maxLogEntries);
    this.emit('message', entry);
  }

  async #handle(req: WorkloadRequest, fd: OwnedFd | undefined): Promise<Outcome> {
    switch (req.type) {
      case 'add': {
        if (!req.workloadInfo) {
          fd!.close();
          return { fatal: 'workload_info is required but not present' };
        }
        if (!this.snapshotReceived) this.#snapshotNames.add(req.uid);
        const nack = this.faults.nackUids?.get(req.uid);
        if (nack !== undefined) {
          fd!.close();
          return { ack: nack };
        }
        return { ack: await this.#ensure(req.uid, req.workloadInfo, fd!) };
      }
      case 'keep':
        if (this.snapshotReceived) return { fatal: 'pod keep received after snapshot' };
        this.#snapshotNames.add(req.uid);
        return { ack: '' };
      case 'del':
        this.#dropPending(req.uid);
        if (!this.snapshotReceived) this.#snapshotNames.delete(req.uid);
        else this.#stopProxy(req.uid);
        return { ack: '' };
      case 'snapshot_sent': {
        if (this.snapshotReceived) return { fatal: 'pod snapshot received already' };
        for (const uid of [...this.#proxies.keys()]) if (!this.#snapshotNames.has(uid)) this.#stopProxy(uid);
        this.#snapshotNames.clear();
        this.snapshotReceived = true;
        return { ack: '' };
      }
      default:
        return { ack: '' };
    }
  }

  // ztunnel's add_workload_inner: same netns → no-op; other netns → replace.
  async #ensure(uid: string, info: WorkloadInfo, fd: OwnedFd): Promise<string> {
    let id: string;
    try {
      const s = native().nsStat(fd.fd);
      id = `${s.dev}:${s.ino}`;
    } catch (err) {
      fd.close();
      return `failure to start proxy : ${(err as Error).message}`;
    }
    const existing = this.#proxies.get(uid);
    if (existing && existing.id === id) {
      fd.close();
      this.#dropPending(uid);
      return '';
    }
    try {
      await this.#startProxy(uid, info, fd, id);
      this.#dropPending(uid);
      return '';
    } catch (err) {
      const old = this.#pending.get(uid);
      if (old && old.netns !== fd) old.netns.close();
      this.#pending.set(uid, { info, netns: fd, id });
      this.#scheduleRetry();
      return `failure to start proxy : ${(err as Error).message}`;
    }
  }

  async #startProxy(uid: string, info: WorkloadInfo, fd: OwnedFd, id: string): Promise<void> {
    const proxy: Proxy = { uid, info, netns: fd, id, servers: [], udp: [], sockets: new Set(), counters: { byPort: {} }, transparent: false };
    if (this.#opts.listeners) {
      try {
        await this.#bind(proxy);
      } catch (err) {
        for (const s of proxy.servers) s.close();
        for (const u of proxy.udp) u.close();
        throw err;  // the netns fd stays with the caller (pending)
      }
    }
    const old = this.#proxies.get(uid);
    if (old) this.#stopProxy(uid);  // the sandbox was recreated: drain the old proxy
    this.#proxies.set(uid, proxy);
    this.counters.proxiesStarted++;
    this.emit('proxy-started', uid);
  }

  async #bind(proxy: Proxy): Promise<void> {
    const mark = this.#opts.mark;
    const tcp = (address: string, port: number, optional = false) =>
      ({ udp: false, address, port, mark, reusePort: true, transparent: true, optional });
    const udp = (address: string, port: number, optional = false) =>
      ({ udp: true, address, port, mark, reusePort: true, transparent: false, optional });
    const { outbound, inbound, hbone, dns } = ZTUNNEL_PORTS;
    // [::] takes v4 too (v4-mapped); without IPv6 fall back to 0.0.0.0.
    const specs = [tcp('::', hbone, true), tcp('::', inbound, true), tcp('::', outbound, true),
      tcp('127.0.0.1', dns), udp('127.0.0.1', dns), tcp('::1', dns, true), udp('::1', dns, true)];
    let opened = await native().inetOpen(proxy.netns.fd, specs);
    const fds: Array<{ fd: number; udp: boolean; v6: boolean; port: number }> = [];
    try {
      if (opened[0]!.fd === null || opened[1]!.fd === null || opened[2]!.fd === null) {
        for (const o of opened) if (o.fd !== null) native().fdClose(o.fd);
        const v4 = [tcp('0.0.0.0', hbone), tcp('0.0.0.0', inbound), tcp('0.0.0.0', outbound), tcp('127.0.0.1', dns), udp('127.0.0.1', dns)];
        opened = await native().inetOpen(proxy.netns.fd, v4);
        opened.forEach((o, i) => fds.push({ fd: o.fd!, udp: v4[i]!.udp, v6: false, port: v4[i]!.port }));
      } else {
        opened.forEach((o, i) => {
          if (o.fd !== null) fds.push({ fd: o.fd, udp: specs[i]!.udp, v6: specs[i]!.address.includes(':'), port: specs[i]!.port });
        });
      }
      proxy.transparent = opened.some((o) => o.transparent);
    } catch (err) {
      for (const f of fds) native().fdClose(f.fd);
      throw err;
    }
    // Node adopts the fds (and closes them with the server / socket).
    for (const f of fds) {
      if (f.udp) proxy.udp.push(this.#adoptUdp(proxy, f.fd, f.v6, f.port));
      else proxy.servers.push(await this.#adoptTcp(proxy, f.fd, f.port));
    }
  }

  async #adoptTcp(proxy: Proxy, fd: number, port: number): Promise<net.Server> {
    const server = await adoptTcpServer(fd, (sock) => this.#onConnection(proxy, port, sock));
    server.on('error', (err) => this.emit('warning', err));
    return server;
  }

  #adoptUdp(proxy: Proxy, fd: number, v6: boolean, port: number): dgram.Socket {
    const sock = dgram.createSocket({ type: v6 ? 'udp6' : 'udp4' });
    sock.on('error', (err) => this.emit('warning', err));
    sock.on('message', (msg, rinfo) => {
      this.#count(proxy, port);
      const a = sock.address();
      const capture: Capture = {
        uid: proxy.uid, port, proto: 'udp', redirected: false,
        origDst: { address: a.address, port: a.port, family: a.family === 'IPv6' ? 6 : 4 },
        peer: { address: rinfo.address, port: rinfo.port },
      };
      this.#capture(capture);
      sock.send(msg, rinfo.port, rinfo.address);  // echo, so a client can see it arrived
    });
    sock.bind({ fd });
    return sock;
  }

  #onConnection(proxy: Proxy, port: number, sock: net.Socket): void {
    proxy.sockets.add(sock);
    sock.on('close', () => proxy.sockets.delete(sock));
    sock.on('error', () => {});
    this.#count(proxy, port);
    const fd = (sock as unknown as { _handle?: { fd?: number } })._handle?.fd ?? -1;
    let orig: ReturnType<ReturnType<typeof native>['inetOriginalDst']>;
    try {
      orig = native().inetOriginalDst(fd);
    } catch {
      orig = { family: sock.localFamily === 'IPv6' ? 6 : 4, address: sock.localAddress ?? '', port: sock.localPort ?? 0, redirected: false };
    }
    const capture: Capture = {
      uid: proxy.uid, port, proto: 'tcp', redirected: orig.redirected,
      origDst: { address: orig.address, port: orig.port, family: orig.family },
      peer: { address: (sock.remoteAddress ?? '').replace(/^::ffff:(?=\d+\.)/, ''), port: sock.remotePort ?? 0 },
    };
    this.#capture(capture);
    const dst = orig.family === 6 ? `[${orig.address}]:${orig.port}` : `${orig.address}:${orig.port}`;
    sock.end(`ztunnel-sim uid=${proxy.uid} port=${port} orig_dst=${dst} redirected=${orig.redirected}\n`);
  }

  #count(proxy: Proxy, port: number): void {
    proxy.counters.byPort[port] = (proxy.counters.byPort[port] ?? 0) + 1;
    this.portCounters[port] = (this.portCounters[port] ?? 0) + 1;
  }

  #capture(c: Capture): void {
    this.captures.push(c);
    if (this.captures.length > this.#opts.maxCaptures) this.captures.splice(0, this.captures.length - this.#opts.maxCaptures);
    this.emit('capture', c);
  }

  #stopProxy(uid: string): void {
    const p = this.#proxies.get(uid);
    if (!p) return;
    this.#proxies.delete(uid);
    for (const s of p.servers) s.close();
    for (const s of p.sockets) s.destroy();
    for (const u of p.udp) u.close();
    p.netns.close();
    this.counters.proxiesStopped++;
    this.emit('proxy-stopped', uid);
  }

  #dropPending(uid: string): void {
    const p = this.#pending.get(uid);
    if (!p) return;
    this.#pending.delete(uid);
    p.netns.close();
  }

  #clearPending(): void {
    for (const uid of [...this.#pending.keys()]) this.#dropPending(uid);
  }

  #scheduleRetry(): void {
    if (this.#retryTimer) return;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      void this.#retryPending();
    }, this.#opts.retryMs);
    this.#retryTimer.unref();
  }

  async #retryPending(): Promise<void> {
    for (const [uid, p] of [...this.#pending]) {
      if (this.#pending.get(uid) !== p) continue;
      try {
        this.#pending.delete(uid);
        await this.#startProxy(uid, p.info, p.netns, p.id);
      } catch {
        if (!this.#pending.has(uid)) this.#pending.set(uid, p);
        else p.netns.close();
      }
    }
    if (this.#pending.size) this.#scheduleRetry();
    else if (this.ready) this.emit('ready');
  }

  #teardown(): void {
    for (const uid of [...this.#proxies.keys()]) this.#stopProxy(uid);
    this.#clearPending();
    if (this.#retryTimer) clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#sleep = undefined;
        resolve();
      }, ms);
      this.#sleep = { timer, resolve };
    });
  }

  #wakeSleep(): void {
    if (!this.#sleep) return;
    clearTimeout(this.#sleep.timer);
    this.#sleep.resolve();
    this.#sleep = undefined;
  }
}
