// `podwire/testing`: stand-ins for the peers podwire talks to, for tests and benchmarks of code
// built on the library — not part of the library's root entry. ZtunnelPeer speaks ZDS as
// ztunnel does (acks, per-pod listeners in each netns); buildNode makes the simulated node the
// demo runs (a node netns with a bridge and pod namespaces).
export { ZtunnelPeer } from './ztunnel-peer.js';
export type { ZtunnelPeerOptions } from './ztunnel-peer.js';
export { buildNode } from '../demo/topology.js';
export type { DemoNode, DemoPod } from '../demo/topology.js';
