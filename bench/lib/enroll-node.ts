// The enrollment harness bench/enroll.ts and bench/enroll-stages.ts share: the three paths
// (podwire nftables, podwire iptables, Istio-style iptables exec'd per family), a node of fresh
// pwt- pod netns, ztunnel-sim as its own process acking every add, and idle-CPU settling.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Dataplane } from '../../lib/dataplane/dataplane.js';
import { IpsetProbeSet } from '../../lib/dataplane/probe-set-ipset.js';
import { NodeDataplane } from '../../lib/dataplane/node.js';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { ZdsZtunnel } from '../../lib/dataplane/ztunnel-zds.js';
import { buildNode, type DemoPod } from '../../lib/demo/topology.js';
import type { Netns } from '../../lib/net/netns/netns.js';
import { IstioStyleRules } from './istio-style.js';

export interface Agent {
  dataplane: Dataplane;
  zds: ZdsZtunnel;
  close(): Promise<void>;
}

export interface PathDef {
  label: string;
  start: (host: Netns, sock: string) => Promise<Agent>;
}

const podwire = (backend: 'nftables' | 'iptables') => async (host: Netns, sock: string): Promise<Agent> => {
  const node = await NodeDataplane.start({ host, backend, zdsPath: sock });
  return { dataplane: node.dataplane, zds: node.zds!, close: () => node.close() };
};

// Istio's way for the same node: the ipset probe set, ZDS, and IstioStyleRules per pod.
const istio = async (host: Netns, sock: string): Promise<Agent> => {
  let dp: Dataplane | undefined;
  const zds = new ZdsZtunnel({ path: sock }, () => dp?.snapshot() ?? []).listen();
  dp = new Dataplane({ rules: new IstioStyleRules(), ztunnel: zds, probes: new IpsetProbeSet(await host.netlink(), true) });
  await dp.start();
  const dataplane = dp;
  return { dataplane, zds, close: async () => { await dataplane.close(); await zds.close(); } };
};

export const PATHS: PathDef[] = [
  { label: 'podwire nftables', start: podwire('nftables') },
  { label: 'podwire iptables', start: podwire('iptables') },
  { label: 'Istio-style iptables', start: istio },
];

export const podInfo = (p: DemoPod): PodInfo => ({ uid: p.uid, name: p.name, namespace: 'bench', ips: [p.ip4, p.ip6] });

/** Waits until the CPUs are idle again (namespace teardown runs on in kernel workers), at most 30 s. */
export async function settle(): Promise<void> {
  const busy = () => {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3]! + f[4]!;
    return { idle, total: f.reduce((a, b) => a + b, 0) };
  };
  for (let i = 0; i < 150; i++) {
    const a = busy();
    await new Promise((r) => setTimeout(r, 200));
    const b = busy();
    if ((b.idle - a.idle) / Math.max(1, b.total - a.total) > 0.95) return;
  }
}

/**
 * A node with `pods` fresh pod netns, the path's agent and a ztunnel-sim child connected to it
 * (its pid passed on); runs `fn`, then tears everything down.
 */
export async function withNode<T>(path: PathDef, pods: number, fn: (agent: Agent, pods: DemoPod[], peerPid: number) => Promise<T>): Promise<T> {
  const prefix = `pwt-bench-${process.pid}-`;
  const node = await buildNode({ prefix, pods, concurrency: 8 });
  const sock = `/tmp/pwt-bench-${process.pid}.sock`;
  let agent: Agent | undefined;
  // ztunnel is its own process on a real node: the peer runs in a child, protocol only.
  const cli = fileURLToPath(new URL('../../../bin/podwire.js', import.meta.url));
  let peer: ChildProcess | undefined;
  try {
    await settle();
    agent = await path.start(node.node, sock);
    peer = spawn(process.execPath, [cli, 'ztunnel-sim', '--socket', sock, '--no-listeners'], { stdio: 'ignore' });
    for (let t = 0; agent.zds.server.connections().every((c) => c.state !== 'ready'); t++) {
      if (t > 1000) throw new Error('ztunnel-sim did not connect');
      await new Promise((r) => setTimeout(r, 10));
    }
    global.gc?.();
    return await fn(agent, node.pods, peer.pid!);
  } finally {
    peer?.kill();
    await agent?.close();
    await node.teardown();
  }
}
