// A simulated node for dataplane tests: the demo's node netns with pod netns, a NodeDataplane on
// it serving ZDS on a socket in a temp dir, and ztunnel stand-ins on demand. Everything it makes
// is pushed onto `cleanups` (run in reverse by the test's afterEach).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NodeDataplane, type NodeDataplaneOptions } from '../../lib/dataplane/node.js';
import { buildNode } from '../../lib/demo/topology.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';

export async function simNode(
  tag: string,
  pods: number,
  cleanups: Array<() => unknown>,
  opts: Partial<Pick<NodeDataplaneOptions, 'zdsAckTimeoutMs'>> = {},
) {
  const node = await buildNode({ prefix: `pwt-${process.pid}-${tag}-`, pods });
  cleanups.push(() => node.teardown());
  const dir = mkdtempSync(join(tmpdir(), 'pwt-zds-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const zdsPath = join(dir, 'ztunnel.sock');
  const agent = await NodeDataplane.start({ host: node.node, backend: 'nftables', zdsPath, ...opts });
  cleanups.push(() => agent.close());
  /** A ztunnel stand-in connected to the node's ZDS socket, once it has the snapshot. */
  const newPeer = async () => {
    const peer = new ZtunnelPeer({ path: zdsPath, backoffMaxMs: 100, listeners: false }).start();
    cleanups.push(() => peer.stop());
    await peer.waitFor((p) => p.snapshotReceived);
    return peer;
  };
  return { node, agent, zdsPath, newPeer };
}
