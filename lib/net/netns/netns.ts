// Network namespaces: open, create, remove and list them, run programs and
// read sysctls inside them, and reach their netlink handle. The JS thread
// never enters a namespace; everything that must be "inside" runs on the
// addon's own threads or in a child born inside the netns.
import { optionalTimeout } from '../../util/timeout.js';
import { accessSync, constants as fsc, readdirSync, readlinkSync } from 'node:fs';
import { constants as osc } from 'node:os';
import { isIP } from 'node:net';
import { delimiter, join } from 'node:path';
import type { NativeInetSpec } from '../../native.js';
import { native } from '../binding.js';
import { NetError } from '../errors.js';
import { acquireHandle, releaseHandle, type NetHandle } from './handle.js';

/** Where `ip netns` keeps named namespaces. */
export const NETNS_RUN_DIR = '/run/netns';

export interface NetnsId {
  dev: number;
  ino: number;
}

/**
 * Options of `ns.spawn`. The child runs in its own process group; on timeout
 * (and when the addon's env shuts down, e.g. `worker.terminate()`) the whole
 * group is killed with SIGKILL. `spawn` resolves as soon as the child itself
 * has exited and the output it already wrote has been read: a background
 * grandchild that still holds stdout/stderr does not keep the call open, and
 * anything it writes later is not collected. A grandchild that left the group
 * (`setsid`, `setpgid`) is not killed. At most 16 spawns wait for their
 * children at once (one thread each); more queue in order.
 */
export interface SpawnOptions {
  /** Written to the child's stdin, which is then closed. */
  stdin?: string | Buffer;
  /** The child's whole environment; defaults to this process's. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Kill (SIGKILL) the child after this many ms; 0 or absent: no limit. */
  timeoutMs?: number;
}

export interface SocketOptions {
  type: 'tcp' | 'udp';
  /** 4 or 6; optional when `bind.address` says it. */
  family?: 4 | 6;
  /** SO_MARK (e.g. ztunnel's 0x539). */
  mark?: number;
  /** Bind (and for TCP, listen) inside the netns. */
  bind?: { address: string; port: number; backlog?: number; reusePort?: boolean; transparent?: boolean };
}

export interface SpawnResult {
  /** Exit code, or null when a signal ended the child. */
  code: number | null;
  /** Terminating signal name (`SIGKILL`), or null. */
  signal: string | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

const SIGNAL_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(osc.signals).map(([name, no]) => [no, name]),
);

function validateName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0) throw new TypeError('netns name must be a non-empty string');
  if (name.length > 255 || name === '.' || name === '..' || name.includes('/') || name.includes('\0'))
    throw new TypeError(`invalid netns name ${JSON.stringify(name)}`);
  return name;
}

/** `net.ipv4.ip_forward` or `net/ipv4/ip_forward` → /proc/sys/net/ipv4/ip_forward. */
function sysctlPath(key: unknown): string {
  if (typeof key !== 'string') throw new TypeError('sysctl key must be a string');
  const parts = key.includes('/') ? key.split('/') : key.split('.');
  if (parts[0] !== 'net' || parts.length < 2 || parts.some((p) => p === '' || p === '.' || p === '..'))
    throw new TypeError(`sysctl key ${JSON.stringify(key)} must name a net.* setting`);
  return `/proc/sys/${parts.join('/')}`;
}

// /proc/thread-self/net is the netns of the reading thread: the job thread inside.
function procNetPath(file: unknown): string {
  if (typeof file !== 'string' || !/^[a-z0-9_]+(\/[a-z0-9_]+)?$/i.test(file)) throw new TypeError(`invalid /proc/net file ${JSON.stringify(file)}`);
  return `/proc/thread-self/net/${file}`;
}

/** Resolves argv[0] against PATH as execvp would (the child's PATH, else ours). */
function resolveProgram(file: string, env: Record<string, string | undefined>): string {
  if (file.includes('/')) return file;
  const path = env.PATH ?? process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, file);
    try {
      accessSync(candidate, fsc.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  throw new NetError(`spawn ${file}: not found in PATH`, { errno: osc.errno.ENOENT, op: 'spawn' });
}

// Node ≥ 20.4 (and 18.18) define Symbol.dispose; older 20.x releases get the
// symbol Node itself uses, so `[Symbol.dispose]` below is never `undefined`.
if (typeof Symbol.dispose !== 'symbol') Object.defineProperty(Symbol, 'dispose', { value: Symbol.for('nodejs.dispose') });

export class Netns {
  #fd: number;
  #busy = 0;
  #closed = false;
  #handle: Promise<NetHandle> | undefined;
  readonly id: NetnsId;
  /** The path it was opened from. */
  readonly path: string;

  private constructor(path: string, fd: number, id: NetnsId) {
    this.path = path;
    this.#fd = fd;
    this.id = id;
  }

  /** Opens a netns file (`/run/netns/NAME`, `/proc/PID/ns/net`, ...). Not an nsfs netns → NetError ERR_NOT_NETNS. */
  static open(path: string): Netns {
    if (typeof path !== 'string' || path.length === 0) throw new TypeError('netns path must be a non-empty string');
    const { fd, dev, ino } = native().nsOpen(path);
    return new Netns(path, fd, { dev, ino });
  }

  /** Opens a named netns (`/run/netns/NAME`), a path, or a pid's netns. */
  static resolve(ref: string | number): Netns {
    if (typeof ref === 'number' || /^\d+$/.test(ref)) return Netns.fromPid(Number(ref));
    return ref.includes('/') ? Netns.open(ref) : Netns.open(join(NETNS_RUN_DIR, validateName(ref)));
  }

  /** The netns of a process. */
  static fromPid(pid: number): Netns {
    if (!Number.isInteger(pid) || pid <= 0) throw new RangeError(`invalid pid ${pid}`);
    return Netns.open(`/proc/${pid}/ns/net`);
  }

  /** This process's netns (the one the JS thread is in). */
  static current(): Netns {
    return Netns.open('/proc/self/ns/net');
  }

  /**
   * Creates a netns persisted at `<dir>/<name>` exactly as `ip netns add` does, and opens it.
   * EEXIST when the name is taken. `dir` defaults to /run/netns.
   */
  static async create(name: string, opts: { dir?: string } = {}): Promise<Netns> {
    const dir = opts.dir ?? NETNS_RUN_DIR;
    await native().nsCreate(dir, validateName(name));
    return Netns.open(join(dir, name));
  }

  /**
   * Creates a netns with no name (nothing under /run/netns): the returned
   * object's fd is its only reference, so the namespace disappears when it is
   * closed (and nothing else, such as a socket or process, lives in it).
   */
  static async createAnonymous(): Promise<Netns> {
    const { fd, dev, ino } = await native().nsCreateAnonymous();
    return new Netns(`anonymous netns ${dev}:${ino}`, fd, { dev, ino });
  }

  /**
   * Unmounts and deletes a named netns (`ip netns del`): rejects with NetError
   * ENOENT when missing, TypeError for an invalid name. Open `Netns` objects
   * (and anything else living in it) keep the namespace itself alive.
   */
  static async remove(name: string, opts: { dir?: string } = {}): Promise<void> {
    native().nsRemove(join(opts.dir ?? NETNS_RUN_DIR, validateName(name)));
  }

  /** Names of the persisted namespaces (`ip netns list`). */
  static list(opts: { dir?: string } = {}): string[] {
    try {
      return readdirSync(opts.dir ?? NETNS_RUN_DIR).sort();
    } catch (err) {
      if ((err as { code?: string }).code === 'ENOENT') return [];
      throw err;
    }
  }

  /** The namespace of the calling JS thread as `net:[ino]` (for checks; never changes). */
  static threadNetnsLink(): string {
    return readlinkSync('/proc/thread-self/ns/net');
  }

  /** The open fd. Throws NetError EBADF after close(). */
  get fd(): number {
    this.#check();
    return this.#fd;
  }

  /** A stable identity string, `dev:ino`. */
  get key(): string {
    return `${this.id.dev}:${this.id.ino}`;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Same namespace (device and inode), whatever path it was opened from. */
  equals(other: Netns): boolean {
    return this.id.dev === other.id.dev && this.id.ino === other.id.ino;
  }

  /**
   * Closes the fd (idempotent). Operations already running keep it until they
   * finish; any later use throws NetError EBADF. Releases the netlink handle.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#handle) releaseHandle(this.key);
    if (this.#busy === 0) this.#release();
  }

  /** `using ns = Netns.open(path)`: close() when the scope ends. */
  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * The netlink handle of this netns: `nl.links`, `nl.addrs`, `nl.routes`, `nl.rules`.
   * Shared with every Netns of the same identity; closed with the last of them.
   */
  async netlink(): Promise<NetHandle> {
    this.#check();
    if (!this.#handle) {
      const handle = this.#use(() => acquireHandle(this.key, this.#fd));
      this.#handle = handle;
      handle.catch(() => {
        if (this.#handle === handle) this.#handle = undefined;  // let a later call retry
      });
    }
    return this.#handle;
  }

  /**
   * Releases this object's netlink handle (its sockets close when no other
   * Netns of the same namespace uses them) while keeping the netns fd open.
   * The next `netlink()` opens a new one. For long-lived holders of many
   * namespaces (the node agent keeps every enrolled pod's fd) that only need
   * netlink now and then.
   */
  closeNetlink(): void {
    if (!this.#handle) return;
    this.#handle = undefined;
    releaseHandle(this.key);
  }

  /**
   * Runs a program inside this netns (argv only, no shell): the child is born
   * in the namespace. Like `ip netns exec NAME argv...` without its mount
   * namespace work.
   */
  async spawn(argv: string[], opts: SpawnOptions = {}): Promise<SpawnResult> {
    this.#check();
    if (!Array.isArray(argv) || argv.length === 0 || argv.some((a) => typeof a !== 'string' || a.includes('\0')))
      throw new TypeError('argv must be a non-empty array of strings without NUL bytes');
    const timeoutMs = optionalTimeout(opts.timeoutMs, 'timeoutMs', 0, { allowZero: true });
    const envObj = opts.env ?? process.env;
    const env = Object.entries(envObj).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${v}`);
    const program = resolveProgram(argv[0]!, envObj);
    const stdin = opts.stdin === undefined ? null : Buffer.from(opts.stdin);
    const r = await this.#use(() =>
      native().spawn(this.#fd, [program, ...argv.slice(1)], env, opts.cwd ?? null, stdin, timeoutMs));
    return {
      code: r.code,
      signal: r.signal ? SIGNAL_NAMES[r.signal] ?? String(r.signal) : null,
      timedOut: r.timedOut,
      stdout: r.stdout.toString(),
      stderr: r.stderr.toString(),
    };
  }

  /**
   * Creates a socket inside this netns (it stays in it) and returns its fd,
   * non-blocking and close-on-exec, which the caller owns (hand it to
   * `new net.Socket({ fd })`; see `connectTcp`, `listenTcp`, `udpSocket` in
   * lib/net/sock/). `mark` sets SO_MARK before any traffic. With `bind` the
   * socket is bound there (numeric address; port 0 = any), and a TCP socket
   * also listens (`backlog`, default 511); `reusePort` sets SO_REUSEPORT,
   * `transparent` tries IP_TRANSPARENT (best effort). `family` may be left
   * out when `bind` gives the address. The one path by which the library
   * makes inet sockets inside a netns.
   */
  async socket(opts: SocketOptions): Promise<number> {
    if (opts.type !== 'tcp' && opts.type !== 'udp') throw new TypeError('type must be tcp or udp');
    const mark = opts.mark ?? 0;
    if (!Number.isInteger(mark) || mark < 0 || mark > 0xffffffff) throw new RangeError(`mark ${mark} is out of range`);
    const udp = opts.type === 'udp';
    const b = opts.bind;
    let spec: NativeInetSpec;
    if (b === undefined) {
      if (opts.family !== 4 && opts.family !== 6) throw new RangeError('family must be 4 or 6');
      // A plain socket: options set, not bound (the address only picks the family).
      spec = { udp, address: opts.family === 4 ? '0.0.0.0' : '::', port: 0, mark, reusePort: false, transparent: false, optional: false, bind: false };
    } else {
      const family = isIP(b.address);
      if (family === 0) throw new TypeError(`bind address must be a numeric IP address, got ${JSON.stringify(b.address)}`);
      if (opts.family !== undefined && opts.family !== family) throw new RangeError(`bind address ${b.address} is not IPv${opts.family}`);
      if (!Number.isInteger(b.port) || b.port < 0 || b.port > 65535) throw new RangeError(`port ${b.port} is out of range 0-65535`);
      const backlog = b.backlog ?? 511;
      if (!Number.isInteger(backlog) || backlog < 0 || backlog > 0x7fffffff) throw new RangeError(`backlog ${backlog} is out of range`);
      spec = { udp, address: b.address, port: b.port, mark, reusePort: b.reusePort ?? false, transparent: b.transparent ?? false, optional: false, backlog };
    }
    const [opened] = await this.#use(() => native().inetOpen(this.#fd, [spec]));
    return opened!.fd!;
  }

  /**
   * Reads `/proc/net/FILE` as seen from inside this netns (e.g. `ip_tables_names`,
   * `dev`, `snmp`). ENOENT when the file does not exist (module not loaded).
   */
  async readProcNet(file: string): Promise<string> {
    return this.#readOne(procNetPath(file));
  }

  /**
   * Reads several `/proc/net/FILE` and `/proc/sys/net/...` entries of this netns
   * at once (one switch into the netns): `{ procNet: [...], sysctl: [...] }` in,
   * the values in the same order out, `undefined` for a missing one.
   */
  async readMany(req: { procNet?: string[]; sysctl?: string[] }): Promise<{ procNet: Array<string | undefined>; sysctl: Array<string | undefined> }> {
    const procNet = (req.procNet ?? []).map(procNetPath);
    const sysctl = (req.sysctl ?? []).map(sysctlPath);
    const values = await this.#use(() => native().readFiles(this.#fd, [...procNet, ...sysctl]));
    const v = values.map((x) => (x === null ? undefined : x));
    return { procNet: v.slice(0, procNet.length), sysctl: v.slice(procNet.length).map((x) => x?.trim()) };
  }

  /** `/proc/sys/net/...` of this netns. */
  readonly sysctl = {
    get: async (key: string): Promise<string> => (await this.#readOne(sysctlPath(key))).trim(),
    set: (key: string, value: string | number): Promise<void> => {
      if (typeof value !== 'string' && typeof value !== 'number') throw new TypeError('sysctl value must be a string or number');
      return this.#use(() => native().sysctlSet(this.fd, sysctlPath(key), String(value)));
    },
  };

  // One file read inside the netns; a missing one is NetError ENOENT.
  async #readOne(path: string): Promise<string> {
    const [value] = await this.#use(() => native().readFiles(this.#fd, [path]));
    if (value === null || value === undefined) throw new NetError(`open ${path}: no such file in netns ${this.path}`, { errno: osc.errno.ENOENT, op: 'open' });
    return value;
  }

  #check(): void {
    if (this.#closed) throw new NetError(`netns ${this.path} is closed`, { errno: osc.errno.EBADF, op: 'netns' });
  }

  // Keeps the fd open while a native job may still read it.
  async #use<T>(fn: () => Promise<T>): Promise<T> {
    this.#check();
    this.#busy++;
    try {
      return await fn();
    } finally {
      if (--this.#busy === 0 && this.#closed) this.#release();
    }
  }

  #release(): void {
    if (this.#fd >= 0) {
      native().fdClose(this.#fd);
      this.#fd = -1;
    }
  }
}
