// A simulated Kubernetes node for agent tests, with the test playing the
// kubelet: a `pwt-` node netns (bridge + forwarding, as the demo builds it),
// pods as `pwt-` netns wired to it, each with a Pod object bound to the node
// and made Running with its IPs through pods/status, and a proc root the
// agent scans (`<pid>/ns/net` → the pod's netns, `<pid>/cgroup` carrying
// the pod UID the way kubelet's cgroup paths do, `1/ns/net` → the node).
// Nothing touches the host: the agent enters the node netns through
// `<proc root>/1/ns/net` (ALLOW_SWITCH_TO_HOST_NS), everything else lives
// in a temp dir removed at teardown.
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { parseAgentConfig, type AgentConfig } from '../../lib/agent/config.js';
import { startApp } from '../../lib/demo/app.js';
import { createNode, createPod as wirePod, describePod, removeNetns, NODE_V4, type DemoPod } from '../../lib/demo/topology.js';
import { patchPodStatus } from '../../lib/kube/pods.js';
import type { KubeClient } from '../../lib/kube/client.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { adminClient, createPod, deletePodNow, kubeEnv } from './kube.js';
import { agentEnv, freePort } from './agent-env.js';

export interface TestPod extends DemoPod {
  namespace: string;
  /** The Pod object as the API server returned it after the status patch. */
  object: V1Pod;
  /** The fake pid of its process in the proc root. */
  pid: number;
}

let seq = 0;

export { freePort };

export class AgentTestNode {
  /** Kubernetes node name (pods are bound to it) and netns prefix. */
  readonly name: string;
  readonly prefix: string;
  readonly dir: string;
  readonly procRoot: string;
  readonly runDir: string;
  readonly zdsPath: string;
  readonly pods = new Map<string, TestPod>();
  private nextIndex = 0;
  private app: Server | undefined;

  private constructor(readonly node: Netns, readonly admin: KubeClient, name: string, prefix: string, dir: string) {
    this.name = name;
    this.prefix = prefix;
    this.dir = dir;
    this.procRoot = join(dir, 'proc');
    this.runDir = join(dir, 'run');
    this.zdsPath = join(dir, 'zds', 'ztunnel.sock');
  }

  /** `admin`: the control plane's admin client (default: the shared test control plane's). */
  static async create(opts: { admin?: KubeClient } = {}): Promise<AgentTestNode> {
    if (!opts.admin) kubeEnv();
    const n = ++seq;
    const prefix = `pwt-${process.pid}-a${n}-`;
    const name = `pwt-${process.pid}-a${n}`;
    const dir = mkdtempSync(join(tmpdir(), `${prefix}`));
    try {
      const { node } = await createNode(prefix);
      const t = new AgentTestNode(node, opts.admin ?? adminClient(), name, prefix, dir);
      mkdirSync(join(t.procRoot, '1', 'ns'), { recursive: true });
      symlinkSync(`/run/netns/${prefix}node`, join(t.procRoot, '1', 'ns', 'net'));
      writeFileSync(join(t.procRoot, '1', 'cgroup'), '0::/init.scope\n');
      writeFileSync(join(t.procRoot, '1', 'stat'), '1 (systemd) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n');
      // The node's "app": what a pod reaches directly when it is not redirected.
      t.app = await startApp(node, 'node');
      return t;
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      await removeNetns(`${prefix}node`);
      throw err;
    }
  }

  /** The node's CNI config dir (a bridge conflist, as a primary CNI would write) and bin dir, for the installer. */
  get cniNetDir(): string {
    return join(this.dir, 'cni', 'net.d');
  }

  get cniBinDir(): string {
    return join(this.dir, 'cni', 'bin');
  }

  /** The agent's environment for this node (every port and path its own, the installer's too). */
  async env(extra: Record<string, string> = {}): Promise<Record<string, string>> {
    mkdirSync(this.cniBinDir, { recursive: true });
    mkdirSync(this.cniNetDir, { recursive: true });
    const primary = join(this.cniNetDir, '10-bridge.conflist');
    if (!existsSync(primary)) {
      writeFileSync(primary, `${JSON.stringify({ cniVersion: '1.0.0', name: 'k8s-pod-network', plugins: [{ type: 'bridge', bridge: 'pwbr0', ipam: { type: 'host-local', subnet: '10.244.0.0/16' } }] }, null, 2)}\n`);
    }
    return agentEnv(this, { MOUNTED_CNI_NET_DIR: this.cniNetDir, CNI_BIN_TARGET_DIRS: this.cniBinDir, ...extra });
  }

  async config(extra: Record<string, string> = {}, argv: string[] = []): Promise<AgentConfig> {
    return parseAgentConfig(await this.env(extra), argv);
  }

  /** The netns and proc entry of a pod, without the Pod object (what the runtime makes). */
  async wire(): Promise<DemoPod & { pid: number }> {
    const i = this.nextIndex++;
    const d = describePod(this.prefix, i);
    await wirePod(this.node, d);
    return { ...d, pid: 1000 + i };
  }

  /** The proc entry that maps the pod's UID to its netns (a sandbox process as the kubelet's cgroups name it). */
  addProcEntry(pid: number, uid: string, netnsPath: string): void {
    const dir = join(this.procRoot, String(pid));
    mkdirSync(join(dir, 'ns'), { recursive: true });
    symlinkSync(netnsPath, join(dir, 'ns', 'net'));
    const slice = `kubepods-besteffort-pod${uid.replace(/-/g, '_')}.slice`;
    writeFileSync(join(dir, 'cgroup'), `0::/kubepods.slice/kubepods-besteffort.slice/${slice}/cri-containerd-${'ab'.repeat(32)}.scope\n`);
    writeFileSync(join(dir, 'stat'), `${pid} (pause) S 1 ${pid} ${pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 ${1000 + pid} 0 0\n`);
  }

  removeProcEntry(pid: number): void {
    rmSync(join(this.procRoot, String(pid)), { recursive: true, force: true });
  }

  /**
   * A running pod: netns + veth, Pod bound to this node, status Running with its IPs, proc entry
   * (`procEntry: false`: none, so no /proc scan finds its netns until addProcEntry).
   */
  async addPod(namespace: string, name: string, labels: Record<string, string> = {}, opts: { procEntry?: boolean } = {}): Promise<TestPod> {
    const w = await this.wire();
    const created = await createPod(this.admin, namespace, name, this.name, labels);
    // As on a node: the sandbox's process exists before the kubelet reports the pod Running.
    if (opts.procEntry !== false) this.addProcEntry(w.pid, created.metadata!.uid!, w.netnsPath);
    let object: V1Pod;
    try {
      object = await patchPodStatus(this.admin, { namespace, name }, {
        status: { phase: 'Running', podIP: w.ip4, podIPs: [{ ip: w.ip4 }, { ip: w.ip6 }] },
      });
    } catch (err) {
      this.removeProcEntry(w.pid);
      throw err;
    }
    const pod: TestPod = { ...w, uid: object.metadata!.uid!, name, namespace, object };
    this.pods.set(`${namespace}/${name}`, pod);
    return pod;
  }

  /** The pod is gone as the kubelet would make it go: Pod deleted, process and netns gone. */
  async removePod(pod: TestPod): Promise<void> {
    await deletePodNow(this.admin, pod.namespace, pod.name).catch(() => undefined);
    this.removeProcEntry(pod.pid);
    await removeNetns(pod.netnsName);
    this.pods.delete(`${pod.namespace}/${pod.name}`);
  }

  /** Opens a pod's netns (the caller closes it). */
  openPod(pod: DemoPod): Netns {
    return Netns.open(pod.netnsPath);
  }

  async teardown(): Promise<void> {
    await new Promise<void>((resolve) => (this.app ? this.app.close(() => resolve()) : resolve()));
    for (const p of [...this.pods.values()]) await this.removePod(p);
    for (let i = 0; i < this.nextIndex; i++) await removeNetns(describePod(this.prefix, i).netnsName);
    this.node.close();
    await removeNetns(`${this.prefix}node`);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export const NODE_APP = { host: NODE_V4, port: 8080 } as const;

/** One HTTP request over a unix socket (what the CNI plugin does to the agent). */
export function unixRequest(socketPath: string, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, headers: body === undefined ? {} : { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => { data += d; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('request timed out')));
    req.end(body);
  });
}
