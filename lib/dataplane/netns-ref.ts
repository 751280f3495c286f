// A ref-counted netns handle: the pod cache holds one reference for as long
// as the pod is enrolled (the same fd is re-sent to every new ztunnel), and
// in-flight work takes its own; the fd is closed exactly once, when the last
// reference is released. Its netlink sockets live only while someone works on
// it: a release that leaves other holders and no operation running lets them
// go, so an enrolled pod keeps its netns fd alone between operations, and a
// proof's sockets serve the work that takes the handle next.
import { statSync } from 'node:fs';
import { Netns } from '../net/netns/netns.js';

export class NetnsRef {
  private refs = 1;

  constructor(readonly ns: Netns) {}

  /** Opens `path` with one reference held by the caller. */
  static open(path: string): NetnsRef {
    return new NetnsRef(Netns.open(path));
  }

  get ino(): number {
    return this.ns.id.ino;
  }

  /** Same namespace (device and inode) as another handle. */
  sameNetns(other: NetnsRef): boolean {
    return this.ns.equals(other.ns);
  }

  /** Whether the nsfs file at `path` is this namespace (device and inode); false when it cannot be read. */
  isAt(path: string): boolean {
    try {
      const st = statSync(path);
      return st.ino === this.ns.id.ino && st.dev === this.ns.id.dev;
    } catch {
      return false;
    }
  }

  get released(): boolean {
    return this.refs === 0;
  }

  /** Takes another reference; fails if the handle was already released. */
  acquire(): this {
    if (this.refs === 0) throw new Error('NetnsRef.acquire after the last release');
    this.refs++;
    return this;
  }

  /**
   * Drops one reference; the last one closes the fd. One that leaves other
   * holders, with no operation running (`use`), closes the netlink sockets.
   */
  release(): void {
    if (this.refs === 0) return;
    if (--this.refs === 0) this.ns.close();
    else if (this.users === 0) this.ns.closeNetlink();
  }

  /**
   * Runs fn with a reference held, so a concurrent removal cannot close the fd
   * under it; the last concurrent user's release lets the sockets go.
   */
  async use<T>(fn: (ns: Netns) => Promise<T>): Promise<T> {
    this.acquire();
    this.users++;
    try {
      return await fn(this.ns);
    } finally {
      this.users--;
      this.release();
    }
  }

  private users = 0;
}
