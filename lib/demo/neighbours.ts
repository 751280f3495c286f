// Static neighbour entries for the simulated node. The kernel's neighbour
// tables have machine-wide size thresholds (gc_thresh3, 1024 by default and
// only settable on the host), so a node with hundreds of pods on one bridge
// overflows them and connections fail with EHOSTUNREACH. Permanent entries
// are exempt from those thresholds; pinning the ones the demo's traffic needs
// keeps any pod count working without touching the host's settings.
import type { Netns } from '../net/netns/netns.js';
import { mapLimit } from '../util/limit.js';
import { BRIDGE, NODE_V4, NODE_V6, type DemoPod } from './topology.js';

interface Endpoint {
  pod: DemoPod;
  ns: Netns;
  mac: string;
}

async function macOf(ns: Netns, dev: string): Promise<string> {
  const link = await (await ns.netlink()).links.get(dev);
  if (!link.address) throw new Error(`${dev} has no link-layer address`);
  return link.address;
}

/**
 * Pins, for every pod: the gateway (bridge) in the pod, the pod in the node
 * and in the external client, the external client in the pod, and the next
 * and previous pods (the demo's pod-to-pod traffic and its replies) in the
 * pod. `ipv6` adds the v6 twins.
 */
export async function pinNeighbours(node: Netns, pods: Array<{ pod: DemoPod; ns: Netns }>, external: { pod: DemoPod; ns: Netns },
  ipv6: boolean): Promise<void> {
  const bridgeMac = await macOf(node, BRIDGE);
  const eps: Endpoint[] = await mapLimit(pods, 16, async (p) => ({ ...p, mac: await macOf(p.ns, 'eth0') }));
  const ext: Endpoint = { ...external, mac: await macOf(external.ns, 'eth0') };
  const pin = async (ns: Netns, dev: string, target: Endpoint | { ip4: string; ip6: string; mac: string }) => {
    const nl = await ns.netlink();
    const t = 'pod' in target ? { ip4: target.pod.ip4, ip6: target.pod.ip6, mac: target.mac } : target;
    await nl.neigh.replace({ dev, address: t.ip4, lladdr: t.mac });
    if (ipv6) await nl.neigh.replace({ dev, address: t.ip6, lladdr: t.mac });
  };
  const gateway = { ip4: NODE_V4, ip6: NODE_V6, mac: bridgeMac };
  await pin(ext.ns, 'eth0', gateway);
  await mapLimit(eps, 16, async (ep, i) => {
    await pin(ep.ns, 'eth0', gateway);
    await pin(ep.ns, 'eth0', ext);
    // Pod-to-pod traffic goes to the next pod; its replies come back from there.
    await pin(ep.ns, 'eth0', eps[(i + 1) % eps.length]!);
    await pin(ep.ns, 'eth0', eps[(i + eps.length - 1) % eps.length]!);
    await pin(node, BRIDGE, ep);
    await pin(ext.ns, 'eth0', ep);
  });
}
