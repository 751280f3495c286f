// The host probe set as Istio's ipset backend keeps it (§5.7):
// `istio-inpod-probes-v4` / `-v6`, type hash:ip with comments, in the host
// (node) netns, entries = pod IP with the pod UID as comment.
import { isExist, isNotFound } from '../net/errors.js';
import type { NetHandle } from '../net/netns/handle.js';
import { formatIp, parseIp } from '../net/ip.js';
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

  handles(ip: string): boolean {
    return this.setFor(ip) !== undefined;
  }

  async ensure(): Promise<void> {
    for (const [name, family] of [[PROBE_SET_V4, 4], [PROBE_SET_V6, 6]] as const) {
      if (family === 6 && !this.ipv6) continue;
      try {
        await this.host.ipset.create(name, { type: 'hash:ip', family, comment: true }, { exist: true });
      } catch (err) {
        if (!isExist(err)) throw err;
      }
    }
  }

  async upsert(entries: ProbeEntry[]): Promise<void> {
    for (const [set, group] of this.bySet(entries, (e) => e.ip)) {
      await this.host.ipset.add(set, group.map((e) => ({ address: e.ip, comment: e.uid })), { exist: true });
    }
  }

  async remove(ips: string[]): Promise<void> {
    for (const [set, group] of this.bySet(ips, (ip) => ip)) await this.host.ipset.del(set, group, { exist: true });
  }

  async list(): Promise<ProbeEntry[]> {
    const out: ProbeEntry[] = [];
    for (const name of this.names()) {
      try {
        const l = await this.host.ipset.list(name);
        for (const e of l.entries) out.push({ ip: formatIp(parseIp(e.address).bytes), uid: e.comment ?? '' });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    return out;
  }

  async flush(): Promise<void> {
    for (const name of this.names()) await this.host.ipset.flush(name);
  }

  /** Removes both sets (agent uninstall); tolerates missing ones. */
  async destroy(): Promise<void> {
    for (const name of this.names()) await this.host.ipset.destroy(name, { exist: true });
  }

  // One batched request per set.
  private bySet<T>(items: T[], ipOf: (item: T) => string): Map<string, T[]> {
    const out = new Map<string, T[]>();
    for (const item of items) {
      const set = this.setFor(ipOf(item));
      if (!set) continue;
      const group = out.get(set);
      if (group) group.push(item);
      else out.set(set, [item]);
    }
    return out;
  }
}
