// The agent's unix sockets in the run dir (pluginevent.sock, log.sock) are
// created one way: never with a moment where the path is wider than 0600,
// never missing while a stale socket of an earlier run is replaced, and on
// close removed only if the path is still this listener's (a newer agent may
// have taken it over). Bind inside a fresh private dir (mkdtemp: 0700),
// chmod 0600, then rename() over the final path.
import { chmod, lstat, mkdir, mkdtemp, rename, rm, unlink } from 'node:fs/promises';
import type { Server } from 'node:net';
import { join } from 'node:path';

export type UnixListenerStage =
  /** Creating the run dir. */
  | 'run-dir'
  /** Creating the private dir inside it. */
  | 'private-dir'
  /** listen, chmod or rename. */
  | 'listen';

export class UnixListenerError extends Error {
  readonly code = 'ERR_UNIX_LISTEN';
  constructor(readonly stage: UnixListenerStage, readonly errno: string, message: string, opts: { cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'UnixListenerError', enumerable: false });
  }
}

export interface UnixListener {
  /** `<dir>/<name>`. */
  readonly path: string;
  /** Unlinks the path if it is still the socket this listener created (device and inode); never throws. */
  unlinkIfOurs(): Promise<void>;
}

export interface ListenUnixOptions {
  /** Mode of the run dir when it has to be created (default 0750). */
  dirMode?: number;
}

function fail(stage: UnixListenerStage, what: string, err: unknown): UnixListenerError {
  const e = err as NodeJS.ErrnoException;
  return new UnixListenerError(stage, e?.code ?? '', `${what}: ${e?.message ?? String(err)}`, { cause: err });
}

/** Makes `server` listen on `<dir>/<name>` (mode 0600), replacing whatever is at that path. */
export async function listenUnix(server: Server, dir: string, name: string, opts: ListenUnixOptions = {}): Promise<UnixListener> {
  const path = join(dir, name);
  try {
    await mkdir(dir, { recursive: true, mode: opts.dirMode ?? 0o750 });
  } catch (e) {
    throw fail('run-dir', `cannot create run dir ${dir}`, e);
  }
  let priv: string;
  try {
    priv = await mkdtemp(join(dir, `.${name}-`));
  } catch (e) {
    throw fail('private-dir', `cannot create a private dir in ${dir}`, e);
  }
  const tmp = join(priv, 's');
  let ident: { dev: number; ino: number };
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ path: tmp, exclusive: true }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    await chmod(tmp, 0o600);
    const st = await lstat(tmp);  // rename keeps the inode: this is the identity at the final path
    ident = { dev: st.dev, ino: st.ino };
    await rename(tmp, path);
  } catch (e) {
    await new Promise<void>((r) => { if (server.listening) server.close(() => r()); else r(); });
    throw fail('listen', `cannot listen on ${path}`, e);
  } finally {
    await rm(priv, { recursive: true, force: true }).catch(() => undefined);
  }
  return {
    path,
    async unlinkIfOurs() {
      try {
        const st = await lstat(path);
        if (st.dev === ident.dev && st.ino === ident.ino) await unlink(path);
      } catch {
        // already gone
      }
    },
  };
}
