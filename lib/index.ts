// podwire's public API. The native binding itself is never exported.
export { Netns, NETNS_RUN_DIR } from './net/netns.js';
export type { NetnsId, SpawnOptions, SpawnResult } from './net/netns.js';
export { NetHandle } from './net/handle.js';
export { NetError, isExist, isNotFound, errnoName, IPSET_ERRORS } from './net/errors.js';
export type { NetErrorDetails } from './net/errors.js';
export type { Link, LinkRef, LinkSpec, LinkChanges } from './net/links.js';
export type { Addr, AddrOptions } from './net/addrs.js';
export type { Route, RouteSpec } from './net/routes.js';
export type { Rule, RuleSpec } from './net/rules.js';
export { parseIp, formatIp, parsePrefix } from './net/ip.js';
export type { Family } from './net/ip.js';
export { connectTcp } from './net/connect.js';
export type { ConnectOptions } from './net/connect.js';
export { iptables } from './net/iptables.js';
export type { IptablesMode, IptablesBackend, SavedTable, SavedChain, SavedRule } from './net/iptables.js';
export { nft, Transaction } from './net/nft.js';
export type { NftRuleset, NftTable, NftChain, NftRule, NftSet } from './net/nft.js';
export { ToolError } from './net/tool-error.js';
/** Redirection rule model, renderers (and, with the engine, apply/verify/remove). */
export * as redirect from './redirect/index.js';
