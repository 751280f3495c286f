// The plugin path in a whole agent: real control plane, real netns, real
// nftables and a ztunnel-like peer, requests over the agent's socket as
// podwire-cni sends them. CNI work waits for the startup snapshot (503
// before), a pod recreated under its name is found by its UID, the ADD
// deadline cancels the enrollment and leaves nothing behind, and the node's
// netns is refused as a pod's on every path.
import { execFileSync } from 'node:child_process';
import { request } from 'node:http';
import { afterEach, expect, it } from 'vitest';
import { PatchStrategy } from '@kubernetes/client-node';
import { Agent, type AgentOptions } from '../../lib/agent/agent.js';
import { createLogging } from '../../lib/util/log.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode, unixRequest } from '../helpers/agent-node.js';
import { adminClient, agentClient, createPod, describeKube, freshNamespace, removeNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

async function setup(opts: { namespaceLabels?: Record<string, string>; agent?: Partial<AgentOptions> } = {}) {
  const node = await AgentTestNode.create();
  cleanups.push(() => node.teardown());
  const admin = adminClient();
  const ns = await freshNamespace(admin, opts.namespaceLabels ?? { 'istio.io/dataplane-mode': 'ambient' });
  cleanups.push(() => removeNamespace(admin, ns));
  const agent = new Agent({ config: await node.config(), client: agentClient(), logging: createLogging({ levels: { default: 'none' }, json: true }), hostRuleRetryMs: 100, ...opts.agent });
  cleanups.push(() => agent.stop({ cleanup: true }));
  const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 200 });
  cleanups.push(() => peer.stop());
  return { node, ns, agent, peer, admin };
}

/** One podwire-cni request on POST /v1/cni. */
async function shim(node: AgentTestNode, command: string, env: Record<string, string>, config: Record<string, unknown>): Promise<{ status: number; exit: string | undefined; out: string }> {
  const body = JSON.stringify({ command, env: { CNI_COMMAND: command, CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin', ...env }, config: JSON.stringify(config) });
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: `${node.runDir}/pluginevent.sock`, method: 'POST', path: '/v1/cni' }, (res) => {
      let out = '';
      res.setEncoding('utf8').on('data', (d: string) => { out += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, exit: res.headers['x-podwire-cni-exit'] as string | undefined, out }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const netconf = (prevIps: string[]) => ({
  cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'istio-cni', ambient_enabled: true, exclude_namespaces: ['kube-system'], pod_namespace: 'istio-system',
  'cni.dev/valid-attachments': [],
  prevResult: { cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: prevIps.map((a) => ({ interface: 0, address: a })) },
});
const cniCode = (r: { exit: string | undefined; out: string }) => (r.exit === '0' ? 0 : (JSON.parse(r.out) as { code: number }).code);

describeKube('the plugin path in the agent', () => {
  it.skipIf(!privileged('nft'))('until the startup snapshot is restored, DEL, CHECK, GC and ADD are answered 503 (the shim retries or queues), not a silent success', async () => {
    let release!: () => void;
    let reached = false;
    const gate = new Promise<void>((r) => { release = r; });
    const { node, ns, agent, peer } = await setup({ agent: { beforeSnapshot: async () => { reached = true; await gate; } } });
    cleanups.push(async () => release());  // a failed assertion must not leave the start (and so stop) waiting
    const first = new Agent({ config: await node.config(), client: agentClient(), logging: createLogging({ levels: { default: 'none' }, json: true }), hostRuleRetryMs: 100 });
    cleanups.push(() => first.stop({ cleanup: true }));
    // A pod an earlier agent enrolled: the restarted agent knows it only once its snapshot is restored.
    const pod = await node.addPod(ns, 'running');
    await within('first agent start', first.start(), 30_000);
    peer.start();
    await until('enrolled by the first agent', () => first.node?.dataplane.cache.get(pod.uid)?.netns);
    await until('annotated', async () => (await adminClient().core.readNamespacedPod({ namespace: ns, name: 'running' })).metadata?.annotations?.['ambient.istio.io/redirection'] === 'enabled');
    await first.stop({ cleanup: false });

    const started = agent.start();
    started.catch(() => undefined);
    await until('informers synced, snapshot held', () => reached && agent.readiness.has('informersSynced'), 30_000);
    const env = { CNI_CONTAINERID: 'sandbox-1', CNI_NETNS: pod.netnsPath, CNI_ARGS: `K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=running;K8S_POD_UID=${pod.uid}` };
    const config = netconf([`${pod.ip4}/16`]);
    for (const command of ['DEL', 'CHECK', 'GC', 'ADD']) {
      const r = await shim(node, command, env, config);
      expect([command, r.status]).toEqual([command, 503]);
    }
    const status = await shim(node, 'STATUS', {}, config);
    expect([status.status, cniCode(status)]).toEqual([200, 50]);
    const cmdadd = await unixRequest(`${node.runDir}/pluginevent.sock`, 'POST', '/cmdadd',
      `{"Netns":"${pod.netnsPath}","PodName":"running","PodNamespace":"${ns}","IPs":[{"Interface":0,"Address":{"IP":"${pod.ip4}","Mask":"//8AAA=="},"Gateway":null}]}`);
    expect(cmdadd.status).toBe(500);
    expect(cmdadd.body).toContain('startup snapshot not restored');

    release();
    await within('agent start', started, 30_000);
    expect(agent.node!.dataplane.cache.get(pod.uid)?.netns?.isAt(pod.netnsPath)).toBe(true);
    await until('ztunnel connected', () => agent.node?.zds?.server.connectionCount === 1);
    const dels = () => peer.log.filter((e) => e.type === 'del' && e.uid === pod.uid).length;
    expect(dels()).toBe(0);
    // Now the same DEL finds what it deletes: ztunnel is told before the answer.
    const del = await shim(node, 'DEL', env, config);
    expect([del.status, del.exit, del.out]).toEqual([200, '0', '']);
    expect(dels()).toBe(1);
  }, 90_000);

  it.skipIf(!privileged('nft'))('a pod recreated under its name while the old object is still Terminating in the cache: ADD with the new UID enrolls the new pod, never passes it unmeshed', async () => {
    const { node, ns, agent, peer, admin } = await setup();
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('ztunnel connected', () => agent.node?.zds?.server.connectionCount === 1);
    const name = 'web-0';
    const body = (uidLabel: string) => ({ metadata: { name, labels: { gen: uidLabel }, finalizers: ['podwire.test/hold'] }, spec: { nodeName: node.name, terminationGracePeriodSeconds: 0, containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } });
    const unhold = () => admin.call({ verb: 'patch', resource: 'pods', namespace: ns, name },
      (o) => admin.core.patchNamespacedPod({ namespace: ns, name, body: { metadata: { finalizers: null } } }, o), { contentType: PatchStrategy.MergePatch });
    cleanups.push(() => unhold().catch(() => undefined));
    const old = await admin.core.createNamespacedPod({ namespace: ns, body: body('1') });
    // StatefulSet-like: the old pod is deleted and held Terminating by its finalizer, as the agent's cache last saw it.
    await admin.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
    await until('the cache has the old pod Terminating', () => agent.controller!.pods.get(name, ns)?.metadata?.deletionTimestamp);
    agent.controller!.pods._pauseForTest();
    cleanups.push(async () => agent.controller?.pods._resumeForTest());
    await unhold();
    await until('old pod gone from the API', async () => admin.core.readNamespacedPod({ namespace: ns, name }).then(() => false, () => true));
    const created = await admin.core.createNamespacedPod({ namespace: ns, body: { ...body('2'), metadata: { name, labels: { gen: '2' } } } });
    const uid = created.metadata!.uid!;
    expect(uid).not.toBe(old.metadata!.uid);
    expect(agent.controller!.pods.get(name, ns)?.metadata?.uid).toBe(old.metadata!.uid);  // the stale object is what the cache holds
    const w = await node.wire();
    const r = await shim(node, 'ADD', { CNI_CONTAINERID: 'sandbox-new', CNI_NETNS: w.netnsPath, CNI_ARGS: `K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${name};K8S_POD_UID=${uid}` },
      netconf([`${w.ip4}/16`, `${w.ip6}/64`]));
    expect([r.status, r.exit]).toEqual([200, '0']);
    expect(agent.node!.dataplane.cache.get(uid)?.netns?.isAt(w.netnsPath)).toBe(true);
    expect(peer.active.has(uid)).toBe(true);
    expect(agent.node!.dataplane.cache.has(old.metadata!.uid!)).toBe(false);
    expect(agent.plugin!.attachments.get('sandbox-new')?.uid).toBe(uid);
  }, 60_000);

  it.skipIf(!privileged('nft'))('the ADD deadline cancels the enrollment behind a ztunnel that does not ack: code 11, then nothing enrolled and no attachment', async () => {
    const { node, ns, agent, peer } = await setup({ agent: { cniDeadlineMs: 300 } });
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('ztunnel connected', () => agent.node?.zds?.server.connectionCount === 1);
    const created = await createPod(adminClient(), ns, 'slow', node.name);
    const uid = created.metadata!.uid!;
    await until('pod cached', () => agent.controller!.pods.get('slow', ns));
    const w = await node.wire();
    peer.faults.ackDelayMs = 4_000;  // holds the add well past the 300 ms deadline
    const r = await shim(node, 'ADD', { CNI_CONTAINERID: 'sandbox-slow', CNI_NETNS: w.netnsPath, CNI_ARGS: `K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=slow;K8S_POD_UID=${uid}` },
      netconf([`${w.ip4}/16`]));
    peer.faults.ackDelayMs = 0;  // the undo's del is acked at once
    expect([r.status, cniCode(r)]).toEqual([200, 11]);
    await agent.plugin!.idle();  // the cancelled ADD (and its undo) has finished
    expect(agent.node!.dataplane.cache.has(uid)).toBe(false);
    expect(agent.plugin!.attachments.size).toBe(0);
    await until('ztunnel no longer holds the pod', () => !peer.active.has(uid), 10_000);
  }, 60_000);

  it.skipIf(!privileged('nft'))('the node\'s netns as a pod\'s, by any path to it: refused on /v1/cni (code 103) and /cmdadd (500), the node untouched', async () => {
    const { node, ns, agent, peer } = await setup();
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('ztunnel connected', () => agent.node?.zds?.server.connectionCount === 1);
    const created = await createPod(adminClient(), ns, 'victim', node.name);
    const uid = created.metadata!.uid!;
    await until('pod cached', () => agent.controller!.pods.get('victim', ns));
    const ruleset = () => execFileSync('ip', ['netns', 'exec', `${node.prefix}node`, 'nft', 'list', 'ruleset'], { encoding: 'utf8' });
    const before = ruleset();
    const nodeNs = `/run/netns/${node.prefix}node`;
    for (const path of [nodeNs, `/run/netns/../netns/${node.prefix}node`, `/run/netns/./${node.prefix}node`, `${node.procRoot}/1/ns/net`]) {
      const r = await shim(node, 'ADD', { CNI_CONTAINERID: 'c', CNI_NETNS: path, CNI_ARGS: `K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=victim;K8S_POD_UID=${uid}` }, netconf(['10.244.9.9/16']));
      expect([path, cniCode(r)]).toEqual([path, 103]);
      const c = await unixRequest(`${node.runDir}/pluginevent.sock`, 'POST', '/cmdadd',
        `{"Netns":"${path}","PodName":"victim","PodNamespace":"${ns}","IPs":[{"Interface":0,"Address":{"IP":"10.244.9.9","Mask":"//8AAA=="},"Gateway":null}]}`);
      expect([path, c.status]).toEqual([path, 500]);
      expect(c.body).toContain("the node's netns");
    }
    expect(agent.node!.dataplane.cache.has(uid)).toBe(false);
    expect(peer.active.has(uid)).toBe(false);
    expect(ruleset()).toBe(before);
  }, 60_000);
});
