// A small file whose content may be replaced while we run: a projected
// ServiceAccount token (the kubelet rotates it, by an atomic symlink swap) or
// a CA bundle. client-node's FileAuth re-reads a token only every 60 s, so a
// request right after a rotation can carry a stale token; here every read
// stats the file (cheap next to an HTTPS request) and re-reads it when its
// identity changed: inode, size, mtime or ctime (nanoseconds, so two writes
// within one millisecond still differ).
import { readFile, stat } from 'node:fs/promises';
import { KubeConfigError } from './errors.js';

export class WatchedFile {
  private key = '';
  private content: Buffer | undefined;
  /** How many times the content was (re)read; tests and metrics look at it. */
  reads = 0;

  constructor(readonly path: string, private readonly what: string) {}

  /** The current content, re-read if the file changed since the last call. */
  async read(): Promise<Buffer> {
    let key: string;
    try {
      const s = await stat(this.path, { bigint: true });
      key = `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
    } catch (err) {
      throw new KubeConfigError('KUBE_CONFIG_UNREADABLE', `${this.what} ${this.path}: ${(err as Error).message}`, this.path, undefined, { cause: err });
    }
    if (key !== this.key || this.content === undefined) {
      try {
        this.content = await readFile(this.path);
      } catch (err) {
        throw new KubeConfigError('KUBE_CONFIG_UNREADABLE', `${this.what} ${this.path}: ${(err as Error).message}`, this.path, undefined, { cause: err });
      }
      this.key = key;
      this.reads++;
    }
    return this.content;
  }

  /** The content as a trimmed string (token files often end in a newline). */
  async text(): Promise<string> {
    return (await this.read()).toString('utf8').trim();
  }
}
