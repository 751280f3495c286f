// NetHandle: the netlink side of one netns. Its sockets are created inside
// that netns once (on a native job thread) and then used from the JS thread
// with no namespace switching. One handle per netns identity, shared by
// every Netns object that refers to it and closed when the last one closes.
import { native } from '../native.js';
import { Addrs } from './addrs.js';
import { Links } from './links.js';
import { NETLINK_ROUTE } from './nl/rtnl.js';
import { SocketTransport, type NlTransport } from './nl/transport.js';
import { Routes } from './routes.js';
import { Rules } from './rules.js';

export class NetHandle {
  readonly links: Links;
  readonly addrs: Addrs;
  readonly routes: Routes;
  readonly rules: Rules;
  private closed = false;

  constructor(
    /** `dev:ino` of the netns the sockets live in. */
    readonly key: string,
    private readonly route: NlTransport,
  ) {
    this.links = new Links(route);
    this.addrs = new Addrs(route, this.links);
    this.routes = new Routes(route, this.links);
    this.rules = new Rules(route);
  }

  /** Opens the sockets inside the netns whose fd is given (-1: this process's netns). */
  static async open(key: string, nsFd: number): Promise<NetHandle> {
    const sock = await native().nlOpen(NETLINK_ROUTE, nsFd);
    return new NetHandle(key, new SocketTransport(sock));
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Closes the sockets; pending requests fail with ECANCELED. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.route.close();
  }
}

interface CacheEntry {
  handle: Promise<NetHandle>;
  refs: number;
}

/** Handles by netns identity, ref-counted by the Netns objects using them. */
const cache = new Map<string, CacheEntry>();

export function acquireHandle(key: string, nsFd: number): Promise<NetHandle> {
  let entry = cache.get(key);
  if (!entry) {
    const handle = NetHandle.open(key, nsFd);
    entry = { handle, refs: 0 };
    cache.set(key, entry);
    handle.catch(() => cache.delete(key));  // a failed open is not cached
  }
  entry.refs++;
  return entry.handle;
}

export function releaseHandle(key: string): void {
  const entry = cache.get(key);
  if (!entry || --entry.refs > 0) return;
  cache.delete(key);
  entry.handle.then((h) => h.close(), () => undefined);
}
