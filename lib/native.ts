// The raw binding's exact shape. Internal: nothing outside lib/ imports this,
// and the package never exports it. The public API (lib/net/*) validates and
// shapes arguments before anything reaches these functions.
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface NativeNsId {
  dev: number;
  ino: number;
}

export interface NativeSpawnResult {
  code: number | null;
  signal: number;
  timedOut: boolean;
  stdout: Buffer;
  stderr: Buffer;
}

/** A netlink socket bound to the netns it was created in. */
export interface NativeNlSocket {
  readonly fd: number;
  readonly pending: number;
  /** Sends one or more messages (sequence numbers are rewritten in place). */
  request(msgs: Buffer, op: string, atomic?: boolean): Promise<Buffer | undefined>;
  close(): void;
}

/** A non-blocking AF_UNIX socket (seqpacket or stream); see native/sock/unix_socket.h. */
export interface NativeUnixSocket {
  readonly fd: number;
  readonly closed: boolean;
  /** A pending connection, or null when none is queued. */
  accept(): NativeUnixSocket | null;
  /** Bytes sent, or -1 when the socket would block. Throws NetError (EPIPE, ...). */
  send(data: Uint8Array, fds?: number[]): number;
  /** One record (data of length 0 = EOF), or null when it would block. Truncation throws ERR_MSG_TRUNC / ERR_MSG_CTRUNC. */
  recv(maxBytes: number, maxFds: number): { data: Buffer; fds: number[] } | null;
  soError(): number;
  peerCredentials(): { pid: number; uid: number; gid: number };
  /** events: 1 readable, 2 writable, 0 stop; callback(errno, events) on the JS thread. */
  watch(events: number, callback?: (errno: number, events: number) => void): void;
  close(): void;
}

export interface NativeInetSpec {
  udp: boolean;
  address: string;
  port: number;
  mark?: number;
  reusePort: boolean;
  transparent: boolean;
  optional: boolean;
  backlog?: number;
  /** false: a plain socket (options set, not bound), for connect() or send(). Default true. */
  bind?: boolean;
}

/**
 * Conventions for every function below: a `nsFd` is dup'ed natively at call
 * time (the job keeps its own reference, so the caller may close its fd right
 * away); -1 means this process's netns; any other negative, closed or
 * non-netns fd rejects synchronously with NetError EBADF. Every string
 * (path, name, argv, env) containing a NUL byte throws TypeError. Timeouts in
 * ms must be integers in [0, 2^31-1] (RangeError).
 */
export interface NativeBinding {
  platformSupported: boolean;
  /** Gives the addon the error class it throws (lib/net/errors.ts NetError, handed over by lib/net/binding.ts). */
  init(opts: { NetError: new (message: string, opts: { errno: number; op: string; code: string }) => Error }): void;
  nsOpen(path: string): NativeNsId & { fd: number };
  nsStat(fd: number): NativeNsId;
  fdClose(fd: number): void;
  nsCreate(dir: string, name: string): Promise<void>;
  nsRemove(path: string): void;
  /** A new netns with no name; the fd is its only reference. */
  nsCreateAnonymous(): Promise<NativeNsId & { fd: number }>;
  sysctlSet(nsFd: number, path: string, value: string): Promise<void>;
  /** Reads several files inside the netns in one job; null for a missing file. */
  readFiles(nsFd: number, paths: string[]): Promise<Array<string | null>>;
  /**
   * The child leads its own process group; timeout and teardown kill the group. Resolves once the
   * child has exited and its already-written output is read, even if a grandchild still holds a pipe.
   */
  spawn(nsFd: number, argv: string[], env: string[], cwd: string | null, stdin: Buffer | null,
        timeoutMs: number): Promise<NativeSpawnResult>;
  /** Netlink sockets created inside the netns (-1: this one), in one job. */
  nlOpen(nsFd: number, protocols: number[]): Promise<NativeNlSocket[]>;
  /**
   * Job runner state: completions not yet delivered, live spawned children,
   * pooled workers, dedicated (spawn) threads running / queued / peak so far,
   * and the bound on dedicated threads.
   */
  counters(): {
    jobsPending: number; children: number; workers: number;
    dedicatedThreads: number; dedicatedQueued: number; dedicatedPeak: number; dedicatedMax: number;
  };
  /** A socket created inside the netns (-1: this one); the caller owns the fd. */
  unixListen(name: string, type: number, mode: number, backlog: number): NativeUnixSocket;
  unixConnect(name: string, type: number): { socket: NativeUnixSocket; inProgress: boolean };
  unixPair(type: number): [NativeUnixSocket, NativeUnixSocket];
  fdDup(fd: number): number;
  /** Opens inet sockets inside the netns (-1: this one) on a job thread; null for a skipped optional spec. */
  inetOpen(nsFd: number, specs: NativeInetSpec[]): Promise<Array<{ fd: number | null; transparent: boolean }>>;
  inetOriginalDst(fd: number): { family: 4 | 6; address: string; port: number; redirected: boolean };
  /**
   * One nfnetlink batch for the commands; msgCommand[i] = command index of message i (-1: begin/end).
   * ackEach false: only the last command asks for an ACK (nfnetlink replies in order); errors still name their message.
   * An invalid command throws TypeError with code 'NFT_ENCODE'.
   */
  nftEncode(commands: readonly object[], opts?: { ackEach?: boolean }): { batch: Buffer; msgCommand: Int32Array };
  /** nf_tables messages (a batch or dump replies) as objects; RangeError on broken framing. */
  nftDecode(messages: Buffer): object[];
  /** What verify compares of each nf_tables message, NUL-separated (lib/net/nft/records.ts parses it); RangeError on broken framing. */
  nftRecords(messages: Buffer): string;
  /** One NLM_F_DUMP request for NFT_MSG_GET* (table/set filter where it applies). */
  nftDumpRequest(msg: number, family: number, table?: string, set?: string): Buffer;
  /** glibc's malloc_trim(0): free pages of every arena back to the kernel; true when any were. false elsewhere. */
  heapTrim(): boolean;
  /** glibc's mallinfo2 totals (bytes); null without it. */
  heapStats(): NativeHeapStats | null;
}

export interface NativeHeapStats {
  arenaBytes: number;
  mmappedBytes: number;
  inUseBytes: number;
  freeBytes: number;
  releasableBytes: number;
}

// The package root: the nearest directory above this module whose
// package.json is podwire's (lib/ under vitest, dist/ or dist-bench/lib/ compiled).
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'podwire') return dir;
    const up = dirname(dir);
    if (up === dir) return join(dirname(fileURLToPath(import.meta.url)), '..');
    dir = up;
  }
}

const root = packageRoot();

function load(): NativeBinding {
  const require = createRequire(import.meta.url);
  const nodeGypBuild = require('node-gyp-build') as { resolve(dir: string): string };
  let path: string;
  try {
    path = nodeGypBuild.resolve(root);  // throws only when no build matches
  } catch (err) {
    // node-gyp-build looks in build/Release, build/Debug and prebuilds/<platform>-<arch>.
    const tried = ['build/Release', 'build/Debug', `prebuilds/${process.platform}-${process.arch}`]
      .map((d) => join(root, d))
      .map((p) => `  ${p}${existsSync(p) ? ' (no matching .node file)' : ' (missing)'}`)
      .join('\n');
    // A git checkout builds with its own scripts; an installed package has neither them nor a
    // build/ (its install script compiles only when no prebuild loads) and is rebuilt through npm.
    const checkout = existsSync(join(root, 'scripts/bootstrap.sh'));
    const fix = checkout
      ? 'Build it with `npm run build:native` (needs python3, make and g++), or run `npm run bootstrap`.'
      : `This package has no prebuild for ${process.platform}-${process.arch} here; build it from source with ` +
        '`npm rebuild podwire --foreground-scripts` (needs python3, make, a C++20 compiler and the Node headers).';
    throw new Error(`podwire: could not find its native addon. Looked in:\n${tried}\n${fix}`, { cause: err });
  }
  return require(path) as NativeBinding;  // a real load failure (ABI, symbols) propagates as is
}

let binding: NativeBinding | undefined;

/**
 * The addon as loaded, once (not initialised: lib/net/binding.ts `native()` hands it the error
 * class and is what callers use). This module imports nothing of lib/: it is the bottom layer.
 */
export function loadBinding(): NativeBinding {
  binding ??= load();
  return binding;
}
