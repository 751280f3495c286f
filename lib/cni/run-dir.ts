// The CNI run dir (CNI_AGENT_RUN_DIR: the plugin sockets, the DEL queue, the decision file, the
// plugin kubeconfig) made root's alone before the agent creates anything in it. The chart's
// hostPath `DirectoryOrCreate` leaves it 0755, and the shim makes it 0750; everything that uses
// it runs as root (the agent, podwire-cni and Istio's plugin exec'd by the runtime, the installer
// in the agent's process), so 0700 takes nothing away from them. ztunnel has its own dir.
import { closeSync, constants, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync, type Stats } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { DEL_QUEUE_DIR } from './constants.js';

export type RunDirErrorCode =
  /** The path is a symbolic link (only its last component is checked: /var/run → /run is fine). */
  | 'ERR_RUN_DIR_SYMLINK'
  /** The path exists and is not a directory. */
  | 'ERR_RUN_DIR_NOT_DIR'
  /** The directory belongs to another user than root or the agent. */
  | 'ERR_RUN_DIR_OWNER'
  /** A top-level or sticky (/tmp-like) directory: shared with others, not for a chmod 0700. */
  | 'ERR_RUN_DIR_SHARED'
  /** Not absolute, or it could not be created, opened or changed. */
  | 'ERR_RUN_DIR_IO';

export class RunDirError extends Error {
  constructor(readonly code: RunDirErrorCode, readonly path: string, message: string, opts?: { cause?: unknown }) {
    super(`${path}: ${message}`, opts);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'RunDirError', enumerable: false });
  }
}

export interface RunDirReport {
  created: boolean;
  /** The run dir's permission bits before (after creation, when created). */
  modeBefore: number;
  /** What was changed, for an info line each. */
  changes: string[];
  /** What was found wrong and left alone (the DEL-queue drain refuses such a queue), for a warn line each. */
  warnings: string[];
}

const errno = (err: unknown) => (err as NodeJS.ErrnoException)?.code;
const ours = (st: Stats) => st.uid === 0 || st.uid === (process.geteuid?.() ?? 0);
const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, '0');
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * Creates `path` (0700) when missing, refuses a link, a non-directory, another owner or a
 * shared directory (RunDirError), and sets it and its `cni-del-queue/` to 0700. Both are changed through a
 * descriptor opened without following links, so a path swapped meanwhile is not chmodded.
 */
export function prepareRunDir(path: string): RunDirReport {
  if (!isAbsolute(path)) throw new RunDirError('ERR_RUN_DIR_IO', path, 'not an absolute path');
  // A misconfigured CNI_AGENT_RUN_DIR=/run must not make the host's /run root-only.
  if (resolve(path).split('/').filter(Boolean).length < 2) throw new RunDirError('ERR_RUN_DIR_SHARED', path, 'a top-level directory cannot be the CNI run dir');
  const report: RunDirReport = { created: false, modeBefore: 0, changes: [], warnings: [] };
  try {
    lstatSync(path);
  } catch (err) {
    if (errno(err) !== 'ENOENT') throw new RunDirError('ERR_RUN_DIR_IO', path, `cannot stat: ${(err as Error).message}`, { cause: err });
    try {
      // Missing parents too (their mode is the umask's: they are the host's /var/run and the like).
      mkdirSync(path, { recursive: true, mode: 0o700 });
      report.created = true;
    } catch (e) {
      if (errno(e) !== 'EEXIST') throw new RunDirError('ERR_RUN_DIR_IO', path, `cannot create: ${(e as Error).message}`, { cause: e });
    }
  }
  let fd: number;
  try {
    fd = openSync(path, DIR_FLAGS);
  } catch (err) {
    const code = errno(err);
    if (code === 'ELOOP') throw new RunDirError('ERR_RUN_DIR_SYMLINK', path, 'is a symbolic link', { cause: err });
    if (code === 'ENOTDIR') throw new RunDirError(isLink(path) ? 'ERR_RUN_DIR_SYMLINK' : 'ERR_RUN_DIR_NOT_DIR', path, 'is not a directory', { cause: err });
    throw new RunDirError('ERR_RUN_DIR_IO', path, `cannot open: ${(err as Error).message}`, { cause: err });
  }
  try {
    const st = fstatSync(fd);
    if (!ours(st)) throw new RunDirError('ERR_RUN_DIR_OWNER', path, `owned by uid ${st.uid}, not root`);
    if (st.mode & 0o1000) throw new RunDirError('ERR_RUN_DIR_SHARED', path, 'is a sticky (shared, /tmp-like) directory');
    report.modeBefore = st.mode & 0o7777;
    tighten(fd, st, path, report);
    tightenQueue(fd, join(path, DEL_QUEUE_DIR), report);
  } finally {
    closeSync(fd);
  }
  return report;
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

function tighten(fd: number, st: Stats, path: string, report: RunDirReport): void {
  if ((st.mode & 0o7777) === 0o700) return;
  try {
    fchmodSync(fd, 0o700);
  } catch (err) {
    throw new RunDirError('ERR_RUN_DIR_IO', path, `cannot chmod 0700: ${(err as Error).message}`, { cause: err });
  }
  report.changes.push(`${path}: mode ${octal(st.mode)} → 0700`);
}

// The queue dir as reached through the run dir's descriptor (Node has no openat).
function tightenQueue(runFd: number, shown: string, report: RunDirReport): void {
  let fd: number;
  try {
    fd = openSync(`/proc/self/fd/${runFd}/${DEL_QUEUE_DIR}`, DIR_FLAGS);
  } catch (err) {
    const code = errno(err);
    if (code === 'ENOENT') return;
    report.warnings.push(code === 'ELOOP' || code === 'ENOTDIR'
      ? `${shown} is not a directory (or is a symbolic link): left alone, queued DELs will not be drained`
      : `${shown}: cannot open: ${(err as Error).message}`);
    return;
  }
  try {
    const st = fstatSync(fd);
    if (!ours(st)) {
      report.warnings.push(`${shown} is owned by uid ${st.uid}, not root: left alone, queued DELs will not be drained`);
      return;
    }
    tighten(fd, st, shown, report);
  } finally {
    closeSync(fd);
  }
}
