// In-memory stand-ins for the dataplane's subsystems, for fast tests of the
// pipeline's logic beside the real-kernel ones. Each records what it was asked.
import type { Netns } from '../../lib/net/netns/netns.js';
import type { DriftReport, PodInfo, ProbeEntry, ProbeSet, RuleBackend, ZtunnelSink } from '../../lib/dataplane/types.js';

export class FakeRules implements RuleBackend {
  applied = new Map<string, number>();  // uid → netns inode
  calls: string[] = [];
  failApply?: (pod: PodInfo) => boolean;
  drifted = new Set<string>();

  async apply(ns: Netns, pod: PodInfo): Promise<void> {
    this.calls.push(`apply ${pod.uid}`);
    if (this.failApply?.(pod)) {
      this.applied.set(pod.uid, ns.id.ino);  // half-applied state the pipeline must undo
      throw Object.assign(new Error('rules refused'), { code: 'EINVAL' });
    }
    this.applied.set(pod.uid, ns.id.ino);
    this.drifted.delete(pod.uid);
  }

  async verify(ns: Netns, pod: PodInfo): Promise<DriftReport> {
    this.calls.push(`verify ${pod.uid}`);
    const ok = this.applied.get(pod.uid) === ns.id.ino && !this.drifted.has(pod.uid);
    return { ok, drift: ok ? [] : ['rules missing'] };
  }

  async remove(_ns: Netns, pod: PodInfo): Promise<void> {
    this.calls.push(`remove ${pod.uid}`);
    this.applied.delete(pod.uid);
  }
}

export class FakeZtunnel implements ZtunnelSink {
  known = new Map<string, number>();
  deleted: string[] = [];
  fail = false;

  async podAdded(pod: PodInfo, ns: Netns): Promise<void> {
    if (this.fail) throw Object.assign(new Error('no ztunnel connection'), { code: 'ENOTCONN' });
    this.known.set(pod.uid, ns.id.ino);
  }

  async podDeleted(uid: string): Promise<void> {
    this.known.delete(uid);
    this.deleted.push(uid);
  }

  knows(uid: string): boolean {
    return this.known.has(uid);
  }
}

export class FakeProbes implements ProbeSet {
  entries = new Map<string, string>();
  fail = false;

  async ensure(): Promise<void> {}
  async upsert(ips: string[], uid: string): Promise<void> {
    if (this.fail) throw new Error('ipset down');
    for (const ip of ips) this.entries.set(ip, uid);
  }
  async removeOwned(ips: string[], uid: string): Promise<{ removed: string[]; foreign: ProbeEntry[] }> {
    const removed: string[] = [];
    const foreign: ProbeEntry[] = [];
    for (const ip of ips) {
      const owner = this.entries.get(ip);
      if (owner === undefined) continue;
      if (owner !== uid) foreign.push({ ip, uid: owner });
      else {
        this.entries.delete(ip);
        removed.push(ip);
      }
    }
    return { removed, foreign };
  }
  async list(): Promise<ProbeEntry[]> {
    return [...this.entries].map(([ip, uid]) => ({ ip, uid }));
  }
  async prune(keep: ReadonlySet<string>): Promise<string[]> {
    const stale = [...this.entries.keys()].filter((ip) => !keep.has(ip));
    for (const ip of stale) this.entries.delete(ip);
    return stale;
  }
  async flush(): Promise<void> {
    this.entries.clear();
  }
}
