// Replacing a file so a reader sees the old content or the new, never a part: a temporary
// `<name>.tmp.<random>` in the same directory (same file system, so rename is atomic), given
// its final mode before any byte is written, written, fsynced, then renamed over the target;
// the directory is fsynced so the rename survives a crash. On failure the temporary is removed.
import { randomBytes } from 'node:crypto';
import { open, readdir, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** The prefix of `name`'s temporaries: `<name>.tmp.` (spec §3.1.1; also pkg/file AtomicWrite's). */
export const tmpPrefix = (name: string) => `${name}.tmp.`;

/** Writes `data` to `path` atomically with permission bits `mode` (umask does not apply). */
export async function atomicWrite(path: string, data: string | Uint8Array, mode: number): Promise<void> {
  const tmp = join(dirname(path), `${tmpPrefix(basename(path))}${randomBytes(6).toString('hex')}`);
  const fh = await open(tmp, 'wx', 0o600);
  try {
    try {
      await fh.chmod(mode & 0o7777);
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await syncDir(dirname(path));
}

/** fsync of a directory (its entries); best effort: some file systems refuse it. */
export async function syncDir(dir: string): Promise<void> {
  try {
    const d = await open(dir, 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  } catch {
    // EINVAL/EISDIR on file systems without directory fsync: the rename still happened.
  }
}

/** Removes `<dir>/<name>.tmp.*` (what an interrupted atomicWrite left); returns the names removed. */
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
