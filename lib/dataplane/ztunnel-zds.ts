// The dataplane's ztunnel side over the ZDS server: adds go to the newest
// ztunnel, deletes to all, and every new ztunnel gets a snapshot of the
// dataplane's pod cache (add + netns fd, or keep when no netns is known).
import { ZdsServer, type ZdsAckEvent, type ZdsConnectionInfo, type ZdsNackEvent, type ZdsPod, type ZdsServerOptions } from '../zds/server.js';
import type { Netns } from '../net/netns/netns.js';
import type { PodInfo, ZtunnelSink } from './types.js';
import type { CacheEntry } from './pod-cache.js';

const CONNECT_POLL_MS = 25;

export function workloadOf(pod: PodInfo): { uid: string; workloadInfo: { name: string; namespace: string; serviceAccount: string } } {
  return { uid: pod.uid, workloadInfo: { name: pod.name, namespace: pod.namespace, serviceAccount: pod.serviceAccount ?? '' } };
}

export class ZdsZtunnel implements ZtunnelSink {
  readonly server: ZdsServer;
  /**
   * Which connections hold each pod: an ack counts for the connection that
   * gave it, and only while it lives. A nack, a del or that connection's
   * disconnect drops it; a new ztunnel's snapshot ack re-establishes it.
   */
  private readonly acked = new Map<string, Set<number>>();

  /** `snapshot` is read whenever a ztunnel connects (the dataplane's cache). */
  constructor(opts: Omit<ZdsServerOptions, 'provider'>, snapshot: () => CacheEntry[]) {
    this.server = new ZdsServer({
      ...opts,
      provider: {
        snapshot: (): ZdsPod[] => snapshot().map((e) => ({ ...workloadOf(e.pod), netns: e.netns?.released ? undefined : e.netns?.ns })),
      },
    });
    // Snapshot adds count too: after an agent restart every pod reaches ztunnel that way.
    // (The server emits an add's ack before podAdded resolves, so podAdded needs no bookkeeping of its own.)
    this.server.on('ack', (e: ZdsAckEvent) => {
      if (e.uid === undefined) return;
      if (e.type === 'add') this.hold(e.uid, e.connection);
      else if (e.type === 'del') this.drop(e.uid, e.connection);
    });
    this.server.on('nack', (e: ZdsNackEvent) => {
      if (e.type === 'add' && e.uid !== undefined) this.drop(e.uid, e.connection);
    });
    this.server.on('disconnect', (info: ZdsConnectionInfo) => {
      for (const uid of [...this.acked.keys()]) this.drop(uid, info.id);
    });
  }

  private hold(uid: string, connection: number): void {
    let conns = this.acked.get(uid);
    if (!conns) this.acked.set(uid, (conns = new Set()));
    conns.add(connection);
  }

  private drop(uid: string, connection: number): void {
    const conns = this.acked.get(uid);
    if (!conns) return;
    conns.delete(connection);
    if (conns.size === 0) this.acked.delete(uid);
  }

  /** Whether any ztunnel is connected (a pod can be handed over at all). */
  connected(): boolean {
    return this.server.connectionCount > 0;
  }

  listen(): this {
    this.server.listen();
    return this;
  }

  async podAdded(pod: PodInfo, ns: Netns, opts: { connectWaitMs?: number } = {}): Promise<void> {
    if (opts.connectWaitMs && !this.connected()) await this.connection(opts.connectWaitMs);
    await this.server.podAdded(workloadOf(pod), ns);  // still none: ZDS_NO_CONNECTION
  }

  /**
   * Resolves once a ztunnel is routable (said hello and was admitted: the server emits no event
   * for that, hence the short poll), or after `ms`, whichever comes first.
   */
  private async connection(ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (!this.connected() && Date.now() < end) await new Promise((r) => setTimeout(r, Math.min(CONNECT_POLL_MS, Math.max(1, end - Date.now()))));
  }

  async podDeleted(uid: string): Promise<void> {
    this.acked.delete(uid);
    await this.server.podDeleted(uid);
  }

  /** Acked by a connection that is still up (and has not refused or deleted it since). */
  knows(uid: string): boolean {
    return this.acked.has(uid);
  }

  close(): Promise<void> {
    return this.server.close();
  }
}
