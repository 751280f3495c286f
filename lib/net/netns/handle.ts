// NetHandle: the netlink side of one netns. Its sockets are created inside
// that netns once (on a native job thread) and then used from the JS thread
// with no namespace switching. One handle per netns identity, shared by
// every Netns object that refers to it and closed when the last one closes.
import { native } from '../binding.js';
import { Addrs } from '../rtnl/addrs.js';
import { Ipset } from '../ipset/ipset.js';
import { Links } from '../rtnl/links.js';
import { Neighbours } from '../rtnl/neigh.js';
import { NETLINK_NETFILTER } from '../nl/nfnl.js';
import { NETLINK_ROUTE } from '../rtnl/constants.js';
import { SocketTransport, type NlTransport } from '../nl/transport.js';
import { Routes } from '../rtnl/routes.js';
import { Rules } from '../rtnl/rules.js';

export class NetHandle {
  readonly links: Links;
  readonly addrs: Addrs;
  readonly routes: Routes;
  readonly rules: Rules;
  readonly neigh: Neighbours;
  /** ipset over NETLINK_NETFILTER. */
  readonly ipset: Ipset;
  private closed = false;

  constructor(
    /** `dev:ino` of the netns the sockets live in. */
    readonly key: string,
    private readonly route: NlTransport,
    /** NETLINK_NETFILTER socket (ipset), opened with the route socket while the netns fd is at hand. */
    private readonly netfilter: NlTransport,
  ) {
    this.links = new Links(route);
    this.addrs = new Addrs(route, this.links);
    this.routes = new Routes(route, this.links);
    this.rules = new Rules(route);
    this.neigh = new Neighbours(route, this.links);
    this.ipset = new Ipset(netfilter);
  }

  /** Opens the sockets inside the netns whose fd is given (-1: this process's netns). */
  static async open(key: string, nsFd: number): Promise<NetHandle> {
    // Both sockets from one job: one thread and one setns round trip (a job
    // thread costs ~100 µs here, most of a handle open). On failure the
    // native side closes whatever it had created.
    const [route, nf] = await native().nlOpen(nsFd, [NETLINK_ROUTE, NETLINK_NETFILTER]);
    return new NetHandle(key, new SocketTransport(route!), new SocketTransport(nf!));
  }

  /** The NETLINK_NETFILTER transport, for nf_tables batches and dumps (lib/net/nft/batch.ts). */
  get nfnetlink(): NlTransport {
    return this.netfilter;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Closes the sockets; pending requests fail with ECANCELED. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.route.close();
    this.netfilter.close();
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
    const mine = entry;
    // A failed open is not cached, but only this entry goes: by the time the
    // open fails, its users may have released it and a newer handle for the
    // same netns may sit under the key.
    handle.catch(() => {
      if (cache.get(key) === mine) cache.delete(key);
    });
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
