// The host probe set as Istio's ipset backend keeps it (§5.7):
// `istio-inpod-probes-v4` / `-v6`, type hash:ip with comments, in the host
// (node) netns, entries = pod IP with the pod UID as comment.
import { isExist, isNotFound } from '../net/errors.js';
import type { NetHandle } from '../net/netns/handle.js';
import { parseIp } from '../net/ip.js';
import type { ProbeEntry, ProbeSet } from './types.js';

export const PROBE_SET_V4 = 'istio-inpod-probes-v4';
export const PROBE_SET_V6 = 'istio-inpod-probes-v6';

export class IpsetProbeSet implements ProbeSet {
  constructor(private readonly host: NetHandle, private readonly ipv6: boolean) {}

  private setFor(ip: string): string | undefined {
    const fam = parseIp(ip).family;
    if (fam === 6 && !this.ipv6) return undefined;  // upstream ignores v6 IPs without IPv6
    return fam === 4 ? PROBE_SET_V4 : PROBE_SET_V6;
  }

  private names(): string[] {
    return this.ipv6 ? [PROBE_SET_V4, PROBE_SET_V6] : [PROBE_SET_V4];
  }

  async ensure(): Promise<void> {
    for (const [name, family] of [[PROBE_SET_V4, 'inet'], [PROBE_SET_V6, 'inet6']] as const) {
      if (family === 'inet6' && !this.ipv6) continue;
      try {
        await this.host.ipset.create(name, { type: 'hash:ip', family, comment: true }, { exist: true });
      } catch (err) {
        if (!isExist(err)) throw err;
      }
    }
  }

  async upsert(ips: string[], uid: string): Promise<void> {
    for (const ip of ips) {
      const set = this.setFor(ip);
      if (set) await this.host.ipset.add(set, { address: ip, comment: uid }, { exist: true });
    }
  }

  async removeOwned(ips: string[], uid: string): Promise<{ removed: string[]; foreign: ProbeEntry[] }> {
    const removed: string[] = [];
    const foreign: ProbeEntry[] = [];
    const current = await this.list();
    for (const ip of ips) {
      const set = this.setFor(ip);
      const entry = current.find((e) => e.ip === ip);
      if (!set || !entry) continue;
      if (entry.uid !== uid) {
        foreign.push(entry);
        continue;
      }
      try {
        await this.host.ipset.del(set, ip);
        removed.push(ip);
      } catch (err) {
        if (!isNotFound(err)) throw err;  // raced with another removal: fine
      }
    }
    return { removed, foreign };
  }

  async list(): Promise<ProbeEntry[]> {
    const out: ProbeEntry[] = [];
    for (const name of this.names()) {
      try {
        const l = await this.host.ipset.list(name);
        for (const e of l.entries) out.push({ ip: e.address, uid: e.comment ?? '' });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    return out;
  }

  async prune(keep: ReadonlySet<string>): Promise<string[]> {
    const stale = (await this.list()).filter((e) => !keep.has(e.ip));
    for (const e of stale) await this.host.ipset.del(this.setFor(e.ip)!, e.ip, { exist: true });
    return stale.map((e) => e.ip);
  }

  async flush(): Promise<void> {
    for (const name of this.names()) await this.host.ipset.flush(name);
  }

  /** Removes both sets (agent uninstall); tolerates missing ones. */
  async destroy(): Promise<void> {
    for (const name of this.names()) await this.host.ipset.destroy(name, { exist: true });
  }
}
