// The dataplane's ztunnel side over the ZDS server: adds go to the newest
// ztunnel, deletes to all, and every new ztunnel gets a snapshot of the
// dataplane's pod cache (add + netns fd, or keep when no netns is known).
import { ZdsServer, type ZdsAckEvent, type ZdsPod, type ZdsServerOptions } from '../zds/server.js';
import type { Netns } from '../net/netns/netns.js';
import type { PodInfo, ZtunnelSink } from './types.js';
import type { CacheEntry } from './pod-cache.js';

export function workloadOf(pod: PodInfo): { uid: string; workloadInfo: { name: string; namespace: string; serviceAccount: string } } {
  return { uid: pod.uid, workloadInfo: { name: pod.name, namespace: pod.namespace, serviceAccount: pod.serviceAccount ?? '' } };
}

export class ZdsZtunnel implements ZtunnelSink {
  readonly server: ZdsServer;
  private readonly acked = new Set<string>();

  /** `snapshot` is read whenever a ztunnel connects (the dataplane's cache). */
  constructor(opts: Omit<ZdsServerOptions, 'provider'>, snapshot: () => CacheEntry[]) {
    this.server = new ZdsServer({
      ...opts,
      provider: {
        snapshot: (): ZdsPod[] => snapshot().map((e) => ({ ...workloadOf(e.pod), netns: e.netns?.released ? undefined : e.netns?.ns })),
      },
    });
    // Snapshot adds count too: after an agent restart every pod reaches ztunnel that way.
    this.server.on('ack', (e: ZdsAckEvent) => {
      if (e.type === 'add' && e.uid !== undefined) this.acked.add(e.uid);
    });
  }

  /** Whether any ztunnel is connected (a pod can be handed over at all). */
  connected(): boolean {
    return this.server.connectionCount > 0;
  }

  listen(): this {
    this.server.listen();
    return this;
  }

  async podAdded(pod: PodInfo, ns: Netns): Promise<void> {
    await this.server.podAdded(workloadOf(pod), ns);
    this.acked.add(pod.uid);
  }

  async podDeleted(uid: string): Promise<void> {
    this.acked.delete(uid);
    await this.server.podDeleted(uid);
  }

  /** Acked by a live connection (as far as this agent saw). */
  knows(uid: string): boolean {
    return this.acked.has(uid) && this.server.connectionCount > 0;
  }

  close(): Promise<void> {
    return this.server.close();
  }
}
