// podwire's public API. The native binding itself is never exported.

// Network namespaces, rtnetlink, errors.
export { Netns, NETNS_RUN_DIR } from './net/netns/netns.js';
export type { NetnsId, SocketOptions, SpawnOptions, SpawnResult } from './net/netns/netns.js';
export { NetHandle } from './net/netns/handle.js';
export { NetError, isExist, isNotFound, errnoName, IPSET_ERRORS } from './net/errors.js';
export type { NetErrorDetails } from './net/errors.js';
export type { Link, LinkRef, LinkSpec, LinkChanges } from './net/rtnl/links.js';
export type { Addr, AddrOptions } from './net/rtnl/addrs.js';
export type { Route, RouteSpec } from './net/rtnl/routes.js';
export type { Rule, RuleSpec } from './net/rtnl/rules.js';
export type { Neigh, NeighSpec } from './net/rtnl/neigh.js';
export { parseIp, formatIp, parsePrefix } from './net/ip.js';
export type { Family } from './net/ip.js';

// Sockets inside a netns; unix seqpacket sockets with fd passing.
export { connectTcp } from './net/sock/connect.js';
export type { ConnectOptions } from './net/sock/connect.js';
export { listenTcp, udpSocket, udpExchange } from './net/sock/listen.js';
export type { ListenTcpOptions } from './net/sock/listen.js';
export { listen as listenUnix, connect as connectUnix, socketPair, OwnedFd, UnixConnection, UnixListener } from './net/sock/seqpacket.js';

// ipset (its API lives on the handle: `nl.ipset`), iptables and nft tools, native nftables.
export type { IpsetEntry, IpsetCreateOptions, IpsetFamily, IpsetList, IpsetError } from './net/ipset/ipset.js';
export { iptables } from './net/xtables/iptables.js';
export type { IpFamily, IptablesMode, IptablesBackend, SavedTable, SavedChain, SavedRule } from './net/xtables/iptables.js';
export { nft, Transaction } from './net/nft/tool.js';
export type { NftRuleset, NftTable, NftChain, NftRule, NftSet } from './net/nft/tool.js';
export { nftNative, NftBatchError } from './net/nft/batch.js';
export { listTables } from './net/nft/dump.js';
export type { NftTableId } from './net/nft/dump.js';
export { captureNft, replayNft } from './net/nft/clone.js';
export type { NftClone } from './net/nft/clone.js';
export { ToolError } from './net/tool-error.js';
export { NFPROTO_UNSPEC, NFPROTO_INET, NFPROTO_IPV4, NFPROTO_IPV6 } from './net/nl/nfnl.js';

/** Redirection rule model, renderers, and the apply/verify/remove engine. */
export * as redirect from './redirect/index.js';

// The ztunnel protocol and the enrollment pipeline.
export { ZdsServer, ZTUNNEL_SOCKET_PATH } from './zds/server.js';
export type { ZdsServerOptions, ZdsPod, ZdsPodProvider } from './zds/server.js';
export { Dataplane } from './dataplane/dataplane.js';
export { NodeDataplane } from './dataplane/node.js';
export type { NodeDataplaneOptions } from './dataplane/node.js';
export { EnrollError } from './dataplane/errors.js';
export type { PodInfo, RuleBackend, ZtunnelSink, ProbeSet } from './dataplane/types.js';

// Kubernetes (lib/kube) is its own entry, `podwire/kube`: it loads @kubernetes/client-node,
// which the netns library and the demo do not need.
