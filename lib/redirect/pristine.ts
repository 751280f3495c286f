// Does a netns hold any packet-filter state at all? Answered without running
// a tool: an nf_tables table dump over the netns's netfilter socket and the
// legacy xtables table list from /proc/net. A fresh pod netns has neither,
// so the engine can write at once instead of exec'ing `iptables-save` or
// `nft list` first (the read-back costs as much as the write).
import { Attrs, MsgWriter, NLM_F_DUMP, NLM_F_REQUEST } from '../net/nl/codec.js';
import { NFNL_SUBSYS_NFTABLES, NFPROTO_UNSPEC, nfgenmsg, nfnlType } from '../net/nl/nfnl.js';
import type { Netns } from '../net/netns/netns.js';

const NFT_MSG_NEWTABLE = 0;
const NFT_MSG_GETTABLE = 1;

/** The nf_tables tables of the netns, all families (iptables-nft's tables included). */
export async function nftTables(ns: Netns): Promise<Array<{ family: number; name: string }>> {
  const nl = await ns.netlink();
  const msg = new MsgWriter(nfnlType(NFNL_SUBSYS_NFTABLES, NFT_MSG_GETTABLE), NLM_F_REQUEST | NLM_F_DUMP).raw(nfgenmsg(NFPROTO_UNSPEC)).finish();
  const replies = await nl.nfnetlink.dump(msg, 'NFT_MSG_GETTABLE');
  return replies.filter((m) => m.type === nfnlType(NFNL_SUBSYS_NFTABLES, NFT_MSG_NEWTABLE))
    .map((m) => ({ family: m.body.readUInt8(0), name: new Attrs(m.body, 4).str(1) ?? '' }));
}

/** Number of nf_tables tables in the netns. */
export async function nftTableCount(ns: Netns): Promise<number> {
  return (await nftTables(ns)).length;
}

/** Legacy xtables tables instantiated in the netns, per family (`/proc/net/ip{,6}_tables_names`). */
export async function legacyTables(ns: Netns, families: Array<4 | 6>): Promise<string[][]> {
  // A missing file means the module is not loaded: no legacy tables anywhere.
  const { procNet } = await ns.readMany({ procNet: families.map((f) => (f === 4 ? 'ip_tables_names' : 'ip6_tables_names')) });
  return procNet.map((text) => (text ?? '').split('\n').filter(Boolean));
}

/** True when neither nf_tables nor legacy xtables hold anything for these families. */
export async function packetFilterEmpty(ns: Netns, families: Array<4 | 6>): Promise<boolean> {
  const [nft, legacy] = await Promise.all([nftTableCount(ns), legacyTables(ns, families)]);
  return nft === 0 && legacy.every((t) => t.length === 0);
}
