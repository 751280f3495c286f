// The host probe set as Istio's nftables backend keeps it (§7): sets
// `istio-inpod-probes-v4` (ipv4_addr) and `-v6` (ipv6_addr) in table
// `inet istio-ambient-nat` of the host (node) netns, elements = pod IP with
// the pod UID as comment.
import { parseIp } from '../net/ip.js';
import type { Netns } from '../net/netns.js';
import { nft, Transaction } from '../net/nft.js';
import type { ProbeEntry, ProbeSet } from './types.js';
import { PROBE_SET_V4, PROBE_SET_V6 } from './probe-set-ipset.js';

export const NFT_PROBE_TABLE = { family: 'inet', name: 'istio-ambient-nat' } as const;
const SET_COMMENT = 'UUID of the pods that are part of ambient mesh';

/** Runs an nft script in a netns: `nft -f` by default; the native path can be plugged in. */
export type NftRunner = (ns: Netns, tx: Transaction) => Promise<void>;
const execRunner: NftRunner = (ns, tx) => nft.apply(ns, tx);

export class NftProbeSet implements ProbeSet {
  constructor(private readonly host: Netns, private readonly ipv6: boolean, private readonly run: NftRunner = execRunner) {}

  private setFor(ip: string): string | undefined {
    const fam = parseIp(ip).family;
    if (fam === 6 && !this.ipv6) return undefined;
    return fam === 4 ? PROBE_SET_V4 : PROBE_SET_V6;
  }

  async ensure(): Promise<void> {
    const tx = new Transaction().addTable(NFT_PROBE_TABLE);
    tx.addSet(NFT_PROBE_TABLE, PROBE_SET_V4, { type: 'ipv4_addr', comment: SET_COMMENT });
    if (this.ipv6) tx.addSet(NFT_PROBE_TABLE, PROBE_SET_V6, { type: 'ipv6_addr', comment: SET_COMMENT });
    await this.run(this.host, tx);
  }

  async upsert(ips: string[], uid: string): Promise<void> {
    const tx = new Transaction();
    for (const ip of ips) {
      const set = this.setFor(ip);
      if (!set) continue;
      // add (no-op if present) + delete + add: replaces the comment atomically.
      tx.addElement(NFT_PROBE_TABLE, set, ip).deleteElement(NFT_PROBE_TABLE, set, ip)
        .addElement(NFT_PROBE_TABLE, set, { key: ip, comment: uid });
    }
    if (tx.toString()) await this.run(this.host, tx);
  }

  async removeOwned(ips: string[], uid: string): Promise<{ removed: string[]; foreign: ProbeEntry[] }> {
    const current = await this.list();
    const removed: string[] = [];
    const foreign: ProbeEntry[] = [];
    const tx = new Transaction();
    for (const ip of ips) {
      const entry = current.find((e) => e.ip === ip);
      const set = this.setFor(ip);
      if (!entry || !set) continue;
      if (entry.uid !== uid) {
        foreign.push(entry);
        continue;
      }
      tx.deleteElement(NFT_PROBE_TABLE, set, ip);
      removed.push(ip);
    }
    if (removed.length) await this.run(this.host, tx);
    return { removed, foreign };
  }

  async list(): Promise<ProbeEntry[]> {
    const rs = await nft.list(this.host, { table: NFT_PROBE_TABLE });
    const out: ProbeEntry[] = [];
    for (const t of rs.tables) {
      for (const s of t.sets ?? []) {
        if (s.name !== PROBE_SET_V4 && s.name !== PROBE_SET_V6) continue;
        for (const e of s.elements) out.push({ ip: e.key, uid: e.comment ?? '' });
      }
    }
    return out;
  }

  async prune(keep: ReadonlySet<string>): Promise<string[]> {
    const stale = (await this.list()).filter((e) => !keep.has(e.ip));
    if (stale.length === 0) return [];
    const tx = new Transaction();
    for (const e of stale) tx.deleteElement(NFT_PROBE_TABLE, this.setFor(e.ip)!, e.ip);
    await this.run(this.host, tx);
    return stale.map((e) => e.ip);
  }

  async flush(): Promise<void> {
    const tx = new Transaction().flushSet(NFT_PROBE_TABLE, PROBE_SET_V4);
    if (this.ipv6) tx.flushSet(NFT_PROBE_TABLE, PROBE_SET_V6);
    await this.run(this.host, tx);
  }
}
