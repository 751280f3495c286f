// The node agent's side of ZDS: listens for ztunnel, sends each new
// connection the whole pod snapshot, then live adds (to one connection, see
// "Routing") and deletes (to every connection), strictly one request and one
// ack at a time per connection. Behaviour follows istio-cni's ztunnelserver
// (zds.md §3, istio-cni.md §5.9) with deliberate changes, each against a
// peer that is not a healthy ztunnel:
// - An ack timeout closes the connection, because a late ack would otherwise
//   be read as the answer to the next request (zds.md §3.4, §7).
//
// Routing (upstream: every add to the newest connection, which let a peer
// that says hello and never acks swallow every enrollment):
// - A connection has *proved* itself once it acked its whole snapshot
//   (state 'ready'). It stays proved while it answers every request in time:
//   one that does not is closed, so it is never chosen again.
// - An add goes to the newest proved connection. Only when none has proved
//   itself does it go to the newest one still in its snapshot.
// - The add is also queued on every connection still in its snapshot, so a
//   new ztunnel that takes over has every pod added while it was catching up.
//   The caller gets the chosen connection's answer; when a connection proves
//   itself while the chosen one has not, the add takes the proved one's.
// - A real ztunnel restart thus keeps upstream's hand-over: the new
//   connection becomes the target once it acked its snapshot; the old one is
//   retired from adds but stays registered (deletes go to both, as upstream)
//   until it goes away, and is the fallback if the new one fails. It is not
//   closed: a ztunnel whose connection drops reconnects, and would then take
//   the target back from the new one.
// - An add that fails on its connection for transport reasons (EPIPE,
//   ECONNRESET, ack timeout, protocol breakage: the connection is dropped)
//   moves on to the next choice; it only fails when no connection is left.
//
// Bounds (what an operator wants when something floods the socket: a buggy
// client, a crash-looping sidecar, a local attacker without allowedUids):
// - Every connection is accepted right away (the backlog is always drained),
//   and must say hello within helloTimeoutMs. At most maxPendingHellos may be
//   waiting for their hello; beyond that the *oldest* silent one is closed
//   (ZDS_EVICTED): ztunnel says hello right after connecting, so it is among
//   the newest and not the one pushed out.
// - Upstream's token bucket (5/s, burst 1) is applied after the hello, to
//   the expensive part (a snapshot). At most maxAdmissionQueue connections
//   wait for a token, in order; one more is closed at once (ZDS_OVERLOAD),
//   and each waits at most admissionTimeoutMs (ZDS_TIMEOUT). Refusing the
//   newcomer (not the oldest) keeps the queue first-come first-served.
// - At most maxConnections are routable; an admission beyond is refused
//   (ZDS_OVERLOAD). Connections in their snapshot are bounded anyway (the
//   token rate times the ack timeout): this bounds peers that complete the
//   protocol and stay.
// - A connection is routable only from its admission, right before its
//   snapshot is read from the provider: a silent connection is never chosen,
//   and no pod falls between the snapshot and the live updates.
//
// Snapshots never have holes (ztunnel drains every proxy the snapshot does
// not name):
// - Each netns fd is dup'ed only when its `add` is sent (one extra fd at a
//   time, whatever the pod count).
// - A dup that fails for lack of fds (EMFILE/ENFILE) closes the connection
//   (ZDS_SNAPSHOT_INCOMPLETE: reported, counted, retryable; ztunnel
//   reconnects). Any other failure (a closed handle) asks the provider again
//   for that pod: gone means it left the cache meanwhile (its `del` follows on
//   this connection; no hole), a new entry is sent instead, and a failure
//   again closes the connection.
// - An entry whose add cannot be encoded (bad workload info, too large) goes
//   out as `keep` (ztunnel keeps what it runs for it); one without a usable
//   uid, which no request can name, is left out. Both are reported
//   (ZDS_BAD_ENTRY).
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { native } from '../net/binding.js';
import { NetError } from '../net/errors.js';
import { MAX_TIMEOUT_MS, optionalTimeout } from '../util/timeout.js';
import { listen, OwnedFd, type FdLike, type UnixConnection, type UnixListener } from '../net/sock/seqpacket.js';
import { decodeHello, decodeResponse, encodeRequest, ZDS_MAX_RECORD, type WorkloadInfo, type WorkloadRequest } from './codec.js';
import { isZdsError, ZdsError } from './errors.js';

/** Where ztunnel connects by default (both sides; env ZTUNNEL_UDS_ADDRESS / INPOD_UDS). */
export const ZTUNNEL_SOCKET_PATH = '/var/run/ztunnel/ztunnel.sock';

export interface ZdsWorkload {
  /** Kubernetes pod UID. */
  uid: string;
  workloadInfo: WorkloadInfo;
}

export interface ZdsPod extends ZdsWorkload {
  /**
   * The pod's netns (a Netns, an OwnedFd or an fd number), or undefined when
   * unknown (sent as `keep`). It is copied only when its `add` is sent: a
   * Netns/OwnedFd closed before then is detected (the provider is asked
   * again for the pod); a bare number must stay open until the snapshot is done.
   */
  netns: FdLike | undefined;
}

/** Where snapshots come from: the agent's pod cache (the dataplane plugs in here). */
export interface ZdsPodProvider {
  snapshot(): Iterable<ZdsPod> | Promise<Iterable<ZdsPod>>;
}

export interface ZdsServerOptions {
  /** Socket path or @abstract name. Default /var/run/ztunnel/ztunnel.sock. */
  path?: string;
  /** Socket file mode. Default 0o600. */
  mode?: number;
  provider?: ZdsPodProvider;
  /** Accept only peers with these uids (SO_PEERCRED); default: anyone, as upstream. */
  allowedUids?: number[];
  /**
   * Admission rate limit (token bucket, burst 1), upstream's accept limiter.
   * Applied to connections that said hello, before their snapshot; silent
   * connections never take a token. Default 5 per second.
   */
  acceptsPerSecond?: number;
  /** How long a new connection has to say hello. Default 5000 (as upstream). */
  helloTimeoutMs?: number;
  /** Connections allowed to wait for their hello at once; beyond, the oldest is closed (ZDS_EVICTED). Default 32. */
  maxPendingHellos?: number;
  /** Connections allowed to wait for an admission token (said hello); one more is closed at once (ZDS_OVERLOAD). Default 16. */
  maxAdmissionQueue?: number;
  /** How long a connection may wait for its admission token. Default 5000. */
  admissionTimeoutMs?: number;
  /** Routable connections at most; an admission beyond is refused (ZDS_OVERLOAD). Default 64. */
  maxConnections?: number;
  /** Default 5000 each. All timeouts are integers in ms, at most 2^31-1. */
  writeTimeoutMs?: number;
  ackTimeoutMs?: number;
  /** Idle time before a liveness probe. Default 5000. */
  keepaliveIntervalMs?: number;
  /** How long the liveness probe reads. Default 10. */
  keepaliveProbeMs?: number;
  /** Receive buffer for acks; longer nacks (Rust backtraces) fit. Default 64 KiB. */
  maxResponseBytes?: number;
  /**
   * Called with every warning (also emitted as 'warning'): snapshot entries
   * sent as keep or left out (ZDS_BAD_ENTRY, counted in stats.skipped),
   * snapshots abandoned for a netns that cannot be passed
   * (ZDS_SNAPSHOT_INCOMPLETE, stats.incompleteSnapshots), accept errors.
   */
  warn?: (err: Error) => void;
}

/** 'ready': the snapshot was acked, the connection has proved itself (a target for adds; see "Routing"). */
export type ZdsConnectionState = 'hello' | 'snapshot' | 'ready' | 'closed';

export interface ZdsConnectionInfo {
  id: number;
  state: ZdsConnectionState;
  /** SO_PEERCRED of the peer. */
  pid: number;
  uid: number;
  gid: number;
  connectedAt: Date;
  /** The version from the peer's hello, once read. */
  version: number | undefined;
  /** Requests sent and answered on this connection. */
  sent: number;
  acked: number;
  nacked: number;
  /** Requests waiting behind the one in flight. */
  queued: number;
}

export interface ZdsNackEvent {
  connection: number;
  type: 'add' | 'keep' | 'del' | 'snapshot_sent';
  uid: string | undefined;
  error: string;
}

export type ZdsAckEvent = Omit<ZdsNackEvent, 'error'>;

export interface ZdsServerStats {
  accepted: number;
  rejected: number;
  disconnects: number;
  adds: number;
  keeps: number;
  dels: number;
  snapshots: number;
  nacks: number;
  timeouts: number;
  /** Silent connections closed to make room for newer ones (maxPendingHellos). */
  evicted: number;
  /** Snapshot entries whose add could not be encoded (bad uid/info, too large): sent as keep, or left out without a uid. */
  skipped: number;
  /** Snapshots abandoned (connection closed) because a netns could not be passed: never sent with a hole. */
  incompleteSnapshots: number;
  /** Connections closed because the admission queue or the routable connections were full. */
  overloaded: number;
  /** podAdded moved on to another connection after the chosen one failed. */
  failovers: number;
}

/** An fd a job holds: close() lets go of it (an own dup, or one share of a SharedFd). */
interface FdHandle {
  readonly fd: number;
  close(): void;
}

/**
 * One dup shared by the copies of one add (the chosen connection and those
 * still in their snapshot): closed when the last holder lets go.
 */
class SharedFd {
  readonly #own: OwnedFd;
  #refs = 1;

  constructor(own: OwnedFd) {
    this.#own = own;
  }

  share(): FdHandle {
    this.#refs++;
    let held = true;
    const own = this.#own;
    return {
      get fd() {
        return own.fd;
      },
      close: () => {
        if (!held) return;
        held = false;
        this.release();
      },
    };
  }

  release(): void {
    if (--this.#refs === 0) this.#own.close();
  }
}

interface Job {
  type: ZdsNackEvent['type'];
  uid: string | undefined;
  data: Buffer;
  fd: FdHandle | undefined;  // closed once sent or failed
  resolve(ackError: string): void;
  reject(err: Error): void;
  settled: boolean;
}

const positive = (v: number | undefined, dflt: number, what: string): number => {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new RangeError(`${what} must be a positive number`);
  return v;
};

const positiveInt = (v: number | undefined, dflt: number, what: string, max: number): number => {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) throw new RangeError(`${what} must be an integer in 1..${max}`);
  return v;
};

// Transport-level failures of one connection (it is closed by then): an add
// may be retried on another connection.
const connectionFailure = (err: unknown): err is ZdsError =>
  isZdsError(err) && (err.code === 'ZDS_CONNECTION_CLOSED' || err.code === 'ZDS_TIMEOUT' || err.code === 'ZDS_PROTOCOL');

function describeUid(uid: string | undefined): string {
  return uid === undefined ? '' : ` for ${uid}`;
}

/** Encodes and size-checks a request before anything is queued. */
function encodeChecked(req: WorkloadRequest): Buffer {
  const data = encodeRequest(req);
  if (data.length > ZDS_MAX_RECORD)
    throw new ZdsError('ZDS_TOO_LARGE', `ZDS ${req.type} encodes to ${data.length} bytes, over ztunnel's ${ZDS_MAX_RECORD}-byte buffer`);
  return data;
}

function validateWorkload(pod: ZdsWorkload): void {
  if (typeof pod !== 'object' || pod === null) throw new TypeError('pod must be an object');
  if (typeof pod.uid !== 'string' || pod.uid.length === 0) throw new TypeError('pod.uid must be a non-empty string');
  const w = pod.workloadInfo;
  if (typeof w !== 'object' || w === null) throw new TypeError('pod.workloadInfo must be an object');
  for (const k of ['name', 'namespace', 'serviceAccount'] as const)
    if (typeof w[k] !== 'string') throw new TypeError(`pod.workloadInfo.${k} must be a string`);
}

/** Lets go of a job's fd. */
function dropFd(job: { fd: FdHandle | undefined }): void {
  job.fd?.close();
  job.fd = undefined;
}

// Out of fds (or kernel memory): the snapshot must not go on without the pod.
const resourceShortage = (err: unknown): boolean => {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'EMFILE' || code === 'ENFILE' || code === 'ENOMEM';
};

const usableUid = (p: unknown): string | undefined => {
  const uid = typeof p === 'object' && p !== null ? (p as { uid?: unknown }).uid : undefined;
  return typeof uid === 'string' && uid.length > 0 ? uid : undefined;
};

function dupFd(f: FdLike): OwnedFd {
  const n = typeof f === 'number' ? f : f.fd;
  if (!Number.isInteger(n) || n < 0) throw new TypeError(`invalid netns fd ${String(n)}`);
  return new OwnedFd(native().fdDup(n));
}

type ConnOpts = Required<Omit<ZdsServerOptions, 'path' | 'mode' | 'provider' | 'allowedUids' | 'acceptsPerSecond' | 'maxPendingHellos'
  | 'maxAdmissionQueue' | 'admissionTimeoutMs' | 'maxConnections' | 'warn'>>;

class Connection {
  readonly id: number;
  readonly connectedAt = new Date();
  readonly creds: { pid: number; uid: number; gid: number };
  state: ZdsConnectionState = 'hello';
  version: number | undefined;
  sent = 0;
  acked = 0;
  nacked = 0;
  readonly #sock: UnixConnection;
  readonly #server: ZdsServer;
  readonly #opts: ConnOpts;
  #queue: Job[] = [];
  #current: Job | undefined;
  #wake: (() => void) | undefined;
  #timedOut: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closeReason: ZdsError | undefined;
  readonly done: Promise<void>;

  constructor(id: number, sock: UnixConnection, creds: Connection['creds'], server: ZdsServer,
              opts: ConnOpts) {
    this.id = id;
    this.#sock = sock;
    this.creds = creds;
    this.#server = server;
    this.#opts = opts;
    this.done = this.#run();
  }

  get queued(): number {
    return this.#queue.length;
  }

  info(): ZdsConnectionInfo {
    return {
      id: this.id, state: this.state, pid: this.creds.pid, uid: this.creds.uid, gid: this.creds.gid,
      connectedAt: this.connectedAt, version: this.version, sent: this.sent, acked: this.acked, nacked: this.nacked,
      queued: this.#queue.length,
    };
  }

  /** Queues a request; resolves with the ack's error text ('' = ok). */
  enqueue(job: Omit<Job, 'resolve' | 'reject' | 'settled'>): Promise<string> {
    if (this.state === 'closed') {
      dropFd(job);
      return Promise.reject(this.#closeReason ?? this.#closedError());
    }
    return new Promise<string>((resolve, reject) => {
      this.#queue.push({ ...job, resolve, reject, settled: false });
      this.#wake?.();
    });
  }

  /** Closes the socket and fails everything queued or in flight (idempotent). */
  close(reason: ZdsError): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.#closeReason = reason;
    this.#server._remove(this, reason);  // out of the routing list before anything else
    this.#sock.close();
    const jobs = this.#current ? [this.#current, ...this.#queue] : [...this.#queue];
    this.#queue = [];
    for (const j of jobs) this.#settle(j, reason);
    clearTimeout(this.#timer);
    this.#wake?.();
  }

  // A method, not a field read, so TS does not narrow `state` across awaits.
  #isClosed(): boolean {
    return this.state === 'closed';
  }

  #closedError(): ZdsError {
    return new ZdsError('ZDS_CONNECTION_CLOSED', `ztunnel connection ${this.id} is closed`, { connection: this.id });
  }

  #settle(job: Job, outcome: string | Error): void {
    if (job.settled) return;
    job.settled = true;
    dropFd(job);
    if (typeof outcome === 'string') job.resolve(outcome);
    else job.reject(outcome);
  }

  async #run(): Promise<void> {
    try {
      await this.#hello();
      if (this.#isClosed()) return;
      await this.#server._admit(this);  // out of the hello pool; waits for a token; routable from here
      if (this.#isClosed()) return;
      this.state = 'snapshot';
      await this.#snapshot();
      if (this.#isClosed()) return;
      this.state = 'ready';
      this.#server._ready(this);
      while (!this.#isClosed()) {
        const job = this.#queue.shift();
        if (job) {
          await this.#exchange(job);
          continue;
        }
        const woke = await this.#idle();
        if (!woke && !this.#isClosed()) await this.#probe();
      }
    } catch (err) {
      this.close(err instanceof ZdsError ? err
        : new ZdsError('ZDS_CONNECTION_CLOSED', `ztunnel connection ${this.id} failed: ${(err as Error).message}`, { cause: err, connection: this.id }));
    }
  }

  async #hello(): Promise<void> {
    let m;
    try {
      m = await this.#sock.recv({ maxBytes: ZDS_MAX_RECORD, maxFds: 0, timeoutMs: this.#opts.helloTimeoutMs });
    } catch (err) {
      throw this.#transportError('hello', err);
    }
    if (!m) throw new ZdsError('ZDS_CONNECTION_CLOSED', `ztunnel connection ${this.id} closed before its hello`, { connection: this.id });
    try {
      this.version = decodeHello(m.data).version;  // logged, never checked (as upstream)
    } catch (err) {
      throw new ZdsError('ZDS_PROTOCOL', `ztunnel connection ${this.id}: bad hello`, { cause: err, connection: this.id });
    }
  }

  async #snapshot(): Promise<void> {
    // A copy of the list (references only). Each entry is checked, encoded
    // and its netns dup'd only when its turn comes, so at most one extra fd
    // is held whatever the pod count. A netns that cannot be passed throws
    // (ZDS_SNAPSHOT_INCOMPLETE) and closes the connection, as does a
    // provider that throws: a partial snapshot would make ztunnel tear the
    // missing pods down.
    const pods = [...await this.#server._snapshot()];
    for (const p of pods) {
      if (this.#isClosed()) return;
      const job = await this.#server._snapshotJob(p, this.id);
      if (this.#isClosed()) {
        if (job) dropFd(job);
        return;
      }
      if (job) await this.#exchange(job);
    }
    if (!this.#isClosed()) {
      await this.#exchange({ type: 'snapshot_sent', uid: undefined, data: encodeRequest({ type: 'snapshot_sent' }), fd: undefined,
        resolve: () => {}, reject: () => {}, settled: false });
    }
  }

  // One request, one ack. Any transport failure, timeout or protocol
  // violation closes the connection (and fails this job with the reason).
  async #exchange(job: Job): Promise<void> {
    this.#current = job;
    try {
      try {
        await this.#sock.send(job.data, job.fd ? [job.fd] : [], { timeoutMs: this.#opts.writeTimeoutMs });
      } catch (err) {
        throw this.#transportError(`${job.type} write${describeUid(job.uid)}`, err);
      }
      dropFd(job);  // the kernel holds its own reference now
      this.sent++;
      let m;
      try {
        m = await this.#sock.recv({ maxBytes: this.#opts.maxResponseBytes, maxFds: 0, timeoutMs: this.#opts.ackTimeoutMs });
      } catch (err) {
        throw this.#transportError(`${job.type} ack${describeUid(job.uid)}`, err);
      }
      if (!m) throw new ZdsError('ZDS_CONNECTION_CLOSED', `ztunnel connection ${this.id} closed while waiting for the ${job.type} ack`, { connection: this.id });
      let ack;
      try {
        ack = decodeResponse(m.data).ack;
      } catch (err) {
        throw new ZdsError('ZDS_PROTOCOL', `ztunnel connection ${this.id}: undecodable response`, { cause: err, connection: this.id });
      }
      if (!ack) throw new ZdsError('ZDS_PROTOCOL', `ztunnel connection ${this.id}: response without an ack`, { connection: this.id });
      this.acked++;
      if (ack.error !== '') {
        this.nacked++;
        this.#server._nack({ connection: this.id, type: job.type, uid: job.uid, error: ack.error });
      } else {
        this.#server._ack({ connection: this.id, type: job.type, uid: job.uid });
      }
      this.#server._count(job.type);
      this.#settle(job, ack.error);
    } catch (err) {
      const reason = err instanceof ZdsError ? err : this.#transportError(job.type, err);
      this.close(reason);
      this.#settle(job, reason);
      throw reason;
    } finally {
      this.#current = undefined;
    }
  }

  #transportError(what: string, err: unknown): ZdsError {
    if (err instanceof ZdsError) return err;
    const e = err as { code?: string };
    if (e.code === 'ETIMEDOUT') {
      this.#server._timeout();
      return new ZdsError('ZDS_TIMEOUT', `ztunnel connection ${this.id}: ${what} timed out`, { cause: err, connection: this.id });
    }
    if (e.code === 'ERR_MSG_TRUNC' || e.code === 'ERR_MSG_CTRUNC')
      return new ZdsError('ZDS_PROTOCOL', `ztunnel connection ${this.id}: ${what}: oversized record or unexpected fds`, { cause: err, connection: this.id });
    return new ZdsError('ZDS_CONNECTION_CLOSED', `ztunnel connection ${this.id}: ${what} failed: ${(err as Error).message}`, { cause: err, connection: this.id });
  }

  // Waits for a job; false when the keepalive interval passed first. One
  // timer per connection, re-armed with refresh() for each wait (firing while
  // the connection is busy does nothing) and cleared on close: cheaper than
  // a new setTimeout and a clearTimeout for every request.
  #idle(): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const settle = (woke: boolean) => {
        this.#wake = this.#timedOut = undefined;
        resolve(woke);
      };
      this.#wake = () => settle(true);
      this.#timedOut = () => settle(false);
      if (this.#timer) this.#timer.refresh();
      else this.#timer = setTimeout(() => this.#timedOut?.(), this.#opts.keepaliveIntervalMs);
    });
  }

  // Upstream's liveness check: a short read. Timing out means alive; EOF,
  // an error or any data (ztunnel never speaks unasked) means close.
  async #probe(): Promise<void> {
    let m;
    try {
      m = await this.#sock.recv({ maxBytes: this.#opts.maxResponseBytes, maxFds: 0, timeoutMs: this.#opts.keepaliveProbeMs });
    } catch (err) {
      if ((err as { code?: string }).code === 'ETIMEDOUT') return;
      throw new ZdsError('ZDS_CONNECTION_CLOSED', `ztunnel connection ${this.id}: keepalive failed`, { cause: err, connection: this.id });
    }
    if (!m) throw new ZdsError('ZDS_CONNECTION_CLOSED', `ztunnel connection ${this.id} closed (keepalive)`, { connection: this.id });
    for (const f of m.fds) f.close();
    throw new ZdsError('ZDS_PROTOCOL', `ztunnel connection ${this.id} sent unsolicited data`, { connection: this.id });
  }
}

/**
 * The ZDS server. Events: 'listening', 'connect' (info: accepted, before its
 * hello), 'ready' (info: snapshot acknowledged), 'disconnect' (info, reason),
 * 'ack' (ZdsAckEvent: a request answered without error, snapshot entries
 * included), 'nack' (ZdsNackEvent), 'rejected' ({ pid, uid, gid }),
 * 'warning' (Error).
 */
export class ZdsServer extends EventEmitter {
  readonly path: string;
  readonly #mode: number;
  readonly #provider: ZdsPodProvider;
  readonly #allowedUids: Set<number> | undefined;
  readonly #admitIntervalMs: number;
  readonly #maxPendingHellos: number;
  readonly #maxAdmissionQueue: number;
  readonly #admissionTimeoutMs: number;
  readonly #maxConnections: number;
  readonly #warn: ((err: Error) => void) | undefined;
  readonly #connOpts: ConnOpts;
  #listener: UnixListener | undefined;
  /** Every accepted connection not closed yet. */
  #all = new Set<Connection>();
  /** Routable connections (said hello, admitted), oldest first. */
  #conns: Connection[] = [];
  /** Accepted connections still waiting for their hello, oldest first. */
  #greeting: Connection[] = [];
  /** Said hello, waiting for an admission token, first come first. */
  #admitQueue: Array<{ conn: Connection; resolve(): void; timer: NodeJS.Timeout }> = [];
  #admitTimer: NodeJS.Timeout | undefined;
  #nextAdmit = 0;
  /** podAdded calls waiting for something to change (a copy answered, a connection proved itself). */
  #changed = new Set<() => void>();
  #nextId = 1;
  #closed = false;
  #acceptLoop: Promise<void> | undefined;
  #stats: ZdsServerStats = {
    accepted: 0, rejected: 0, disconnects: 0, adds: 0, keeps: 0, dels: 0, snapshots: 0, nacks: 0, timeouts: 0,
    evicted: 0, skipped: 0, incompleteSnapshots: 0, overloaded: 0, failovers: 0,
  };

  constructor(opts: ZdsServerOptions = {}) {
    super();
    this.path = opts.path ?? ZTUNNEL_SOCKET_PATH;
    if (typeof this.path !== 'string' || this.path.length === 0) throw new TypeError('path must be a non-empty string');
    this.#mode = opts.mode ?? 0o600;
    if (!Number.isInteger(this.#mode) || this.#mode < 0 || this.#mode > 0o777) throw new RangeError('mode must be 0..0o777');
    this.#provider = opts.provider ?? { snapshot: () => [] };
    if (typeof this.#provider.snapshot !== 'function') throw new TypeError('provider.snapshot must be a function');
    if (opts.allowedUids !== undefined) {
      if (!Array.isArray(opts.allowedUids) || opts.allowedUids.some((u) => !Number.isInteger(u) || u < 0))
        throw new TypeError('allowedUids must be an array of uids');
      this.#allowedUids = new Set(opts.allowedUids);
    }
    if (opts.warn !== undefined && typeof opts.warn !== 'function') throw new TypeError('warn must be a function');
    this.#warn = opts.warn;
    // The interval between admissions is a timer delay too: a tiny rate would overflow it.
    this.#admitIntervalMs = 1000 / positive(opts.acceptsPerSecond, 5, 'acceptsPerSecond');
    if (this.#admitIntervalMs > MAX_TIMEOUT_MS) throw new RangeError(`acceptsPerSecond must be at least ${1000 / MAX_TIMEOUT_MS}`);
    this.#maxPendingHellos = positiveInt(opts.maxPendingHellos, 32, 'maxPendingHellos', 65_536);
    this.#maxAdmissionQueue = positiveInt(opts.maxAdmissionQueue, 16, 'maxAdmissionQueue', 65_536);
    this.#admissionTimeoutMs = optionalTimeout(opts.admissionTimeoutMs, 'admissionTimeoutMs', 5000);
    this.#maxConnections = positiveInt(opts.maxConnections, 64, 'maxConnections', 65_536);
    this.#connOpts = {
      helloTimeoutMs: optionalTimeout(opts.helloTimeoutMs, 'helloTimeoutMs', 5000),
      writeTimeoutMs: optionalTimeout(opts.writeTimeoutMs, 'writeTimeoutMs', 5000),
      ackTimeoutMs: optionalTimeout(opts.ackTimeoutMs, 'ackTimeoutMs', 5000),
      keepaliveIntervalMs: optionalTimeout(opts.keepaliveIntervalMs, 'keepaliveIntervalMs', 5000),
      keepaliveProbeMs: optionalTimeout(opts.keepaliveProbeMs, 'keepaliveProbeMs', 10),
      maxResponseBytes: positiveInt(opts.maxResponseBytes, 64 * 1024, 'maxResponseBytes', 16 << 20),
    };
  }

  /** Starts listening (creating the socket's directory if needed). */
  listen(): this {
    if (this.#closed) throw new ZdsError('ZDS_SERVER_CLOSED', 'ZDS server is closed');
    if (this.#listener) return this;
    if (!this.path.startsWith('@')) mkdirSync(dirname(this.path), { recursive: true, mode: 0o755 });
    this.#listener = listen(this.path, { type: 'seqpacket', mode: this.#mode });
    this.#acceptLoop = this.#accept(this.#listener);
    this.emit('listening');
    return this;
  }

  /** Routable connections: said hello and admitted (newest last). */
  get connectionCount(): number {
    return this.#conns.length;
  }

  /** Accepted connections that have not said hello yet. */
  get pendingHellos(): number {
    return this.#greeting.length;
  }

  /** Connections that said hello and wait for an admission token. */
  get admissionQueue(): number {
    return this.#admitQueue.length;
  }

  /** The routable connections (newest last). */
  connections(): ZdsConnectionInfo[] {
    return this.#conns.map((c) => c.info());
  }

  get stats(): Readonly<ZdsServerStats> {
    return { ...this.#stats };
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Sends `add` (+ the netns fd) to the target connection and waits for its
   * ack: the newest one that acked its snapshot, else (none has yet) the
   * newest one in its snapshot; the add is also queued on every connection
   * still in its snapshot (see "Routing" at the top). ZDS_NO_CONNECTION when
   * none; ZDS_NACK with ztunnel's text on a nack. When the target fails
   * instead (write error, EOF, ack timeout, protocol breakage: it is
   * dropped), the next choice answers; only when none is left does it fail,
   * with the last connection's ZDS_TIMEOUT / ZDS_CONNECTION_CLOSED /
   * ZDS_PROTOCOL. The netns fd is copied at once (one copy for all
   * connections), so the caller may close it any time.
   */
  async podAdded(pod: ZdsWorkload, netns: FdLike): Promise<void> {
    validateWorkload(pod);
    if (netns === undefined || netns === null) throw new TypeError('podAdded needs the pod netns');
    const data = encodeChecked({ type: 'add', uid: pod.uid, workloadInfo: pod.workloadInfo });
    if (this.#closed) throw new ZdsError('ZDS_SERVER_CLOSED', 'ZDS server is closed');
    if (this.#conns.length === 0) throw new ZdsError('ZDS_NO_CONNECTION', 'no ztunnel connection');
    const fd = new SharedFd(dupFd(netns));
    type Copy = { done: boolean; ack: string; error: Error | undefined };
    const copies = new Map<Connection, Copy>();
    let wake: (() => void) | undefined;
    const changed = () => wake?.();
    const send = (c: Connection): void => {
      const copy: Copy = { done: false, ack: '', error: undefined };
      copies.set(c, copy);
      c.enqueue({ type: 'add', uid: pod.uid, data, fd: fd.share() }).then((ack) => {
        copy.ack = ack;
      }, (err: Error) => {
        copy.error = err;
      }).finally(() => {
        copy.done = true;
        changed();
      });
    };
    this.#changed.add(changed);
    try {
      const first = this.#pick(copies, false);
      if (first === undefined) throw new ZdsError('ZDS_NO_CONNECTION', 'no ztunnel connection');
      let target: Connection = first;
      send(target);
      for (const c of this.#conns) if (c !== target && c.state !== 'ready' && c.state !== 'closed') send(c);
      let last: ZdsError | undefined;
      let failedOver = false;
      for (;;) {
        if (this.#closed) throw new ZdsError('ZDS_SERVER_CLOSED', 'ZDS server is closed');
        const copy: Copy = copies.get(target)!;
        if (copy.done) {
          if (copy.error === undefined) {
            if (copy.ack !== '') throw new ZdsError('ZDS_NACK', `got ack error: ${copy.ack}`, { nack: copy.ack, connection: target.id });
            return;
          }
          if (!connectionFailure(copy.error)) throw copy.error;
          last = copy.error;  // that connection is closed and out of the list now
          failedOver = true;
        }
        // Move on when the target failed, or when it has not proved itself
        // and another connection has (a proved one never waits for a newer one).
        const next: Connection | undefined = copy.done ? this.#pick(copies, false) : target.state === 'ready' ? undefined : this.#pick(copies, true);
        if (copy.done && next === undefined) throw last ?? new ZdsError('ZDS_NO_CONNECTION', 'no ztunnel connection');
        if (next !== undefined && next !== target) {
          target = next;
          if (failedOver) this.#stats.failovers++;
          failedOver = false;
          if (!copies.has(target)) send(target);
          continue;  // its copy may have been answered already
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
      }
    } finally {
      this.#changed.delete(changed);
      fd.release();
    }
  }

  // The newest live routable connection that has no failed copy of this add:
  // a proved one ('ready') first; any other only when `provedOnly` is false
  // and none has proved itself.
  #pick(copies: Map<Connection, { done: boolean; error: Error | undefined }>, provedOnly: boolean): Connection | undefined {
    let fallback: Connection | undefined;
    for (let i = this.#conns.length - 1; i >= 0; i--) {
      const c = this.#conns[i]!;
      const copy = copies.get(c);
      if (c.state === 'closed' || (copy?.done && copy.error !== undefined)) continue;
      if (c.state === 'ready') return c;
      fallback ??= c;
    }
    return provedOnly ? undefined : fallback;
  }

  /**
   * Sends `del` to every connection, oldest first, one after another. Nacks
   * are ignored (as upstream); transport failures are collected: one error
   * is thrown as is, several as an AggregateError of ZdsErrors.
   */
  async podDeleted(uid: string): Promise<void> {
    if (typeof uid !== 'string' || uid.length === 0) throw new TypeError('uid must be a non-empty string');
    const data = encodeChecked({ type: 'del', uid });
    if (this.#closed) throw new ZdsError('ZDS_SERVER_CLOSED', 'ZDS server is closed');
    const errors: Error[] = [];
    for (const conn of [...this.#conns]) {
      try {
        await conn.enqueue({ type: 'del', uid, data, fd: undefined });
      } catch (err) {
        errors.push(err as Error);
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, `del ${uid} failed on ${errors.length} ztunnel connections`);
  }

  /** Stops listening, removes the socket file, closes every connection; pending requests fail with ZDS_SERVER_CLOSED. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#listener?.close();
    clearTimeout(this.#admitTimer);
    this.#admitTimer = undefined;
    const reason = new ZdsError('ZDS_SERVER_CLOSED', 'ZDS server closed');
    const conns = [...this.#all];
    for (const c of conns) c.close(reason);
    await Promise.allSettled([this.#acceptLoop, ...conns.map((c) => c.done)]);
  }

  // Drains the backlog as fast as connections come: nothing is rate-limited
  // before the hello (see the top of the file).
  async #accept(listener: UnixListener): Promise<void> {
    let accepted = 0;
    while (!this.#closed) {
      let sock: UnixConnection;
      try {
        sock = await listener.accept();
      } catch (err) {
        if (this.#closed) return;
        this._warn(err as Error);  // EMFILE and the like: back off and retry
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      this.#stats.accepted++;
      this.#admitSocket(sock);
      // Let the loop poll between short bursts of accepts, so hellos that
      // arrive are read before maxPendingHellos newer connections pile up
      // (a ztunnel whose hello is on its way is not evicted by a burst).
      if (++accepted % 8 === 0) await new Promise((r) => setImmediate(r));
    }
  }

  #admitSocket(sock: UnixConnection): void {
    let creds;
    try {
      creds = sock.peerCredentials();
    } catch (err) {
      sock.close();
      this._warn(err as Error);
      return;
    }
    if (this.#allowedUids && !this.#allowedUids.has(creds.uid)) {
      sock.close();
      this.#stats.rejected++;
      this.emit('rejected', creds);
      return;
    }
    const conn = new Connection(this.#nextId++, sock, creds, this, this.#connOpts);
    if (conn.state === 'closed') return;
    this.#all.add(conn);
    this.#greeting.push(conn);
    this.emit('connect', conn.info());
    while (this.#greeting.length > this.#maxPendingHellos) {
      const oldest = this.#greeting[0]!;
      this.#stats.evicted++;
      oldest.close(new ZdsError('ZDS_EVICTED',
        `ztunnel connection ${oldest.id} closed: no hello yet and ${this.#maxPendingHellos} newer connections waiting for theirs`,
        { connection: oldest.id }));
    }
  }

  /**
   * @internal The connection said hello: out of the hello pool, into the
   * admission queue (bounded, with a deadline), then through the token
   * bucket in order, then registered as the newest routable one. Resolves
   * when it is routable or closed.
   */
  _admit(conn: Connection): Promise<void> {
    const i = this.#greeting.indexOf(conn);
    if (i >= 0) this.#greeting.splice(i, 1);
    if (conn.state === 'closed') return Promise.resolve();
    if (this.#admitQueue.length >= this.#maxAdmissionQueue) {
      this.#stats.overloaded++;
      conn.close(new ZdsError('ZDS_OVERLOAD',
        `ztunnel connection ${conn.id} closed: ${this.#maxAdmissionQueue} connections already wait for admission`, { connection: conn.id }));
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#stats.timeouts++;
        conn.close(new ZdsError('ZDS_TIMEOUT',
          `ztunnel connection ${conn.id}: no admission within ${this.#admissionTimeoutMs} ms`, { connection: conn.id }));
      }, this.#admissionTimeoutMs);
      this.#admitQueue.push({ conn, resolve, timer });
      this.#pumpAdmissions();
    });
  }

  // Admits the queue's head whenever a token is there; one timer for the next token.
  #pumpAdmissions(): void {
    if (this.#admitTimer !== undefined || this.#closed) return;
    while (this.#admitQueue.length > 0) {
      const wait = this.#nextAdmit - Date.now();
      if (wait > 0) {
        this.#admitTimer = setTimeout(() => {
          this.#admitTimer = undefined;
          this.#pumpAdmissions();
        }, wait);
        return;
      }
      const { conn, resolve, timer } = this.#admitQueue.shift()!;
      clearTimeout(timer);
      if (this.#conns.length >= this.#maxConnections) {
        this.#stats.overloaded++;  // refused without using a token
        conn.close(new ZdsError('ZDS_OVERLOAD',
          `ztunnel connection ${conn.id} closed: ${this.#maxConnections} ztunnel connections already`, { connection: conn.id }));
      } else {
        this.#nextAdmit = Date.now() + this.#admitIntervalMs;
        this.#conns.push(conn);
      }
      resolve();
    }
  }

  /** @internal */
  _remove(conn: Connection, reason: ZdsError): void {
    if (!this.#all.delete(conn)) return;
    let i = this.#conns.indexOf(conn);
    if (i >= 0) this.#conns.splice(i, 1);
    else if ((i = this.#greeting.indexOf(conn)) >= 0) this.#greeting.splice(i, 1);
    else if ((i = this.#admitQueue.findIndex((e) => e.conn === conn)) >= 0) {
      const [e] = this.#admitQueue.splice(i, 1);
      clearTimeout(e!.timer);
      e!.resolve();
    }
    this.#stats.disconnects++;
    this.emit('disconnect', conn.info(), reason);
  }

  /** @internal The connection acked its snapshot: it has proved itself (a target for adds). */
  _ready(conn: Connection): void {
    this.#stats.snapshots++;
    for (const changed of [...this.#changed]) changed();
    this.emit('ready', conn.info());
  }

  /** @internal */
  _ack(ev: ZdsAckEvent): void {
    this.emit('ack', ev);
  }

  /** @internal */
  _nack(ev: ZdsNackEvent): void {
    this.#stats.nacks++;
    this.emit('nack', ev);
  }

  /** @internal */
  _count(type: ZdsNackEvent['type']): void {
    if (type === 'add') this.#stats.adds++;
    else if (type === 'keep') this.#stats.keeps++;
    else if (type === 'del') this.#stats.dels++;
  }

  /** @internal */
  _timeout(): void {
    this.#stats.timeouts++;
  }

  /** @internal */
  _warn(err: Error): void {
    if (this.#warn) {
      try {
        this.#warn(err);
      } catch {
        // a throwing logger must not break the server
      }
    }
    this.emit('warning', err);
  }

  /** @internal */
  async _snapshot(): Promise<Iterable<ZdsPod>> {
    return this.#provider.snapshot();
  }

  /**
   * @internal One snapshot entry as a job (its own netns dup), or undefined
   * when it is left out: no uid to name it, or gone from the provider when
   * asked again. Throws ZDS_SNAPSHOT_INCOMPLETE (reported and counted) when
   * its netns cannot be passed: the connection is closed instead of sending
   * a snapshot with a hole (see the top of the file).
   */
  async _snapshotJob(p: ZdsPod, connection: number): Promise<Job | undefined> {
    const first = this.#entryJob(p, connection);
    if (!('failed' in first)) return first.job;
    let err = first.failed;
    if (!resourceShortage(err)) {
      // Most likely the handle was closed because the pod left the cache or
      // got a new netns since the snapshot was read: what does the cache say now?
      const uid = first.uid;
      try {
        const now = [...await this.#provider.snapshot()].find((q) => usableUid(q) === uid);
        if (now === undefined) return undefined;  // gone: its del follows on this connection
        const again = this.#entryJob(now, connection);
        if (!('failed' in again)) return again.job;
        err = again.failed;
      } catch (e) {
        err = e;
      }
    }
    const why = err instanceof NetError ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err);
    const e = new ZdsError('ZDS_SNAPSHOT_INCOMPLETE',
      `ztunnel connection ${connection}: snapshot abandoned (connection closed for a fresh one): the netns of ${JSON.stringify(first.uid)} cannot be passed: ${why}`,
      { cause: err, connection });
    this.#stats.incompleteSnapshots++;
    this._warn(e);
    throw e;
  }

  // The job for one entry; `failed` when its netns cannot be dup'ed.
  #entryJob(p: ZdsPod, connection: number): { job: Job | undefined } | { failed: unknown; uid: string } {
    const job = (type: Job['type'], uid: string, data: Buffer, fd: FdHandle | undefined): Job =>
      ({ type, uid, data, fd, resolve: () => {}, reject: () => {}, settled: false });
    const bad = (what: string, err: unknown) => {
      this.#stats.skipped++;
      this._warn(new ZdsError('ZDS_BAD_ENTRY', `ztunnel connection ${connection}: snapshot entry ${what}: ${err instanceof Error ? err.message : String(err)}`,
        { cause: err, connection }));
    };
    const uid = usableUid(p);
    if (uid === undefined) {
      bad('left out', new TypeError('pod.uid must be a non-empty string'));
      return { job: undefined };
    }
    let keep: Buffer;
    try {
      keep = encodeChecked({ type: 'keep', uid });
    } catch (err) {
      bad(`${JSON.stringify(uid.slice(0, 64))} left out`, err);
      return { job: undefined };
    }
    if (p.netns === undefined) return { job: job('keep', uid, keep, undefined) };
    let add: Buffer;
    try {
      validateWorkload(p);
      add = encodeChecked({ type: 'add', uid, workloadInfo: p.workloadInfo });
    } catch (err) {
      bad(`${JSON.stringify(uid)} sent as keep`, err);
      return { job: job('keep', uid, keep, undefined) };
    }
    try {
      return { job: job('add', uid, add, dupFd(p.netns)) };
    } catch (err) {
      return { failed: err, uid };
    }
  }
}
