// The host probe set as Istio's nftables backend keeps it (§7): sets
// `istio-inpod-probes-v4` (ipv4_addr) and `-v6` (ipv6_addr) in table
// `inet istio-ambient-nat` of the host (node) netns, elements = pod IP with
// the pod UID as comment.
import { constants as osc } from 'node:os';
import { isNotFound, NetError } from '../net/errors.js';
import { formatIp, parseIp } from '../net/ip.js';
import { listSetElems, sendSetElems, type SetElemOp } from '../net/nft/setelem.js';
import { NFPROTO_INET } from '../net/nl/nfnl.js';
import type { Netns } from '../net/netns/netns.js';
import { Transaction } from '../net/nft/tool.js';
import { compile, send } from '../net/nft/batch.js';
import type { ProbeEntry, ProbeSet } from './types.js';
import { PROBE_SET_V4, PROBE_SET_V6 } from './probe-set-ipset.js';

export const NFT_PROBE_TABLE = { family: 'inet', name: 'istio-ambient-nat' } as const;
const SET_COMMENT = 'UUID of the pods that are part of ambient mesh';
/** Entries per nf_tables batch (three messages each, ~0.3 MB): bounded so a large refill stays well inside the socket's buffers. */
const UPSERT_BATCH = 1024;

/** Runs an nft transaction in a netns. */
export type NftRunner = (ns: Netns, tx: Transaction) => Promise<void>;
/** Default: compiled to one nfnetlink batch and sent natively (tests inject another runner). */
export const nativeRunner: NftRunner = async (ns, tx) => {
  await send(ns, compile(tx));
};

export class NftProbeSet implements ProbeSet {
  constructor(private readonly host: Netns, private readonly ipv6: boolean, private readonly run: NftRunner = nativeRunner) {}

  private setFor(ip: string): { set: string; key: Buffer } | undefined {
    const { family, bytes } = parseIp(ip);
    if (family === 6 && !this.ipv6) return undefined;  // upstream ignores v6 IPs without IPv6
    return { set: family === 4 ? PROBE_SET_V4 : PROBE_SET_V6, key: bytes };
  }

  handles(ip: string): boolean {
    return this.setFor(ip) !== undefined;
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

  async upsert(entries: ProbeEntry[], opts: { fresh?: boolean } = {}): Promise<void> {
    const nf = await this.nf();
    for (let s = 0; s < entries.length; s += UPSERT_BATCH) {
      // IPv4 first, then IPv6: each step below is then one message per set.
      const v4: Array<{ set: string; key: Buffer; comment: string }> = [];
      const v6: typeof v4 = [];
      for (let i = s; i < Math.min(entries.length, s + UPSERT_BATCH); i++) {
        const t = this.setFor(entries[i]!.ip);
        if (t) (t.set === PROBE_SET_V4 ? v4 : v6).push({ set: t.set, key: t.key, comment: entries[i]!.uid });
      }
      const elems = v4.concat(v6);
      if (elems.length === 0) continue;
      if (opts.fresh) {
        // Believed absent: one exclusive add with the comment; any element already there aborts it (EEXIST).
        try {
          await sendSetElems(nf, NFPROTO_INET, NFT_PROBE_TABLE.name, elems.map((e) => ({ op: 'add', exclusive: true, ...e })));
          continue;
        } catch (err) {
          if (!(err instanceof NetError && err.errno === osc.errno.EEXIST)) throw err;
        }
      }
      // add (no-op if present) + delete + add with the comment: replaces the comment atomically.
      const plain = elems.map((e) => ({ set: e.set, key: e.key }));
      await sendSetElems(nf, NFPROTO_INET, NFT_PROBE_TABLE.name, [
        ...plain.map((e): SetElemOp => ({ op: 'add', ...e })),
        ...plain.map((e): SetElemOp => ({ op: 'delete', ...e })),
        ...elems.map((e): SetElemOp => ({ op: 'add', ...e })),
      ]);
    }
  }

  async remove(ips: string[]): Promise<void> {
    const ops: SetElemOp[] = [];
    for (const ip of ips) {
      const t = this.setFor(ip);
      // add (no-op if present) + delete: a missing element is no error, all in one batch.
      if (t) ops.push({ op: 'add', ...t }, { op: 'delete', ...t });
    }
    await sendSetElems(await this.nf(), NFPROTO_INET, NFT_PROBE_TABLE.name, ops);
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

  async flush(): Promise<void> {
    const tx = new Transaction().flushSet(NFT_PROBE_TABLE, PROBE_SET_V4);
    if (this.ipv6) tx.flushSet(NFT_PROBE_TABLE, PROBE_SET_V6);
    await this.run(this.host, tx);
  }

  /** Uninstall: the whole table goes (sets and the host rule's chain live in it, §7). */
  async destroy(): Promise<void> {
    await this.run(this.host, new Transaction().deleteTable(NFT_PROBE_TABLE, { missingOk: true }));
  }
}
