// The nf_tables ruleset generation of a netns (NFT_MSG_GETGEN): a counter the kernel bumps on
// every committed nf_tables transaction in that netns — nft, iptables-nft, anyone's. Equal
// generations mean no nf_tables change in between, so a ruleset verified at generation G is still
// as verified while the netns reports G (lib/redirect/apply.ts verify uses this to skip the dumps).
import { constants } from 'node:os';
import type { Netns } from '../netns/netns.js';
import { Attrs, MsgWriter, NLM_F_ACK, NLM_F_REQUEST, splitMessages } from '../nl/codec.js';
import { NFGENMSG_LEN, nfgenmsg, nfnlType, NFNL_SUBSYS_NFTABLES, NFPROTO_UNSPEC } from '../nl/nfnl.js';
import { NetError } from '../errors.js';
import { NFT_MSG, NFTA_GEN_ID } from './ir.js';

/** The netns's current ruleset generation (one request on its cached netfilter socket). */
export async function rulesetGeneration(ns: Netns): Promise<number> {
  const nf = (await ns.netlink()).nfnetlink;
  const msg = new MsgWriter(nfnlType(NFNL_SUBSYS_NFTABLES, NFT_MSG.GETGEN), NLM_F_REQUEST | NLM_F_ACK).raw(nfgenmsg(NFPROTO_UNSPEC)).finish();
  const reply = splitMessages(await nf.request(msg, 'NFT_MSG_GETGEN'))
    .find((m) => m.type === nfnlType(NFNL_SUBSYS_NFTABLES, NFT_MSG.NEWGEN));
  const id = reply && new Attrs(reply.body, NFGENMSG_LEN).map.get(NFTA_GEN_ID);
  if (!id || id.length < 4) throw new NetError('NFT_MSG_GETGEN: no generation id in the reply', { errno: constants.errno.EPROTO, op: 'NFT_MSG_GETGEN' });
  return id.readUInt32BE(0);
}
