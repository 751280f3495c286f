// The raw binding's exact shape. Internal: nothing outside lib/ imports this,
// and the package never exports it. The public API (lib/net/*) validates and
// shapes arguments before anything reaches these functions.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NetError } from './net/errors.js';

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
  requestSync(msgs: Buffer, op: string, atomic?: boolean): Buffer | undefined;
  close(): void;
}

export interface NativeBinding {
  platformSupported: boolean;
  init(opts: { NetError: typeof NetError }): void;
  nsOpen(path: string): NativeNsId & { fd: number };
  nsStat(fd: number): NativeNsId;
  fdClose(fd: number): void;
  nsCreate(dir: string, name: string): Promise<void>;
  nsRemove(path: string): void;
  sysctlGet(nsFd: number, path: string): Promise<string>;
  sysctlSet(nsFd: number, path: string, value: string): Promise<void>;
  spawn(nsFd: number, argv: string[], env: string[], cwd: string | null, stdin: Buffer | null,
        timeoutMs: number): Promise<NativeSpawnResult>;
  nlOpen(protocol: number, nsFd: number): Promise<NativeNlSocket>;
  nlOpenSync(protocol: number, nsFd: number): NativeNlSocket;
  counters(): { jobsPending: number; children: number };
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

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
    throw new Error(
      `podwire: could not find its native addon. Looked in:\n${tried}\n` +
        'Build it with `npm run build:native` (needs python3, make and g++), or run `npm run bootstrap`.',
      { cause: err },
    );
  }
  return require(path) as NativeBinding;  // a real load failure (ABI, symbols) propagates as is
}

let binding: NativeBinding | undefined;

/** The native binding, loaded on first use. */
export function native(): NativeBinding {
  if (!binding) {
    const b = load();
    if (b.platformSupported) b.init({ NetError });
    binding = b;
  }
  if (!binding.platformSupported) {
    throw new NetError(`podwire needs Linux (this is ${process.platform})`, { errno: 38, op: 'load', code: 'ENOSYS' });
  }
  return binding;
}
