// A simulated node built from network namespaces: a "node" netns with a
// bridge, and N pod namespaces joined to it by veth pairs, dual stack, with
// default routes via the bridge. Nothing is created in the machine's own
// netns; teardown removes every namespace (and with it every link).
import { rmSync } from 'node:fs';
import { Netns } from '../net/netns/netns.js';
import { mapLimit } from '../util/limit.js';
import { createPodWithCni } from './cni.js';
import { ipamDir } from './leftovers.js';

export const BRIDGE = 'pwbr0';
export const NODE_V4 = '10.244.0.1';
export const NODE_V6 = 'fd00:244::1';

export interface DemoPod {
  index: number;
  /** Kubernetes-style pod UID. */
  uid: string;
  name: string;
  /** netns name under /run/netns. */
  netnsName: string;
  netnsPath: string;
  ip4: string;
  ip6: string;
  /** Host-side veth name in the node netns. */
  hostVeth: string;
}

export interface DemoNode {
  prefix: string;
  node: Netns;
  nodeName: string;
  pods: DemoPod[];
  /** Removes every namespace this node created; safe to call twice. */
  teardown(): Promise<void>;
}

export function podUid(i: number): string {
  return `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
}

/** Pod i's addresses: 10.244.0.0/16 and fd00:244::/64, skipping the gateway. */
export function podAddresses(i: number): { ip4: string; ip6: string } {
  const n = i + 2;
  return { ip4: `10.244.${n >> 8}.${n & 255}`, ip6: `fd00:244::${n.toString(16)}` };
}

export function describePod(prefix: string, i: number): DemoPod {
  const netnsName = `${prefix}pod-${i}`;
  return {
    index: i, uid: podUid(i), name: `app-${i}`, netnsName, netnsPath: `/run/netns/${netnsName}`,
    ...podAddresses(i), hostVeth: `pwv${i}`,
  };
}

/**
 * Creates the node netns: lo up, forwarding on, and (unless the CNI bridge
 * plugin will make it) the bridge with the gateway addresses.
 */
export async function createNode(prefix: string, opts: { bridge?: boolean } = {}): Promise<{ node: Netns; nodeName: string }> {
  const nodeName = `${prefix}node`;
  const node = await Netns.create(nodeName);
  try {
    const nl = await node.netlink();
    await nl.links.set('lo', { up: true });
    await node.sysctl.set('net.ipv6.conf.default.accept_dad', 0);
    if (opts.bridge !== false) {
      await nl.links.add({ kind: 'bridge', name: BRIDGE });
      await nl.addrs.add(BRIDGE, `${NODE_V4}/16`);
      await nl.addrs.add(BRIDGE, `${NODE_V6}/64`, { noDad: true });
      await nl.links.set(BRIDGE, { up: true });
    }
    await node.sysctl.set('net.ipv4.ip_forward', 1);
    await node.sysctl.set('net.ipv6.conf.all.forwarding', 1);
    return { node, nodeName };
  } catch (err) {
    node.close();
    await removeNetns(nodeName);
    throw err;
  }
}

/** Creates one pod netns wired to the node's bridge (what the bridge CNI plugin would do). */
export async function createPod(node: Netns, pod: DemoPod): Promise<void> {
  const ns = await Netns.create(pod.netnsName);
  try {
    const nodeNl = await node.netlink();
    await nodeNl.links.add({ kind: 'veth', name: pod.hostVeth, peer: { name: 'eth0', netns: ns } });
    await nodeNl.links.set(pod.hostVeth, { master: BRIDGE, up: true });
    const nl = await ns.netlink();
    await nl.links.set('lo', { up: true });
    await nl.addrs.add('eth0', `${pod.ip4}/16`);
    await nl.addrs.add('eth0', `${pod.ip6}/64`, { noDad: true });
    await nl.links.set('eth0', { up: true });
    // onlink: no wait for the kernel's (asynchronous) IPv6 prefix route before the gateway is accepted.
    await nl.routes.add({ dst: 'default', gateway: NODE_V4, dev: 'eth0', onlink: true });
    await nl.routes.add({ dst: 'default', gateway: NODE_V6, dev: 'eth0', onlink: true });
  } finally {
    ns.close();
  }
}

/** An unenrolled client attached to the bridge: traffic from outside the mesh. */
export function describeExternal(prefix: string): DemoPod {
  return {
    index: -1, uid: 'external', name: 'external', netnsName: `${prefix}ext`, netnsPath: `/run/netns/${prefix}ext`,
    ip4: '10.244.255.250', ip6: 'fd00:244::fffa', hostVeth: 'pwvext',
  };
}

/** Removes a namespace by name if it exists. */
export async function removeNetns(name: string): Promise<void> {
  try {
    await Netns.remove(name);
  } catch {
    // already gone
  }
}

/** Builds the whole node; on failure removes what it made and rethrows. */
export async function buildNode(opts: {
  prefix: string;
  pods: number;
  concurrency?: number;
  /** Wire pods with the real bridge + host-local CNI plugins (IPAM state under `cniDataDir`). */
  cni?: boolean;
  cniDataDir?: string;
  onPod?: (pod: DemoPod) => void;
}): Promise<DemoNode> {
  const { node, nodeName } = await createNode(opts.prefix, { bridge: !opts.cni });
  const pods = Array.from({ length: opts.pods }, (_, i) => describePod(opts.prefix, i));
  const dataDir = opts.cniDataDir ?? ipamDir(opts.prefix);
  let tornDown = false;
  const teardown = async () => {
    if (tornDown) return;
    tornDown = true;
    for (const p of pods) await removeNetns(p.netnsName);
    node.close();
    await removeNetns(nodeName);
    if (opts.cni) rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    // The first CNI ADD creates the bridge; run it alone so the others find it.
    const first = opts.cni ? 1 : 0;
    const wire = async (p: DemoPod) => {
      if (opts.cni) {
        const ns = await Netns.create(p.netnsName);
        try {
          await createPodWithCni(node, ns, p, dataDir);
        } finally {
          ns.close();
        }
      } else {
        await createPod(node, p);
      }
      opts.onPod?.(p);
    };
    for (const p of pods.slice(0, first)) await wire(p);
    await mapLimit(pods.slice(first), opts.concurrency ?? 8, wire);
  } catch (err) {
    await teardown();
    throw err;
  }
  return { prefix: opts.prefix, node, nodeName, pods, teardown };
}
