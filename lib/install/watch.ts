// File watches for the installer (spec §3.3 waits, §3.5 loop), on Node's fs.watch (inotify).
// A watcher is used for one round and closed: an atomic rename replaces the inode a watch is
// on, so a watch kept across rounds would silently watch nothing (upstream makes a fresh
// fsnotify watcher per round for the same reason).
//
// Events: upstream counts fsnotify Create, Write and Remove and ignores Rename and Chmod.
// fs.watch reports `rename` (IN_CREATE, IN_DELETE, IN_MOVED_FROM/TO, IN_DELETE_SELF) and
// `change` (IN_MODIFY, IN_ATTRIB) without saying which, so every event counts here: a file
// renamed out of the directory counts like a removal (for the runtime it is one), and a chmod
// like a write — each costs one idempotent validity round, never a rewrite of a valid config.
import { watch, type FSWatcher } from 'node:fs';
import { InstallError } from './errors.js';

export interface WatchEvent {
  /** The watched path the event is about (a directory, or a watched file). */
  path: string;
  type: 'rename' | 'change';
  /** The entry of a watched directory that changed, when the kernel says. */
  filename?: string;
}

export class ChangeWatcher {
  readonly #watchers: FSWatcher[] = [];
  #event: WatchEvent | undefined;
  #error: InstallError | undefined;
  #wake: (() => void) | undefined;
  #closed = false;
  /** The paths watched (those that existed when the watcher was made). */
  readonly watching: string[] = [];

  /**
   * Watches `paths`; paths that do not exist are skipped (upstream's behaviour). Any other
   * failure (ENOSPC: inotify watch limit, EACCES, ...) throws InstallError ERR_WATCH of `stage`.
   */
  constructor(paths: readonly string[], readonly stage: 'watch' | 'cni-config' = 'watch') {
    for (const path of new Set(paths)) {
      let w: FSWatcher;
      try {
        w = watch(path, { persistent: true }, (type, filename) => this.#record({ path, type: type === 'change' ? 'change' : 'rename', ...(filename ? { filename: String(filename) } : {}) }));
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') continue;
        this.close();
        throw new InstallError('ERR_WATCH', stage, `cannot watch ${path}: ${(err as Error).message}`, { path, cause: err });
      }
      w.on('error', (err) => {
        this.#error ??= new InstallError('ERR_WATCH', stage, `watching ${path} failed: ${err.message}`, { path, cause: err });
        this.#wake?.();
      });
      this.#watchers.push(w);
      this.watching.push(path);
    }
  }

  /** The first event since the watcher was made, if one came. */
  get pending(): WatchEvent | undefined {
    return this.#event;
  }

  /**
   * Resolves with the first event (at once if one already came); rejects with ERR_WATCH when
   * a watch failed, or ERR_STOPPED when `signal` aborts. One call per round: the event stays.
   */
  async next(signal?: AbortSignal): Promise<WatchEvent> {
    for (;;) {
      if (this.#error) throw this.#error;
      if (this.#event) return this.#event;
      if (signal?.aborted) throw stopped(this.stage);
      if (this.#closed) throw new InstallError('ERR_WATCH', this.stage, 'the watcher was closed');
      await new Promise<void>((resolve) => {
        const done = () => {
          signal?.removeEventListener('abort', done);
          this.#wake = undefined;
          resolve();
        };
        this.#wake = done;
        signal?.addEventListener('abort', done, { once: true });
      });
    }
  }

  /** Lets the next event through again (for a wait that re-checks after each event). */
  reset(): void {
    this.#event = undefined;
  }

  close(): void {
    this.#closed = true;
    for (const w of this.#watchers.splice(0)) w.close();
    this.#wake?.();
  }

  #record(e: WatchEvent): void {
    if (this.#closed) return;
    this.#event ??= e;
    this.#wake?.();
  }
}

export function stopped(stage: 'watch' | 'cni-config'): InstallError {
  return new InstallError('ERR_STOPPED', stage, 'the installer was stopped');
}
