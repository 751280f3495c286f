// Unix-domain SOCK_SEQPACKET (and SOCK_STREAM) sockets with SCM_RIGHTS fd
// passing, which Node's `net` module cannot do. The addon only makes
// non-blocking attempts and reports readiness (uv_poll on this thread's
// loop); this module turns that into promises, FIFO queues, deadlines and
// back-pressure: a record is only read when somebody asked for one, and a
// send that would block waits for writability.
import { constants as osc } from 'node:os';
import { lstatSync, unlinkSync } from 'node:fs';
import type { NativeUnixSocket } from '../../native.js';
import { native } from '../binding.js';
import { NetError } from '../errors.js';
import { optionalTimeout } from '../../util/timeout.js';

export type UnixSocketType = 'seqpacket' | 'stream';

// Linux values (sys/socket.h).
const SOCK_STREAM = 1;
const SOCK_SEQPACKET = 5;
const READABLE = 1;
const WRITABLE = 2;

/** Default receive limits: ZDS records are ≤ 1 KiB, but responses may carry long error texts. */
export const DEFAULT_MAX_BYTES = 64 * 1024;
export const DEFAULT_MAX_FDS = 8;

function typeNo(type: UnixSocketType | undefined): number {
  if (type === undefined || type === 'seqpacket') return SOCK_SEQPACKET;
  if (type === 'stream') return SOCK_STREAM;
  throw new TypeError(`socket type must be 'seqpacket' or 'stream', got ${String(type)}`);
}

function validateName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name === '@')
    throw new TypeError('unix socket name must be a non-empty path or @abstract name');
  if (name.includes('\0')) throw new TypeError('unix socket name must not contain NUL bytes');
  if (Buffer.byteLength(name) > (name.startsWith('@') ? 108 : 107))
    throw new RangeError(`unix socket name longer than sun_path: ${name}`);
  return name;
}

const closedError = (op: string) => new NetError(`${op}: socket closed`, { errno: osc.errno.ECANCELED, op, code: 'ERR_SOCKET_CLOSED' });
const timeoutError = (op: string, ms: number) => new NetError(`${op}: timed out after ${ms} ms`, { errno: osc.errno.ETIMEDOUT, op });

/**
 * A file descriptor this process owns (one received over SCM_RIGHTS, or a
 * dup). Closed exactly once: by close(), or by whoever took it with release().
 */
export class OwnedFd {
  #fd: number;

  constructor(fd: number) {
    if (!Number.isInteger(fd) || fd < 0) throw new RangeError(`invalid fd ${fd}`);
    this.#fd = fd;
  }

  /** The fd number. Throws NetError EBADF after close() or release(). */
  get fd(): number {
    if (this.#fd < 0) throw new NetError('fd already closed or passed on', { errno: osc.errno.EBADF, op: 'fd' });
    return this.#fd;
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  /** Closes the fd (idempotent). */
  close(): void {
    if (this.#fd < 0) return;
    const fd = this.#fd;
    this.#fd = -1;
    native().fdClose(fd);
  }

  /** Hands the fd number on; the caller now closes it. */
  release(): number {
    const fd = this.fd;
    this.#fd = -1;
    return fd;
  }
}

/** Something carrying an fd: a number the caller keeps owning, an OwnedFd, a Netns. */
export type FdLike = number | { readonly fd: number };

export interface Message {
  data: Buffer;
  /** Received fds, owned by the receiver (close them or pass them on). */
  fds: OwnedFd[];
}

export interface RecvOptions {
  /** Receive buffer; a longer record is consumed and fails with ERR_MSG_TRUNC. */
  maxBytes?: number;
  /** Room for this many fds; more fail with ERR_MSG_CTRUNC (the kernel closes the excess). */
  maxFds?: number;
  /** Reject with ETIMEDOUT after this long (nothing is consumed then). */
  timeoutMs?: number;
}

export interface SendOptions {
  /** Reject with ETIMEDOUT when the socket stays full this long (nothing was sent). */
  timeoutMs?: number;
}

export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

interface SendOp {
  data: Buffer;
  offset: number;
  fds: number[];
  dups: number[] | undefined;  // our own copies, made when the send has to wait
  resolve(): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout | undefined;
}

interface RecvOp {
  maxBytes: number;
  maxFds: number;
  resolve(m: Message | null): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout | undefined;
}

/** A connected unix socket (accepted, connected, or one end of a pair). */
export class UnixConnection implements AsyncIterable<Message> {
  readonly #sock: NativeUnixSocket;
  readonly type: UnixSocketType;
  #sends: SendOp[] = [];
  #recvs: RecvOp[] = [];
  #watching = 0;
  #eof = false;
  #closed = false;

  /** @internal */
  constructor(sock: NativeUnixSocket, type: UnixSocketType) {
    this.#sock = sock;
    this.type = type;
  }

  get fd(): number {
    return this.#sock.fd;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Whether the peer's end-of-stream (or a zero-length record) was read. */
  get ended(): boolean {
    return this.#eof;
  }

  /** Sends waiting for room in the socket buffer. */
  get pendingSends(): number {
    return this.#sends.length;
  }

  /** SO_PEERCRED: the peer's pid, uid and gid at connect time. */
  peerCredentials(): PeerCredentials {
    return this.#sock.peerCredentials();
  }

  /**
   * Sends one record (seqpacket) or the whole buffer (stream) with `fds`
   * attached via SCM_RIGHTS. Sends go out in call order. The fds stay the
   * caller's: they are used as they are now (a copy is kept while the send
   * waits for room, so closing the original early is safe) and never closed.
   */
  send(data: Uint8Array, fds: FdLike[] = [], opts: SendOptions = {}): Promise<void> {
    if (!(data instanceof Uint8Array)) throw new TypeError('send: data must be a Buffer or Uint8Array');
    if (!Array.isArray(fds)) throw new TypeError('send: fds must be an array');
    const nums = fds.map((f) => {
      const n = typeof f === 'number' ? f : f?.fd;
      if (!Number.isInteger(n) || (n as number) < 0) throw new TypeError(`send: invalid fd ${String(n)}`);
      return n as number;
    });
    if (nums.length > 253) throw new RangeError('send: at most 253 fds per message (SCM_MAX_FD)');
    const timeoutMs = optionalTimeout(opts.timeoutMs, 'send timeoutMs', undefined, { allowZero: true });
    if (this.#closed) return Promise.reject(closedError('sendmsg'));
    const buf = Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    return new Promise<void>((resolve, reject) => {
      const op: SendOp = { data: buf, offset: 0, fds: nums, dups: undefined, resolve, reject, timer: undefined };
      this.#sends.push(op);
      if (this.#sends.length === 1) this.#pumpSends();
      if (this.#sends.includes(op)) {
        // It has to wait: hold our own copies of the fds so the caller may
        // close theirs (and the numbers may be reused) before we send.
        if (op.fds.length && !op.dups) {
          try {
            op.dups = op.fds.map((fd) => native().fdDup(fd));
          } catch (err) {
            this.#finishSend(op, err);
            return;
          }
        }
        if (timeoutMs !== undefined) {
          op.timer = setTimeout(() => {
            if (op.offset > 0) {
              // Part of a stream write went out; the byte stream is now broken.
              this.#finishSend(op, timeoutError('sendmsg', timeoutMs));
              this.close();
            } else {
              this.#finishSend(op, timeoutError('sendmsg', timeoutMs));
            }
          }, timeoutMs);
        }
      }
      this.#updateWatch();
    });
  }

  /**
   * Receives one record (seqpacket) or whatever bytes are there (stream).
   * Resolves null at end of stream (a zero-length record counts as EOF).
   * Truncation rejects with NetError ERR_MSG_TRUNC / ERR_MSG_CTRUNC; the
   * record is gone and any fds it carried are closed.
   */
  recv(opts: RecvOptions = {}): Promise<Message | null> {
    const maxBytes = opts.maxBytes ?? DEFAULT_MAX_BYTES;
    const maxFds = opts.maxFds ?? DEFAULT_MAX_FDS;
    if (!Number.isInteger(maxBytes) || maxBytes < 1 || maxBytes > 16 << 20) throw new RangeError('recv: maxBytes must be 1..16 MiB');
    if (!Number.isInteger(maxFds) || maxFds < 0 || maxFds > 253) throw new RangeError('recv: maxFds must be 0..253');
    const timeoutMs = optionalTimeout(opts.timeoutMs, 'recv timeoutMs', undefined, { allowZero: true });
    if (this.#closed) return Promise.reject(closedError('recvmsg'));
    if (this.#eof) return Promise.resolve(null);
    return new Promise<Message | null>((resolve, reject) => {
      const op: RecvOp = { maxBytes, maxFds, resolve, reject, timer: undefined };
      this.#recvs.push(op);
      if (this.#recvs.length === 1) this.#pumpRecvs();
      if (this.#recvs.includes(op) && timeoutMs !== undefined) {
        op.timer = setTimeout(() => this.#finishRecv(op, timeoutError('recvmsg', timeoutMs)), timeoutMs);
      }
      this.#updateWatch();
    });
  }

  /** Records until EOF. Breaking out of the loop leaves the socket open. */
  async *[Symbol.asyncIterator](): AsyncIterator<Message> {
    for (;;) {
      const m = await this.recv();
      if (m === null) return;
      yield m;
    }
  }

  /** Closes the socket (idempotent); waiting sends and receives reject with ERR_SOCKET_CLOSED. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#sock.close();
    this.#watching = 0;
    for (const op of this.#sends.splice(0)) this.#settleSend(op, closedError('sendmsg'));
    for (const op of this.#recvs.splice(0)) this.#settleRecv(op, closedError('recvmsg'));
  }

  #pumpSends(): void {
    while (this.#sends.length && !this.#closed) {
      const op = this.#sends[0]!;
      const fds = op.offset === 0 ? op.dups ?? op.fds : [];
      let n: number;
      try {
        n = this.#sock.send(op.offset ? op.data.subarray(op.offset) : op.data, fds);
      } catch (err) {
        this.#finishSend(op, err);
        continue;
      }
      if (n < 0) return;  // full: wait for writability
      op.offset += n;
      if (this.type === 'stream' && op.offset < op.data.length) {
        // Partial stream write: the fds went with the first byte.
        op.fds = [];
        this.#closeDups(op);
        continue;
      }
      this.#finishSend(op);
    }
  }

  #pumpRecvs(): void {
    while (this.#recvs.length && !this.#closed) {
      const op = this.#recvs[0]!;
      let r: { data: Buffer; fds: number[] } | null;
      try {
        r = this.#sock.recv(op.maxBytes, op.maxFds);
      } catch (err) {
        this.#finishRecv(op, err);
        continue;
      }
      if (r === null) return;  // nothing yet
      if (r.data.length === 0) {
        for (const fd of r.fds) native().fdClose(fd);
        this.#eof = true;
        for (const o of this.#recvs.splice(0)) this.#settleRecv(o, null);
        return;
      }
      this.#finishRecv(op, undefined, { data: r.data, fds: r.fds.map((fd) => new OwnedFd(fd)) });
    }
  }

  #finishSend(op: SendOp, err?: unknown): void {
    const i = this.#sends.indexOf(op);
    if (i >= 0) this.#sends.splice(i, 1);
    this.#settleSend(op, err);
    this.#updateWatch();
  }

  #settleSend(op: SendOp, err?: unknown): void {
    if (op.timer) clearTimeout(op.timer);
    this.#closeDups(op);
    if (err === undefined) op.resolve();
    else op.reject(err);
  }

  #closeDups(op: SendOp): void {
    if (!op.dups) return;
    for (const fd of op.dups) native().fdClose(fd);
    op.dups = undefined;
  }

  #finishRecv(op: RecvOp, err?: unknown, msg?: Message): void {
    const i = this.#recvs.indexOf(op);
    if (i >= 0) this.#recvs.splice(i, 1);
    this.#settleRecv(op, err, msg);
    this.#updateWatch();
  }

  #settleRecv(op: RecvOp, err: unknown, msg?: Message | null): void {
    if (op.timer) clearTimeout(op.timer);
    if (err !== undefined && err !== null) op.reject(err);
    else op.resolve(msg ?? null);
  }

  #updateWatch(): void {
    if (this.#closed) return;
    const want = (this.#recvs.length ? READABLE : 0) | (this.#sends.length ? WRITABLE : 0);
    if (want === this.#watching) return;
    this.#watching = want;
    this.#sock.watch(want, this.#onReady);
  }

  readonly #onReady = (_errno: number, events: number): void => {
    if (events & WRITABLE) this.#pumpSends();
    if (events & READABLE) this.#pumpRecvs();
    this.#updateWatch();
  };
}

export interface ListenOptions {
  type?: UnixSocketType;
  /** File mode of the socket (e.g. 0o600); ignored for @abstract names. Default: the umask's. */
  mode?: number;
  backlog?: number;
}

/**
 * A listening unix socket. A stale socket file left at the path (nobody
 * listening) is replaced; anything else there fails with EADDRINUSE. The
 * file is removed again by close() if it is still ours.
 */
export class UnixListener implements AsyncIterable<UnixConnection> {
  readonly #sock: NativeUnixSocket;
  readonly path: string;
  readonly type: UnixSocketType;
  readonly #ino: number | undefined;
  #accepts: Array<{ resolve(c: UnixConnection): void; reject(e: unknown): void }> = [];
  #watching = false;
  #closed = false;

  /** @internal */
  constructor(sock: NativeUnixSocket, path: string, type: UnixSocketType) {
    this.#sock = sock;
    this.path = path;
    this.type = type;
    if (!path.startsWith('@')) {
      try {
        this.#ino = lstatSync(path).ino;
      } catch {
        this.#ino = undefined;
      }
    }
  }

  get fd(): number {
    return this.#sock.fd;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The next connection (waits for one). */
  accept(): Promise<UnixConnection> {
    if (this.#closed) return Promise.reject(closedError('accept'));
    const c = this.tryAccept();
    if (c) return Promise.resolve(c);
    return new Promise((resolve, reject) => {
      this.#accepts.push({ resolve, reject });
      this.#update();
    });
  }

  /** A queued connection, or null right now (never waits). */
  tryAccept(): UnixConnection | null {
    if (this.#closed) throw closedError('accept');
    const s = this.#sock.accept();
    return s ? new UnixConnection(s, this.type) : null;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<UnixConnection> {
    while (!this.#closed) {
      try {
        yield await this.accept();
      } catch (err) {
        if (this.#closed) return;
        throw err;
      }
    }
  }

  /** Stops listening (idempotent), rejects waiting accepts and unlinks the socket file if it is still ours. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#sock.close();
    for (const a of this.#accepts.splice(0)) a.reject(closedError('accept'));
    if (this.#ino !== undefined) {
      try {
        const st = lstatSync(this.path);
        if (st.isSocket() && st.ino === this.#ino) unlinkSync(this.path);
      } catch {
        // already gone
      }
    }
  }

  #update(): void {
    if (this.#closed) return;
    const want = this.#accepts.length > 0;
    if (want === this.#watching) return;
    this.#watching = want;
    this.#sock.watch(want ? READABLE : 0, this.#onReady);
  }

  readonly #onReady = (): void => {
    while (this.#accepts.length && !this.#closed) {
      let s: NativeUnixSocket | null;
      try {
        s = this.#sock.accept();
      } catch (err) {
        this.#accepts.shift()!.reject(err);  // EMFILE and friends: tell one waiter
        continue;
      }
      if (!s) break;
      this.#accepts.shift()!.resolve(new UnixConnection(s, this.type));
    }
    this.#update();
  };
}

/** Listens on a path or an @abstract name. */
export function listen(name: string, opts: ListenOptions = {}): UnixListener {
  validateName(name);
  const type = opts.type ?? 'seqpacket';
  const mode = opts.mode ?? -1;
  if (!Number.isInteger(mode) || mode < -1 || mode > 0o7777) throw new RangeError(`mode ${mode} out of range`);
  const backlog = opts.backlog ?? 128;
  if (!Number.isInteger(backlog) || backlog < 0 || backlog > 65535) throw new RangeError(`backlog ${backlog} out of range`);
  const sock = native().unixListen(name, typeNo(type), mode, backlog);
  return new UnixListener(sock, name, type);
}

export interface ConnectOptions {
  type?: UnixSocketType;
  /** How long to retry while the listener's backlog is full (EAGAIN). Default 5 s. */
  timeoutMs?: number;
}

/**
 * Connects to a path or an @abstract name. A full backlog (EAGAIN) is
 * retried with a short backoff until timeoutMs; ENOENT and ECONNREFUSED
 * fail at once (callers that want ztunnel-style retries loop themselves).
 */
export async function connect(name: string, opts: ConnectOptions = {}): Promise<UnixConnection> {
  validateName(name);
  const type = opts.type ?? 'seqpacket';
  const t = typeNo(type);
  const timeoutMs = optionalTimeout(opts.timeoutMs, 'connect timeoutMs', 5000, { allowZero: true });
  const deadline = Date.now() + timeoutMs;
  for (let delay = 5; ; delay = Math.min(delay * 2, 200)) {
    const { socket, inProgress } = native().unixConnect(name, t);
    if (!inProgress) return new UnixConnection(socket, type);
    // A unix connect that would block is not queued: try again.
    socket.close();
    if (Date.now() + delay > deadline) throw timeoutError('connect', timeoutMs);
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** A connected pair (socketpair(2)). */
export function socketPair(type: UnixSocketType = 'seqpacket'): [UnixConnection, UnixConnection] {
  const [a, b] = native().unixPair(typeNo(type));
  return [new UnixConnection(a, type), new UnixConnection(b, type)];
}
