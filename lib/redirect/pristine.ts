// Does a netns hold any packet-filter state at all? Answered without running
// a tool: an nf_tables table dump (listTables, lib/net/nft/dump.ts) and the
// legacy xtables table list from /proc/net. A fresh pod netns has neither,
// so the engine can write at once instead of exec'ing `iptables-save` or
// `nft list` first (the read-back costs as much as the write).
import { listTables } from '../net/nft/dump.js';
import type { Netns } from '../net/netns/netns.js';

/** Number of nf_tables tables in the netns. */
export async function nftTableCount(ns: Netns): Promise<number> {
  return (await listTables(ns)).length;
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
