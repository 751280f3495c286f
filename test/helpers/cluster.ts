// The real cluster for the end-to-end tests (scripts/kube/cluster.mjs): a control plane of its
// own with a controller-manager and a scheduler, and real kubelet nodes, with the images the
// tests run imported into every node's runtime: pause, busybox (the apps) and podwire's own
// image (`npm run image`, rebuilt only when its inputs changed). Per node, a ztunnel stand-in
// (`podwire ztunnel-sim` in a process of its own: test/helpers/ztunnel-process.ts) holds the node's
// ZDS socket, as ztunnel's DaemonSet would.
import { mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCluster, type Cluster } from '../../scripts/kube/cluster.mjs';
import { clusterImages } from '../../scripts/kube/images.mjs';
import type { KubeNode } from '../../scripts/kube/node.mjs';
import { ZtunnelProcess } from './ztunnel-process.js';

export { PODWIRE_IMAGE } from '../../scripts/kube/images.mjs';
export { BUSYBOX_REF } from './oci-image.js';

export interface E2eCluster extends Cluster {
  /** One ztunnel stand-in per node, by node name. */
  ztunnels: Map<string, ZtunnelProcess>;
  /** kubectl's stdout, parsed (`-o json` is added). */
  getJson(args: string[]): any;
  /** Every process of the node whose cgroup path names pod `uid`; the first is the sandbox's (lowest pid). */
  podPids(uid: string): number[];
  /** `/proc/<pid>/ns/net` of the pod's sandbox, as the host opens it. */
  podNetnsPath(uid: string): string;
  /** The node the pod runs on. */
  nodeOf(nodeName: string): KubeNode;
  /** What a person looks at when a step failed: pods, the newest events, the agents' and kubelets' log tails. */
  diagnostics(): string;
}

/** Starts the cluster (`nodes` kubelets) with the images imported and a ztunnel stand-in per node. */
export async function startE2eCluster(opts: { nodes?: number } = {}): Promise<E2eCluster> {
  const { images, sandboxImage } = clusterImages();
  const dir = mkdtempSync(join(tmpdir(), `pwt-cluster-${process.pid}-`));
  const cluster = await startCluster({
    dir, nodes: opts.nodes ?? 2, images, sandboxImage, log: (m: string) => process.stderr.write(`${m}\n`),
  });
  const ztunnels = new Map<string, ZtunnelProcess>();
  for (const n of cluster.nodes) {
    ztunnels.set(n.name, new ZtunnelProcess(join(n.dir, 'ztunnel', 'ztunnel.sock'), join(n.dir, 'logs', 'ztunnel-sim.jsonl')).start());
  }
  const stop = cluster.stop;
  const e2e: E2eCluster = {
    ...cluster,
    ztunnels,
    getJson(args) {
      return JSON.parse(cluster.kubectl([...args, '-o', 'json']).stdout);
    },
    podPids(uid) {
      const mark = `pod${uid}`;
      const underscored = `pod${uid.replace(/-/g, '_')}`;
      const out: number[] = [];
      for (const e of readdirSync('/proc')) {
        if (!/^\d+$/.test(e)) continue;
        try {
          const cg = readFileSync(`/proc/${e}/cgroup`, 'utf8');
          if (cg.includes(`/${mark}/`) || cg.includes(`/${underscored}/`)) out.push(Number(e));
        } catch {
          // gone
        }
      }
      return out.sort((a, b) => a - b);
    },
    podNetnsPath(uid) {
      const pids = e2e.podPids(uid);
      if (!pids.length) throw new Error(`no process of pod ${uid} on any node`);
      const path = `/proc/${pids[0]}/ns/net`;
      readlinkSync(path);
      return path;
    },
    diagnostics() {
      const kubectl = (args: string[]) => cluster.kubectl(args, { allowFail: true }).stdout;
      const out: string[] = [kubectl(['get', 'pods', '-A', '-o', 'wide'])];
      out.push(kubectl(['get', 'events', '-A', '--sort-by=.lastTimestamp']).split('\n').slice(-40).join('\n'));
      for (const n of cluster.nodes) {
        const logs = join(n.dir, 'pod-logs');
        for (const d of readdirSync(logs).filter((x) => x.startsWith('istio-system_istio-cni-node'))) {
          try {
            for (const f of readdirSync(join(logs, d, 'install-cni'))) {
              out.push(`--- ${n.name} ${d} ${f}\n${readFileSync(join(logs, d, 'install-cni', f), 'utf8').split('\n').slice(-40).join('\n')}`);
            }
          } catch {
            // the pod's logs went with it
          }
        }
        out.push(`--- ${n.name} kubelet\n${n.log('kubelet.log', 30)}`);
      }
      return out.join('\n');
    },
    nodeOf(nodeName) {
      const n = cluster.nodes.find((x) => x.name === nodeName);
      if (!n) throw new Error(`no node ${nodeName}`);
      return n;
    },
    async stop() {
      for (const z of ztunnels.values()) await z.stop().catch(() => undefined);
      await stop();
    },
  };
  return e2e;
}
