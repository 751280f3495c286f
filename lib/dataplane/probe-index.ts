// Who owns each probe-set IP, kept in memory over the kernel set. Pod IPs are
// reused, so ownership (the UID comment) decides what an unenroll may delete.
// Every write to one IP is serialised here (a per-IP lock) and decided from
// the index in the same step, so pod A's unenroll can never delete pod B's
// fresh entry for the same IP, and no operation lists the whole set: an
// unenroll costs O(its IPs), not O(set size). The index is loaded from the
// kernel at start and re-checked against it on every reconcile.
import { formatIp, parseIp } from '../net/ip.js';
import { KeyedLock } from '../util/keyed-lock.js';
import type { ProbeEntry, ProbeSet } from './types.js';

/** Canonical text of an IP (the backends list canonical text too). */
export function canonicalIp(ip: string): string {
  return formatIp(parseIp(ip).bytes);
}

export class ProbeIndex {
  private readonly owners = new Map<string, string>();  // canonical IP → UID
  private readonly byUid = new Map<string, Set<string>>();
  private readonly lock = new KeyedLock();
  /** IPs written while a load() was reading the kernel: the load leaves them alone. */
  private touched: Set<string> | undefined;

  constructor(readonly backend: ProbeSet) {}

  async ensure(): Promise<void> {
    await this.backend.ensure();
  }

  /** The owner recorded for an IP. */
  owner(ip: string): string | undefined {
    return this.owners.get(canonicalIp(ip));
  }

  get size(): number {
    return this.owners.size;
  }

  /** The IPs recorded for `uid` (what `podwire status` shows as its probe-set entries). */
  ipsOf(uid: string): string[] {
    return [...(this.byUid.get(uid) ?? [])];
  }

  /**
   * Replaces the index with the kernel's entries (agent start, reconcile).
   * IPs written meanwhile keep what their writer recorded. Returns the
   * number of index entries that differed from the kernel.
   */
  async load(): Promise<number> {
    const touched = new Set<string>();
    this.touched = touched;
    let entries: ProbeEntry[];
    try {
      entries = await this.backend.list();
    } finally {
      this.touched = undefined;
    }
    const kernel = new Map(entries.map((e) => [e.ip, e.uid]));
    let differed = 0;
    for (const [ip, uid] of [...this.owners]) {
      if (!touched.has(ip) && kernel.get(ip) !== uid) {
        this.forget(ip);
        differed++;
      }
    }
    for (const [ip, uid] of kernel) {
      if (touched.has(ip) || this.owners.get(ip) === uid) continue;
      this.record(ip, uid);
      differed++;
    }
    return differed;
  }

  /**
   * Gives each IP to `uid` (overwriting another owner: the IP moved). IPs
   * already recorded for `uid` are not written again unless `force`.
   */
  upsert(ips: string[], uid: string, opts: { force?: boolean } = {}): Promise<void> {
    const wanted = this.accepted(ips);
    return this.lock.runAll(wanted, async () => {
      const todo = opts.force ? wanted : wanted.filter((ip) => this.owners.get(ip) !== uid);
      if (todo.length === 0) return;
      this.touch(todo);
      await this.write(todo.map((ip) => ({ ip, uid })));
      for (const ip of todo) this.record(ip, uid);
    });
  }

  /**
   * upsert() for many pods in one backend call (a restart's refill): the
   * IPs not yet recorded for their pod, each written only if `live(uid)`
   * still holds once its lock is held. Where two items name one IP, the
   * later one wins.
   */
  upsertMany(items: ReadonlyArray<{ ips: string[]; uid: string }>, live: (uid: string) => boolean): Promise<void> {
    const wanted = new Map<string, string>();  // canonical IP → UID
    for (const { ips, uid } of items) for (const ip of this.accepted(ips)) wanted.set(ip, uid);
    return this.lock.runAll(wanted.keys(), async () => {
      const todo: ProbeEntry[] = [];
      for (const [ip, uid] of wanted) if (this.owners.get(ip) !== uid && live(uid)) todo.push({ ip, uid });
      if (todo.length === 0) return;
      this.touch(todo.map((e) => e.ip));
      await this.write(todo);
      for (const e of todo) this.record(e.ip, e.uid);
    });
  }

  // IPs the index has no owner for are written as fresh (the index mirrors the kernel).
  private async write(entries: ProbeEntry[]): Promise<void> {
    const fresh = entries.filter((e) => !this.owners.has(e.ip));
    const moved = fresh.length === entries.length ? [] : entries.filter((e) => this.owners.has(e.ip));
    if (fresh.length) await this.backend.upsert(fresh, { fresh: true });
    if (moved.length) await this.backend.upsert(moved);
  }

  /**
   * Removes the IPs (plus any other IP recorded for `uid`) that belong to
   * `uid`; IPs owned by another pod are left in place and reported.
   */
  removeOwned(ips: string[], uid: string): Promise<{ removed: string[]; foreign: ProbeEntry[] }> {
    const candidates = new Set([...this.accepted(ips), ...(this.byUid.get(uid) ?? [])]);
    return this.lock.runAll(candidates, async () => {
      const removed: string[] = [];
      const foreign: ProbeEntry[] = [];
      for (const ip of candidates) {
        const owner = this.owners.get(ip);
        if (owner === undefined) continue;
        if (owner === uid) removed.push(ip);
        else foreign.push({ ip, uid: owner });
      }
      if (removed.length > 0) {
        this.touch(removed);
        await this.backend.remove(removed);
        for (const ip of removed) this.forget(ip);
      }
      return { removed, foreign };
    });
  }

  /** Removes the IPs recorded for `uid` that are not in `ips` (the pod's IPs changed). */
  retain(uid: string, ips: string[]): Promise<string[]> {
    const still = new Set(this.accepted(ips));
    const gone = [...(this.byUid.get(uid) ?? [])].filter((ip) => !still.has(ip));
    return this.lock.runAll(gone, async () => {
      const removed = gone.filter((ip) => this.owners.get(ip) === uid);
      if (removed.length === 0) return [];
      this.touch(removed);
      await this.backend.remove(removed);
      for (const ip of removed) this.forget(ip);
      return removed;
    });
  }

  /**
   * Removes every entry whose IP is not in `keep` and whose owner is not
   * `live` (enrolled or being enrolled), re-checked under each IP's lock so
   * an entry written meanwhile survives.
   */
  async prune(keep: ReadonlySet<string>, live: (uid: string) => boolean): Promise<string[]> {
    const keepCanon = new Set([...keep].map(canonicalIp));
    const stale = [...this.owners].filter(([ip, uid]) => !keepCanon.has(ip) && !live(uid));
    const pruned: string[] = [];
    await Promise.all(stale.map(([ip, uid]) => this.lock.run(ip, async () => {
      if (this.owners.get(ip) !== uid || live(uid)) return;
      this.touch([ip]);
      await this.backend.remove([ip]);
      this.forget(ip);
      pruned.push(ip);
    })));
    return pruned.sort();
  }

  /** The kernel's entries (for drift checks). */
  list(): Promise<ProbeEntry[]> {
    return this.backend.list();
  }

  // Valid IPs that the backend keeps, canonical; anything else has no entry to touch.
  private accepted(ips: readonly unknown[]): string[] {
    const out = new Set<string>();
    for (const ip of ips) {
      if (typeof ip !== 'string') continue;
      let c: string;
      try {
        c = canonicalIp(ip);
      } catch {
        continue;
      }
      if (this.backend.handles(c)) out.add(c);
    }
    return [...out];
  }

  private touch(ips: string[]): void {
    if (this.touched) for (const ip of ips) this.touched.add(ip);
  }

  private record(ip: string, uid: string): void {
    this.forget(ip);
    this.owners.set(ip, uid);
    let set = this.byUid.get(uid);
    if (!set) this.byUid.set(uid, (set = new Set()));
    set.add(ip);
  }

  private forget(ip: string): void {
    const uid = this.owners.get(ip);
    if (uid === undefined) return;
    this.owners.delete(ip);
    const set = this.byUid.get(uid);
    set?.delete(ip);
    if (set?.size === 0) this.byUid.delete(uid);
  }
}
