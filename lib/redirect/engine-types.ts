// Shapes shared by the redirection engine's parts, and the seams through
// which it reaches the rule tools: tests count calls through them. The
// default nft seam is the native nfnetlink path (lib/net/nft/batch.ts);
// execNft is the `nft` binary path it is tested against.
import { iptables, type IptablesMode } from '../net/xtables/iptables.js';
import type { Netns } from '../net/netns/netns.js';
import { nft, type NftRuleset } from '../net/nft/tool.js';
import { nativeNftSender } from '../net/nft/batch.js';
import type { Family } from './model.js';

export type Backend = 'nftables' | 'iptables';

export interface DriftReport {
  ok: boolean;
  /** One line per difference, e.g. `missing rule: ipv4 nat ISTIO_OUTPUT -p tcp -j ACCEPT`. */
  drift: string[];
}

export interface ApplyResult {
  /** False when the netns already held exactly the model (nothing was written). */
  changed: boolean;
  /** What was written, in order (`route add ...`, `iptables-restore ipv4`, `nft transaction`). */
  actions: string[];
}

export interface RemoveResult {
  /** What was deleted; empty when nothing of ours was there. */
  removed: string[];
}

/** The iptables tools as the engine uses them (default: lib/net/xtables/iptables.ts, exec inside the netns). */
export interface IptablesRunner {
  restore(ns: Netns, text: string, opts: { family: 4 | 6; mode?: IptablesMode }): Promise<void>;
  saveText(ns: Netns, opts: { family: 4 | 6; mode?: IptablesMode }): Promise<string>;
}

/**
 * How nft scripts reach a netns and how its ruleset is read back. The default
 * (nativeNft) sends scripts as native nfnetlink batches; execNft spawns `nft`.
 */
export interface NftSender {
  /** One atomic transaction. */
  applyScript(ns: Netns, script: string): Promise<void>;
  /** The whole ruleset, parsed `nft -j list ruleset`. */
  list(ns: Netns): Promise<NftRuleset>;
  /** nft's text listing with handles (`nft -a list ruleset`), for naming rules in drift reports. */
  listText(ns: Netns): Promise<string>;
}

export const execIptables: IptablesRunner = {
  restore: (ns, text, opts) => iptables.restore(ns, text, { family: opts.family, noflush: true, ...(opts.mode ? { mode: opts.mode } : {}) }),
  saveText: (ns, opts) => iptables.saveText(ns, { family: opts.family, ...(opts.mode ? { mode: opts.mode } : {}) }),
};

/**
 * The nft path the engine uses unless told otherwise: scripts compiled once
 * into an nfnetlink batch and sent through the netns's netfilter socket (no
 * exec); anything the encoder does not cover goes through `nft -f`, reported.
 */
export const nativeNft: NftSender = nativeNftSender;

export const execNft: NftSender = {
  applyScript: (ns, script) => nft.apply(ns, script),
  list: (ns) => nft.list(ns),
  listText: (ns) => nft.listText(ns, { handles: true }),
};

export interface EngineOptions {
  backend: Backend;
  /** iptables binary variant; absent → the system's default `iptables-restore`. */
  iptablesMode?: IptablesMode;
  /** Seams (tests, native paths). */
  iptables?: IptablesRunner;
  nft?: NftSender;
}

/** How the engines' action and drift lines name a family: `ipv4`, `ipv6`. */
export const famText = (f: Family): string => `ipv${f}`;
