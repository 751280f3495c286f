// DELs the shim could not hand to the agent (it was down): the shim left one
// record per DEL in `<run dir>/cni-del-queue/` (docs/cni-protocol.md). The
// agent drains them once at start, after its snapshot, so a sandbox torn
// down while it was away releases its netns handle and probe entries.
//
// The drain removes files as root, so it acts only on what it has checked: the queue dir is opened
// without following a link and must be a directory owned by root (or us) that nobody else can
// write; every entry is then reached through that open directory (/proc/self/fd/<fd>/<name>: the
// same directory even if the path is swapped meanwhile, Node has no openat), and only a regular
// file is read (O_NOFOLLOW|O_NONBLOCK: a FIFO cannot block) or removed. Anything else is left
// where it is and reported.
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readSync, statSync, unlinkSync, type Stats } from 'node:fs';
import { join } from 'node:path';

export { DEL_QUEUE_DIR, DEL_QUEUE_MAX } from './constants.js';
import { DEL_QUEUE_DIR, DEL_QUEUE_MAX } from './constants.js';
const MAX_RECORD_BYTES = 64 * 1024;

export interface DelRecord {
  containerId: string;
  netns: string;
  ifname: string;
  podNamespace: string;
  podName: string;
  podUid: string;
  time: string;
}

export interface DrainReport {
  records: number;
  handled: number;
  /** Regular files that were not a record (removed, reported). */
  malformed: string[];
  /** Entries that are not a regular file of ours (directory, symlink, FIFO, another owner): left in place. */
  skipped: string[];
  failed: Array<{ file: string; error: string }>;
}

export type DelQueueErrorCode =
  /** The queue path is a symbolic link: its target is not read, nothing is removed. */
  | 'ERR_DEL_QUEUE_SYMLINK'
  /** The queue path is not a directory. */
  | 'ERR_DEL_QUEUE_NOT_DIR'
  /** Owned by another user than root or the agent, or writable by group or others. */
  | 'ERR_DEL_QUEUE_UNSAFE'
  /** The directory could not be opened or listed safely (I/O error, no /proc). */
  | 'ERR_DEL_QUEUE_IO';

/** The queue was not drained (nothing read, nothing removed); `path` is the queue dir. */
export class DelQueueError extends Error {
  constructor(readonly code: DelQueueErrorCode, readonly path: string, message: string, opts?: { cause?: unknown }) {
    super(`${path}: ${message}`, opts);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'DelQueueError', enumerable: false });
  }
}

/** The shim's record names (IsDelRecordName): `<unix ms>-<container id>.json`, never a hidden temp file. */
export function isDelRecordName(name: string): boolean {
  return name.length > 5 && !name.startsWith('.') && name.endsWith('.json');
}

function parseRecord(text: string): DelRecord | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof doc !== 'object' || doc === null) return undefined;
  const d = doc as Record<string, unknown>;
  const keys = ['containerId', 'netns', 'ifname', 'podNamespace', 'podName', 'podUid', 'time'] as const;
  for (const k of keys) if (d[k] !== undefined && typeof d[k] !== 'string') return undefined;
  if (typeof d.containerId !== 'string' || d.containerId === '') return undefined;
  return Object.fromEntries(keys.map((k) => [k, (d[k] as string | undefined) ?? ''])) as unknown as DelRecord;
}

const errno = (err: unknown) => (err as NodeJS.ErrnoException)?.code;
const euid = () => process.geteuid?.() ?? 0;
const ours = (st: Stats) => st.uid === 0 || st.uid === euid();
const sameFile = (a: Stats, b: Stats) => a.dev === b.dev && a.ino === b.ino;

/** Opens the queue dir as O_DIRECTORY|O_NOFOLLOW and checks it; undefined when it does not exist. */
function openQueueDir(dir: string): number | undefined {
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = errno(err);
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw new DelQueueError('ERR_DEL_QUEUE_SYMLINK', dir, 'is a symbolic link: not drained', { cause: err });
    if (code === 'ENOTDIR') {
      // ENOTDIR is also "a parent is not a directory"; tell a link at the path itself apart.
      const link = (() => { try { return lstatSync(dir).isSymbolicLink(); } catch { return false; } })();
      throw new DelQueueError(link ? 'ERR_DEL_QUEUE_SYMLINK' : 'ERR_DEL_QUEUE_NOT_DIR', dir, link ? 'is a symbolic link: not drained' : 'is not a directory', { cause: err });
    }
    throw new DelQueueError('ERR_DEL_QUEUE_IO', dir, `cannot open: ${(err as Error).message}`, { cause: err });
  }
  try {
    const st = fstatSync(fd);
    if (!ours(st)) throw new DelQueueError('ERR_DEL_QUEUE_UNSAFE', dir, `owned by uid ${st.uid}, not root: not drained`);
    if (st.mode & 0o022) throw new DelQueueError('ERR_DEL_QUEUE_UNSAFE', dir, `mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')} lets others write: not drained`);
    // Entries are reached through the fd; make sure /proc resolves it to this very directory.
    let via: Stats;
    try {
      via = statSync(fdPath(fd));
    } catch (err) {
      throw new DelQueueError('ERR_DEL_QUEUE_IO', dir, `cannot reach the open directory through /proc/self/fd: ${(err as Error).message}`, { cause: err });
    }
    if (!sameFile(via, st)) throw new DelQueueError('ERR_DEL_QUEUE_IO', dir, '/proc/self/fd does not resolve to the open directory');
    return fd;
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

const fdPath = (fd: number) => `/proc/self/fd/${fd}`;

type Entry =
  | { kind: 'gone' }
  | { kind: 'skip' }
  | { kind: 'file'; text: string | undefined };

/** Reads one entry if it is a regular file of ours (text undefined: over the size cap). */
function readEntry(path: string): Entry {
  let st: Stats;
  try {
    st = lstatSync(path);
  } catch (err) {
    if (errno(err) === 'ENOENT') return { kind: 'gone' };
    throw err;
  }
  if (!st.isFile() || !ours(st)) return { kind: 'skip' };
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = errno(err);
    if (code === 'ENOENT') return { kind: 'gone' };
    if (code === 'ELOOP') return { kind: 'skip' };  // replaced by a link since the lstat
    throw err;
  }
  try {
    const fst = fstatSync(fd);
    if (!fst.isFile() || !sameFile(fst, st) || !ours(fst)) return { kind: 'skip' };
    if (fst.size > MAX_RECORD_BYTES) return { kind: 'file', text: undefined };
    const buf = Buffer.alloc(MAX_RECORD_BYTES + 1);
    let n = 0;
    for (;;) {
      const r = readSync(fd, buf, n, buf.length - n, null);
      if (r === 0) break;
      n += r;
      if (n > MAX_RECORD_BYTES) return { kind: 'file', text: undefined };
    }
    return { kind: 'file', text: buf.subarray(0, n).toString('utf8') };
  } finally {
    closeSync(fd);
  }
}

/**
 * Hands every queued record to `handle` (oldest first: names start with the
 * time) and removes it once handled; a record whose handler fails stays for
 * the next start. Missing dir = nothing queued. Throws DelQueueError (and
 * touches nothing) when the queue dir is a link, not a directory, or not
 * root's alone.
 */
export async function drainDelQueue(runDir: string, handle: (r: DelRecord) => Promise<void>): Promise<DrainReport> {
  const dir = join(runDir, DEL_QUEUE_DIR);
  const report: DrainReport = { records: 0, handled: 0, malformed: [], skipped: [], failed: [] };
  const fd = openQueueDir(dir);
  if (fd === undefined) return report;
  try {
    const base = fdPath(fd);
    let names: string[];
    try {
      names = readdirSync(base).filter(isDelRecordName).sort().slice(0, DEL_QUEUE_MAX);
    } catch (err) {
      throw new DelQueueError('ERR_DEL_QUEUE_IO', dir, `cannot list: ${(err as Error).message}`, { cause: err });
    }
    // Removes an entry checked as a regular file; one that changed kind since is left and reported.
    const remove = (name: string): boolean => {
      try {
        unlinkSync(join(base, name));
        return true;
      } catch (err) {
        if (errno(err) === 'ENOENT') return true;
        report.skipped.push(name);
        return false;
      }
    };
    for (const name of names) {
      let entry: Entry;
      try {
        entry = readEntry(join(base, name));
      } catch (err) {
        report.failed.push({ file: name, error: (err as Error)?.message ?? String(err) });
        continue;
      }
      if (entry.kind === 'gone') continue;
      if (entry.kind === 'skip') {
        report.skipped.push(name);
        continue;
      }
      const rec = entry.text === undefined ? undefined : parseRecord(entry.text);
      if (!rec) {
        if (remove(name)) report.malformed.push(name);
        continue;
      }
      report.records++;
      try {
        await handle(rec);
      } catch (err) {
        report.failed.push({ file: name, error: (err as Error)?.message ?? String(err) });
        continue;
      }
      remove(name);
      report.handled++;
    }
  } finally {
    closeSync(fd);
  }
  return report;
}
