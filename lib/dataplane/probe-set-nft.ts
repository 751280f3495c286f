// The host probe set as Istio's nftables backend keeps it (§7): sets
// `istio-inpod-probes-v4` (ipv4_addr) and `-v6` (ipv6_addr) in table
// `inet istio-ambient-nat` of the host (node) netns, elements = pod IP with
// the pod UID as comment.
import { isNotFound } from '../net/errors.js';
import { formatIp, parseIp } from '../net/ip.js';
import { listSetElems, NFPROTO_INET, sendSetElems, type SetElemOp } from '../net/nft/setelem.js';
import type { Netns } from '../net/netns/netns.js';
import { nft, Transaction } from '../net/nft/tool.js';
import { compile, send } from '../net/nft/batch.js';
import type { ProbeEntry, ProbeSet } from './types.js';
import { PROBE_SET_V4, PROBE_SET_V6 } from './probe-set-ipset.js';

export const NFT_PROBE_TABLE = { family: 'inet', name: 'istio-ambient-nat' } as const;
const SET_COMMENT = 'UUID of the pods that are part of ambient mesh';

/** Runs an nft transaction in a netns. */
export type NftRunner = (ns: Netns, tx: Transaction) => Promise<void>;
/** Default: compiled to one nfnetlink batch and sent natively (nft -f only as the reported fallback). */
export const nativeRunner: NftRunner = async (ns, tx) => {
  await send(ns, compile(tx));
};
export const execRunner: NftRunner = (ns, tx) => nft.apply(ns, tx);

export class NftProbeSet implements ProbeSet {
  constructor(private readonly host: Netns, private readonly ipv6: boolean, private readonly run: NftRunner = nativeRunner) {}

  private setFor(ip: string): { set: string; key: Buffer } | undefined {
    const { family, bytes } = parseIp(ip);
    if (family === 6 && !this.ipv6) return undefined;  // upstream ignores v6 IPs without IPv6
    return { set: family === 4 ? PROBE_SET_V4 : PROBE_SET_V6, key: bytes };
  }

  private async nf() {
    return (await this.host.netlink()).nfnetlink;
  }

  /** Creates the table and the sets if missing (the host rule goes in the same table). */
  async ensure(): Promise<void> {
    const tx = new Transaction().addTable(NFT_PROBE_TABLE);
    tx.addSet(NFT_PROBE_TABLE, PROBE_SET_V4, { type: 'ipv4_addr', comment: SET_COMMENT });
    if (this.ipv6) tx.addSet(NFT_PROBE_TABLE, PROBE_SET_V6, { type: 'ipv6_addr', comment: SET_COMMENT });
    await this.run(this.host, tx);
  }

  async upsert(ips: string[], uid: string): Promise<void> {
    const ops: SetElemOp[] = [];
    for (const ip of ips) {
      const t = this.setFor(ip);
      // add (no-op if present) + delete + add with the comment: replaces the comment atomically.
      if (t) ops.push({ op: 'add', ...t }, { op: 'delete', ...t }, { op: 'add', ...t, comment: uid });
    }
    await sendSetElems(await this.nf(), NFPROTO_INET, NFT_PROBE_TABLE.name, ops);
  }

  async removeOwned(ips: string[], uid: string): Promise<{ removed: string[]; foreign: ProbeEntry[] }> {
    const current = await this.list();
    const removed: string[] = [];
    const foreign: ProbeEntry[] = [];
    const ops: SetElemOp[] = [];
    for (const ip of ips) {
      const canon = formatIp(parseIp(ip).bytes);
      const entry = current.find((e) => e.ip === canon);
      const t = this.setFor(ip);
      if (!entry || !t) continue;
      if (entry.uid !== uid) {
        foreign.push(entry);
        continue;
      }
      ops.push({ op: 'delete', ...t });
      removed.push(ip);
    }
    await sendSetElems(await this.nf(), NFPROTO_INET, NFT_PROBE_TABLE.name, ops);
    return { removed, foreign };
  }

  async list(): Promise<ProbeEntry[]> {
    const nf = await this.nf();
    const out: ProbeEntry[] = [];
    for (const set of this.ipv6 ? [PROBE_SET_V4, PROBE_SET_V6] : [PROBE_SET_V4]) {
      try {
        for (const e of await listSetElems(nf, NFPROTO_INET, NFT_PROBE_TABLE.name, set)) out.push({ ip: formatIp(e.key), uid: e.comment ?? '' });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    return out;
  }

  async prune(keep: ReadonlySet<string>): Promise<string[]> {
    const stale = (await this.list()).filter((e) => !keep.has(e.ip));
    await sendSetElems(await this.nf(), NFPROTO_INET, NFT_PROBE_TABLE.name, stale.map((e) => ({ op: 'delete' as const, ...this.setFor(e.ip)! })));
    return stale.map((e) => e.ip);
  }

  async flush(): Promise<void> {
    const tx = new Transaction().flushSet(NFT_PROBE_TABLE, PROBE_SET_V4);
    if (this.ipv6) tx.flushSet(NFT_PROBE_TABLE, PROBE_SET_V6);
    await this.run(this.host, tx);
  }
}
