// Writing a state file so that a reader sees the old or the new content,
// never half of it, and so that nothing planted in the directory can redirect
// the write: the temporary file gets a random name and is created with
// O_CREAT|O_EXCL|O_NOFOLLOW (a symlink or any other file already at that path
// fails the open instead of being followed or truncated), written, fsync'ed
// and renamed over the target (rename replaces a symlink at the target
// itself, never the file it points to), then the directory is fsync'ed so
// the rename survives a crash.
import { randomBytes } from 'node:crypto';
import { closeSync, constants as fsc, fchmodSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

export interface AtomicWriteOptions {
  /** Permission bits of the new file (not subject to the umask). Default 0o600. */
  mode?: number;
  /** Create the directory (and parents, mode 0o755) when missing. Default true. */
  mkdir?: boolean;
}

const ATTEMPTS = 16;

/** Replaces `file` with `data` atomically (see above). Errors are Node's fs errors (`code`). */
export function writeFileAtomicSync(file: string, data: string | Buffer, opts: AtomicWriteOptions = {}): void {
  const mode = opts.mode ?? 0o600;
  const dir = dirname(file);
  if (opts.mkdir !== false) mkdirSync(dir, { recursive: true, mode: 0o755 });
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  const flags = fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW;
  let tmp = '';
  let fd = -1;
  for (let attempt = 0; fd < 0; attempt++) {
    tmp = join(dir, `.${basename(file)}.${randomBytes(8).toString('hex')}.tmp`);
    try {
      fd = openSync(tmp, flags, mode);
    } catch (err) {
      // Someone holds that name (a planted file or link): pick another, never reuse it.
      if ((err as { code?: string }).code === 'EEXIST' && attempt + 1 < ATTEMPTS) continue;
      throw err;
    }
  }
  try {
    try {
      fchmodSync(fd, mode);  // the umask applied at open
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
  const dfd = openSync(dir, fsc.O_RDONLY | fsc.O_DIRECTORY);
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
}
