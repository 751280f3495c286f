// In-memory stand-ins for the dataplane's subsystems, for fast tests of the
// pipeline's logic beside the real-kernel ones. Each records what it was asked.
import { Dataplane } from '../../lib/dataplane/dataplane.js';
import type { Netns } from '../../lib/net/netns/netns.js';
import type { DriftReport, PodInfo, ProbeEntry, ProbeSet, RuleBackend, ZtunnelSink } from '../../lib/dataplane/types.js';

export class FakeRules implements RuleBackend {
  applied = new Map<string, number>();  // uid → netns inode
  calls: string[] = [];
  failApply?: (pod: PodInfo) => boolean;
  failRemove?: (pod: PodInfo) => boolean;
  /** Milliseconds each call takes (to let concurrent operations interleave). */
  delayMs = 0;
  drifted = new Set<string>();

  private async pause(): Promise<void> {
    if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
  }

  async apply(ns: Netns, pod: PodInfo): Promise<void> {
    this.calls.push(`apply ${pod.uid}`);
    await this.pause();
    if (this.failApply?.(pod)) {
      this.applied.set(pod.uid, ns.id.ino);  // half-applied state the pipeline must undo
      throw Object.assign(new Error('rules refused'), { code: 'EINVAL' });
    }
    this.applied.set(pod.uid, ns.id.ino);
    this.drifted.delete(pod.uid);
  }

  async verify(ns: Netns, pod: PodInfo): Promise<DriftReport> {
    this.calls.push(`verify ${pod.uid}`);
    await this.pause();
    const ok = this.applied.get(pod.uid) === ns.id.ino && !this.drifted.has(pod.uid);
    return { ok, drift: ok ? [] : ['rules missing'] };
  }

  async remove(_ns: Netns, pod: PodInfo): Promise<void> {
    this.calls.push(`remove ${pod.uid}`);
    await this.pause();
    if (this.failRemove?.(pod)) throw Object.assign(new Error('remove refused'), { code: 'EAGAIN' });
    this.applied.delete(pod.uid);
  }
}

export class FakeZtunnel implements ZtunnelSink {
  known = new Map<string, number>();
  deleted: string[] = [];
  fail = false;
  failDelete = false;

  async podAdded(pod: PodInfo, ns: Netns): Promise<void> {
    if (this.fail) throw Object.assign(new Error('no ztunnel connection'), { code: 'ENOTCONN' });
    this.known.set(pod.uid, ns.id.ino);
  }

  async podDeleted(uid: string): Promise<void> {
    if (this.failDelete) throw Object.assign(new Error('ztunnel went away'), { code: 'EPIPE' });
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
  /** Fails the upserts it returns true for (besides `fail`). */
  failUpsert: ((entries: ProbeEntry[]) => boolean) | undefined;
  /** Entries per upsert call, in order. */
  upserts: number[] = [];

  async ensure(): Promise<void> {}
  handles(ip: string): boolean {
    return ip.length > 0;
  }
  async upsert(entries: ProbeEntry[]): Promise<void> {
    this.upserts.push(entries.length);
    if (this.fail || this.failUpsert?.(entries)) throw new Error('ipset down');
    await Promise.resolve();
    for (const e of entries) this.entries.set(e.ip, e.uid);
  }
  async remove(ips: string[]): Promise<void> {
    if (this.fail) throw new Error('ipset down');
    await Promise.resolve();
    for (const ip of ips) this.entries.delete(ip);
  }
  async list(): Promise<ProbeEntry[]> {
    return [...this.entries].map(([ip, uid]) => ({ ip, uid }));
  }
  async flush(): Promise<void> {
    this.entries.clear();
  }
  destroyed = false;
  async destroy(): Promise<void> {
    this.entries.clear();
    this.destroyed = true;
  }
}

/** A Dataplane over the three fakes, collecting its warnings. */
export function fakeDataplane() {
  const rules = new FakeRules();
  const ztunnel = new FakeZtunnel();
  const probes = new FakeProbes();
  const warnings: string[] = [];
  const dp = new Dataplane({ rules, ztunnel, probes, warn: (m) => warnings.push(m) });
  return { dp, rules, ztunnel, probes, warnings };
}
