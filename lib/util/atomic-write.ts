// Replacing a file so that a reader sees the old or the new content, never half of it, and so
// that nothing planted in the directory can redirect the write (one module for every writer:
// the installer's CNI files, the decision file, state files). The temporary file gets a random
// name and is created with O_CREAT|O_EXCL|O_NOFOLLOW (a symlink or any other file already at that
// path fails the open instead of being followed or truncated; another name is tried), given its
// final mode before any byte is written (the umask does not apply), written, fsync'ed and
// renamed over the target (rename replaces a symlink at the target itself, never the file it
// points to); then the directory is fsync'ed so the rename survives a crash. On failure the
// temporary is removed.
import { randomBytes } from 'node:crypto';
import { closeSync, constants as fsc, fchmodSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { mkdir, open, readdir, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export interface AtomicWriteOptions {
  /** Permission bits of the new file (not subject to the umask). Default 0o600. */
  mode?: number;
  /** Create the directory (and parents, mode 0o755) when missing. Default true. */
  mkdir?: boolean;
  /**
   * How temporaries are named: 'hidden' (default) `.<name>.<16 hex>.tmp`; 'suffix'
   * `<name>.tmp.<12 hex>`, the naming of upstream's pkg/file AtomicWrite, whose leftovers the
   * installer removes in the CNI dirs (removeTmpLeftovers).
   */
  tmp?: 'hidden' | 'suffix';
}

const ATTEMPTS = 16;
const FLAGS = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW;

/** The prefix of `name`'s 'suffix' temporaries: `<name>.tmp.`. */
export const tmpPrefix = (name: string): string => `${name}.tmp.`;

function tmpPath(file: string, scheme: AtomicWriteOptions['tmp']): string {
  const name = basename(file);
  const leaf = scheme === 'suffix' ? `${tmpPrefix(name)}${randomBytes(6).toString('hex')}` : `.${name}.${randomBytes(8).toString('hex')}.tmp`;
  return join(dirname(file), leaf);
}

// A directory fsync that the file system does not support (EINVAL, ENOTSUP) is not an error:
// the rename has happened; everything else is.
function dirSyncUnsupported(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return code === 'EINVAL' || code === 'ENOTSUP' || code === 'EISDIR';
}

/** Replaces `file` with `data` atomically (see above). Errors are Node's fs errors (`code`). */
export function writeFileAtomicSync(file: string, data: string | Uint8Array, opts: AtomicWriteOptions = {}): void {
  const mode = opts.mode ?? 0o600;
  const dir = dirname(file);
  if (opts.mkdir !== false) mkdirSync(dir, { recursive: true, mode: 0o755 });
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  let tmp = '';
  let fd = -1;
  for (let attempt = 0; fd < 0; attempt++) {
    tmp = tmpPath(file, opts.tmp);
    try {
      fd = openSync(tmp, FLAGS, mode);
    } catch (err) {
      // Someone holds that name (a planted file or link): pick another, never reuse it.
      if ((err as { code?: string }).code === 'EEXIST' && attempt + 1 < ATTEMPTS) continue;
      throw err;
    }
  }
  try {
    try {
      fchmodSync(fd, mode & 0o7777);  // the umask applied at open
      for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off, bytes.length - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (err) {
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
    throw err;
  }
  let dfd = -1;
  try {
    dfd = openSync(dir, fsc.O_RDONLY | fsc.O_DIRECTORY);
    fsyncSync(dfd);
  } catch (err) {
    if (!dirSyncUnsupported(err)) throw err;
  } finally {
    if (dfd >= 0) closeSync(dfd);
  }
}

/** writeFileAtomicSync without blocking the event loop (the installer's writes). */
export async function writeFileAtomic(file: string, data: string | Uint8Array, opts: AtomicWriteOptions = {}): Promise<void> {
  const mode = opts.mode ?? 0o600;
  const dir = dirname(file);
  if (opts.mkdir !== false) await mkdir(dir, { recursive: true, mode: 0o755 });
  let tmp = '';
  let fh: Awaited<ReturnType<typeof open>> | undefined;
  for (let attempt = 0; !fh; attempt++) {
    tmp = tmpPath(file, opts.tmp);
    try {
      fh = await open(tmp, FLAGS, mode);
    } catch (err) {
      if ((err as { code?: string }).code === 'EEXIST' && attempt + 1 < ATTEMPTS) continue;
      throw err;
    }
  }
  try {
    try {
      await fh.chmod(mode & 0o7777);
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await syncDir(dir);
}

/** fsync of a directory (its entries); a file system without directory fsync is tolerated. */
export async function syncDir(dir: string): Promise<void> {
  let d: Awaited<ReturnType<typeof open>> | undefined;
  try {
    d = await open(dir, fsc.O_RDONLY | fsc.O_DIRECTORY);
    await d.sync();
  } catch (err) {
    if (!dirSyncUnsupported(err)) throw err;
  } finally {
    await d?.close();
  }
}

/** Removes `<dir>/<name>.tmp.*` ('suffix' temporaries an interrupted write left); returns the names removed. */
export async function removeTmpLeftovers(dir: string, name: string): Promise<string[]> {
  const prefix = tmpPrefix(name);
  const removed: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (!entry.name.startsWith(prefix) || entry.isDirectory()) continue;
    try {
      await unlink(join(dir, entry.name));
      removed.push(entry.name);
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err;
    }
  }
  return removed;
}
