// The ambient controller over a real node dataplane: a demo node (pwt- netns
// for the node and its pods, real in-pod rules and probe set), the ZDS server
// with the ztunnel-like peer, and a real kube-apiserver with Running pods
// bound to the node. The controller's dataplane adapter is the agent's
// (enrolled: cached with a live netns; held: any entry).
import type { V1Pod } from '@kubernetes/client-node';
import { AmbientController, REDIRECTION_ANNOTATION, type DataplaneLike } from '../../lib/ambient/controller.js';
import { NodeDataplane } from '../../lib/dataplane/node.js';
import {  type DemoNode, type DemoPod } from '../../lib/demo/topology.js';
import { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/enablement.js';
import type { SelectionPolicy } from '../../lib/mesh/decision.js';
import { patchPodStatus, podIps } from '../../lib/kube/pods.js';
import { redirectionState } from '../helpers/netns-state.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { adminClient, createPod, freshNamespace, until, within } from '../helpers/kube.js';
import { simNode } from '../helpers/sim-node.js';

export const policy: SelectionPolicy = {
  selectors: compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS),
  excludeNamespaces: new Set(['kube-system']),
  systemNamespace: 'istio-system',
};

export function dataplaneLike(dp: NodeDataplane['dataplane']): DataplaneLike {
  return {
    enroll: (pod, o) => dp.enroll(pod, o),
    unenroll: (pod, o) => dp.unenroll(pod, o),
    enrolled: (uid) => {
      const e = dp.cache.get(uid);
      return e && !e.leaving && e.netns && !e.netns.released ? e.pod : undefined;
    },
    held: (uid) => dp.cache.get(uid)?.pod,
  };
}

export interface MeshNode {
  node: DemoNode;
  agent: NodeDataplane;
  peer: ZtunnelPeer;
  ctl: AmbientController;
  /** The namespace labelled ambient, and one without the label. */
  ambientNs: string;
  plainNs: string;
  /** Pod netns paths the controller's resolver finds, by pod name (delete one: its sandbox is gone). */
  sandboxes: Map<string, string>;
  /** Creates demo pod i as a Running pod named app-i in `ns`. */
  runningPod(i: number, ns: string): Promise<V1Pod>;
  /** nft ruleset, policy rules and routes of demo pod i (counters stripped). */
  podState(i: number): Promise<string>;
  annotation(ns: string, name: string): Promise<string | undefined>;
  /** A pod's lines in the peer's log, as `type:response`. */
  peerLog(uid: string): string[];
  /**
   * The pod's log once it has `n` lines: the peer logs a request after its
   * ack was sent, so the agent may have the ack before the line is there.
   */
  peerLogged(uid: string, n: number): Promise<string[]>;
  cleanup(): Promise<void>;
}

let runs = 0;

/** Pod i created Running in the ambient namespace, enrolled by the controller and settled. */
export async function enrolledPod(m: MeshNode, i: number) {
  const pod = await m.runningPod(i, m.ambientNs);
  const uid = pod.metadata!.uid!;
  const name = pod.metadata!.name!;
  await until(`${name} enrolled and annotated`, async () => m.peerLog(uid).length === 1 && (await m.annotation(m.ambientNs, name)) === 'enabled' && !m.ctl.busy(pod));
  return { pod, uid, name, info: { uid, name, namespace: m.ambientNs, ips: podIps(pod) } };
}

export async function meshNode(opts: { pods: number; adapt?: (dp: DataplaneLike) => DataplaneLike }): Promise<MeshNode> {
  const cleanups: Array<() => Promise<void> | void> = [];
  const cleanup = async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn();
  };
  try {
    const admin = adminClient();
    const { node, agent, newPeer } = await simNode(`mc${++runs}`, opts.pods, cleanups);
    const peer = await newPeer();
    const ambientNs = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
    const plainNs = await freshNamespace(admin);
    const sandboxes = new Map<string, string>();
    const base = dataplaneLike(agent.dataplane);
    const ctl = new AmbientController({
      client: admin, nodeName: node.nodeName, policy, dataplane: opts.adapt ? opts.adapt(base) : base,
      resolveNetns: (p) => sandboxes.get(p.metadata?.name ?? ''),
    });
    cleanups.push(() => ctl.stop());
    await within('controller start', ctl.start(), 15_000);
    const demo = (i: number): DemoPod => node.pods[i]!;
    const peerLog = (uid: string) => peer.log.filter((e) => e.uid === uid).map((e) => `${e.type}:${e.response ?? '-'}`);
    return {
      node, agent, peer, ctl, ambientNs, plainNs, sandboxes,
      runningPod: async (i, ns) => {
        const p = demo(i);
        sandboxes.set(p.name, p.netnsPath);
        await createPod(admin, ns, p.name, node.nodeName);
        return patchPodStatus(admin, { namespace: ns, name: p.name }, { status: { phase: 'Running', podIP: p.ip4, podIPs: [{ ip: p.ip4 }] } });
      },
      podState: (i) => redirectionState(demo(i).netnsPath),
      annotation: async (ns, name) => (await admin.core.readNamespacedPod({ namespace: ns, name })).metadata?.annotations?.[REDIRECTION_ANNOTATION],
      peerLog,
      peerLogged: async (uid, n) => {
        await peer.waitFor(() => peerLog(uid).length >= n);
        return peerLog(uid);
      },
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
