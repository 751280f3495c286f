// The node agent, in-process, against the real control plane, real netns,
// real nftables and a ztunnel-like peer with real listeners: a namespace
// label enrolls its running pods (traffic captured on 15001), an opt-out pod
// and an unlabel are honoured, upstream's /cmdadd body enrolls a pod the
// cache does not have yet, the drift check repairs a flushed pod ruleset
// (metric + Event), /readyz flips only when ready, /metrics parses, and stop
// keeps the host rules on upgrade and removes them on uninstall.
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { PatchStrategy } from '@kubernetes/client-node';
import { Agent } from '../../lib/agent/agent.js';
import { tcpProbe, hostPort } from '../../lib/demo/traffic.js';
import { NftProbeSet } from '../../lib/dataplane/probe-set-nft.js';
import { passThrough } from '../../lib/cni/result.js';
import { REDIRECTION_ANNOTATION } from '../../lib/mesh/constants.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode, NODE_APP, unixRequest, type TestPod } from '../helpers/agent-node.js';
import { httpGet } from '../helpers/http.js';
import { adminClient, agentClient, describeKube, freshNamespace, removeNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';
import { parsePrometheusText } from '../helpers/prometheus.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

async function setNamespaceLabel(name: string, value: string | null): Promise<void> {
  const admin = adminClient();
  await admin.call({ verb: 'patch', resource: 'namespaces', name },
    (o) => admin.core.patchNamespace({ name, body: { metadata: { labels: { 'istio.io/dataplane-mode': value } } } }, o),
    { contentType: PatchStrategy.MergePatch });
}

async function annotation(pod: { namespace: string; name: string }): Promise<string | undefined> {
  const p = await adminClient().core.readNamespacedPod({ namespace: pod.namespace, name: pod.name });
  return p.metadata?.annotations?.[REDIRECTION_ANNOTATION];
}

/** Who answers a TCP connection from the pod to the node's app: ztunnel's 15001 (captured) or the app (direct). */
async function outbound(node: AgentTestNode, pod: TestPod): Promise<'captured' | 'direct' | string> {
  const ns = node.openPod(pod);
  try {
    const r = await tcpProbe(ns, NODE_APP.host, NODE_APP.port);
    if (r.by === 'ztunnel' && r.uid === pod.uid && r.port === 15001 && r.origDst === hostPort(NODE_APP.host, NODE_APP.port)) return 'captured';
    if (r.by === 'app') return 'direct';
    return r.line;
  } finally {
    ns.close();
  }
}

async function probeEntries(node: AgentTestNode): Promise<Map<string, string>> {
  return new Map((await new NftProbeSet(node.node, true).list()).map((e) => [e.ip, e.uid]));
}

/** A node, a namespace, an agent and a ztunnel-like peer, all removed after the test. */
async function setup(opts: { env?: Record<string, string>; namespaceLabels?: Record<string, string>; beforeSnapshot?: () => Promise<void>; trimHeap?: () => boolean } = {}) {
  const node = await AgentTestNode.create();
  cleanups.push(() => node.teardown());
  const admin = adminClient();
  const ns = await freshNamespace(admin, opts.namespaceLabels ?? {});
  cleanups.push(() => removeNamespace(admin, ns));
  const config = await node.config(opts.env ?? {});
  const logs: string[] = [];
  const agent = new Agent({
    config,
    client: agentClient(),
    logging: (await import('../../lib/util/log.js')).createLogging({ levels: { default: 'info' }, json: true, sink: { write: (l: string) => logs.push(l) } }),
    hostRuleRetryMs: 100,
    ...(opts.beforeSnapshot ? { beforeSnapshot: opts.beforeSnapshot } : {}),
    ...(opts.trimHeap ? { trimHeap: opts.trimHeap } : {}),
  });
  cleanups.push(() => agent.stop({ cleanup: true }));
  const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 200 });
  cleanups.push(() => peer.stop());
  return { node, ns, agent, peer, config, logs, admin };
}

describeKube('podwire agent (in-process)', () => {
  it.skipIf(!privileged('nft'))('labelling a namespace enrolls its running pods (captured on 15001), honours opt-out, unlabel removes', async () => {
    const { node, ns, agent, peer } = await setup();
    const pods: TestPod[] = [];
    for (let i = 0; i < 20; i++) pods.push(await node.addPod(ns, `app-${i}`));
    const optedOut = await node.addPod(ns, 'opted-out', { 'istio.io/dataplane-mode': 'none' });

    const ready0 = await httpGet({ host: '127.0.0.1', port: agent.config.healthPort }, '/readyz').catch(() => undefined);
    expect(ready0).toBeUndefined();  // not even listening before start()
    await within('agent start', agent.start(), 30_000);
    peer.start();
    expect((await httpGet({ host: '127.0.0.1', port: agent.config.healthPort }, '/readyz')).status).toBe(200);
    expect((await httpGet({ host: '127.0.0.1', port: agent.config.healthPort }, '/healthz')).status).toBe(200);
    await until('ztunnel connected', () => agent.node?.zds?.server.connectionCount === 1);
    // Nothing is enrolled before the label.
    expect(await outbound(node, pods[0]!)).toBe('direct');
    expect(await annotation(pods[0]!)).toBeUndefined();

    await setNamespaceLabel(ns, 'ambient');
    for (const p of pods) await until(`${p.name} annotated enabled`, async () => (await annotation(p)) === 'enabled', 20_000);
    for (const p of pods) expect(await outbound(node, p), p.name).toBe('captured');
    expect(await outbound(node, optedOut)).toBe('direct');
    expect(await annotation(optedOut)).toBeUndefined();
    expect(peer.active.size).toBe(20);
    const entries = await probeEntries(node);
    expect(entries.size).toBe(40);  // v4 + v6 per pod, each owned by its pod
    for (const p of pods) {
      expect(entries.get(p.ip4)).toBe(p.uid);
      expect(entries.get(p.ip6)).toBe(p.uid);
    }

    // /metrics parses and carries Istio's names and podwire's.
    const m = await httpGet({ host: '127.0.0.1', port: agent.config.monitoringPort }, '/metrics');
    expect(m.status).toBe(200);
    const metrics = parsePrometheusText(m.body);
    expect(metrics.get('podwire_pods_enrolled')?.[0]?.value).toBe(20);
    expect(metrics.get('ztunnel_connected')?.[0]?.value).toBe(1);
    expect(metrics.get('nodeagent_reconcile_events_total')!.find((s) => s.labels.type === 'update')!.value).toBeGreaterThan(0);
    expect(metrics.get('podwire_enroll_duration_seconds_count')!.find((s) => s.labels.backend === 'nftables')!.value).toBe(20);
    expect(metrics.get('podwire_zds_acks_total')!.find((s) => s.labels.type === 'add')!.value).toBeGreaterThanOrEqual(20);
    for (const name of ['istio_cni_plugin_requests_total', 'podwire_drift_found_total', 'podwire_informer_restarts_total', 'podwire_zds_nacks_total'])
      expect(metrics.has(name), name).toBe(true);

    await setNamespaceLabel(ns, null);
    for (const p of pods) await until(`${p.name} annotation removed`, async () => (await annotation(p)) === undefined, 20_000);
    for (const p of pods) expect(await outbound(node, p), p.name).toBe('direct');
    await until('ztunnel told', () => peer.active.size === 0);
    expect((await probeEntries(node)).size).toBe(0);
  }, 120_000);

  it.skipIf(!privileged('nft'))('upstream\'s /cmdadd body enrolls a pod the informer cache does not have yet', async () => {
    const { node, ns, agent, peer } = await setup({ namespaceLabels: { 'istio.io/dataplane-mode': 'ambient' } });
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('ztunnel connected', () => agent.node?.zds?.server.connectionCount === 1);
    // The runtime made the sandbox; the Pod exists but the agent's watch is held back, so only the GET finds it.
    agent.controller!.pods._pauseForTest();
    const w = await node.wire();
    const { createPod } = await import('../helpers/kube.js');
    const created = await createPod(adminClient(), ns, 'fresh', node.name);
    const uid = created.metadata!.uid!;
    node.addProcEntry(w.pid, uid, w.netnsPath);
    node.pods.set(`${ns}/fresh`, { ...w, uid, name: 'fresh', namespace: ns, object: created });
    // Byte for byte what istio-cni's plugin sends (spec §2.5): capitalised keys, base64 mask, gateway.
    const body = `{"Netns":"${w.netnsPath}","PodName":"fresh","PodNamespace":"${ns}","IPs":[{"Interface":2,"Address":{"IP":"${w.ip4}","Mask":"//8AAA=="},"Gateway":"10.244.0.1"},{"Interface":2,"Address":{"IP":"${w.ip6}","Mask":"//////////8AAAAAAAAAAA=="},"Gateway":"fd00:244::1"}]}`;
    const t0 = Date.now();
    const r = await unixRequest(`${node.runDir}/pluginevent.sock`, 'POST', '/cmdadd', body);
    expect(r).toEqual({ status: 200, body: '' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(400);  // it waited for the cache first (500 ms), then asked the API server
    agent.controller!.pods._resumeForTest();
    expect(await annotation({ namespace: ns, name: 'fresh' })).toBe('enabled');
    expect(peer.active.has(uid)).toBe(true);
    expect(await outbound(node, node.pods.get(`${ns}/fresh`)!)).toBe('captured');
    expect((await probeEntries(node)).get(w.ip4)).toBe(uid);
    // A pod that is not selected is refused with upstream's message (the sandbox fails; kubelet retries).
    const other = await freshNamespace(adminClient());
    cleanups.push(() => removeNamespace(adminClient(), other));
    await createPod(adminClient(), other, 'plain', node.name);
    const w2 = await node.wire();
    const refused = await unixRequest(`${node.runDir}/pluginevent.sock`, 'POST', '/cmdadd',
      `{"Netns":"${w2.netnsPath}","PodName":"plain","PodNamespace":"${other}","IPs":[{"Interface":2,"Address":{"IP":"${w2.ip4}","Mask":"//8AAA=="},"Gateway":"10.244.0.1"}]}`);
    expect(refused.status).toBe(500);
    expect(refused.body).toContain(`pod ${other}/plain is unexpectedly not eligible for ambient enrollment`);
  }, 60_000);

  it.skipIf(!privileged('nft'))('the drift check finds a flushed pod ruleset and repairs it, with the metric and an Event', async () => {
    const { node, ns, agent, peer } = await setup({ env: { AMBIENT_DRIFT_CHECK_INTERVAL: '1s' }, namespaceLabels: { 'istio.io/dataplane-mode': 'ambient' } });
    const victim = await node.addPod(ns, 'victim');
    const bystander = await node.addPod(ns, 'bystander');
    await within('agent start', agent.start(), 30_000);
    peer.start();
    for (const p of [victim, bystander]) await until(`${p.name} enrolled`, async () => (await annotation(p)) === 'enabled');
    await until('victim captured', async () => (await outbound(node, victim)) === 'captured');
    const found0 = (await agent.metrics.driftFound.get()).values[0]?.value ?? 0;

    execFileSync('ip', ['netns', 'exec', victim.netnsName, 'nft', 'flush', 'ruleset']);
    expect(await outbound(node, victim)).toBe('direct');  // silently unredirected, until the check runs
    await until('drift repaired', async () => (await outbound(node, victim)) === 'captured', 10_000);
    expect((await agent.metrics.driftFound.get()).values[0]!.value).toBe(found0 + 1);
    expect((await agent.metrics.driftRepaired.get()).values[0]!.value).toBe(found0 + 1);
    const events = await until('drift event', async () => {
      const l = await adminClient().core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.uid=${victim.uid}` });
      return l.items.find((e) => e.reason === 'RedirectionDriftRepaired');
    });
    expect(events.type).toBe('Warning');
    expect(events.message).toContain('redirection drift repaired');
    expect(await outbound(node, bystander)).toBe('captured');
  }, 60_000);

  it.skipIf(!privileged('nft'))('/readyz is 503 until the snapshot is restored and after stop; stop keeps host rules on upgrade, removes them on uninstall', async () => {
    // Held at the startup snapshot: health answers, readiness is 503 and names what is missing.
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    let reached!: () => void;
    const atSnapshot = new Promise<void>((r) => { reached = r; });
    const { node, agent, admin } = await setup({ beforeSnapshot: async () => { reached(); await held; } });
    const started = agent.start();
    await atSnapshot;
    const early = await httpGet({ host: '127.0.0.1', port: agent.config.healthPort }, '/readyz');
    expect(early.status).toBe(503);
    expect(early.body).toBe('not ready: snapshotReconciled\n');
    release();
    await started;
    expect((await httpGet({ host: '127.0.0.1', port: agent.config.healthPort }, '/readyz')).status).toBe(200);
    const hostTable = () => execFileSync('ip', ['netns', 'exec', `${node.prefix}node`, 'nft', 'list', 'tables'], { encoding: 'utf8' });
    expect(hostTable()).toContain('inet istio-ambient-nat');

    // Upgrade: the agent's DaemonSet still exists and targets this (existing) node → nothing removed.
    await admin.core.createNode({ body: { metadata: { name: node.name } } });
    cleanups.push(() => admin.core.deleteNode({ name: node.name }));
    const dsNs = agent.config.podNamespace;
    await admin.apps.createNamespacedDaemonSet({ namespace: dsNs, body: {
      metadata: { name: 'istio-cni-node' },
      spec: { selector: { matchLabels: { app: 'x' } }, template: { metadata: { labels: { app: 'x' } }, spec: { containers: [{ name: 'c', image: 'registry.invalid/x:1' }] } } },
    } });
    cleanups.push(() => admin.apps.deleteNamespacedDaemonSet({ namespace: dsNs, name: 'istio-cni-node' }).catch(() => undefined));
    const r = await agent.stop();
    expect(r.cleanedUp).toBe(false);
    expect(hostTable()).toContain('inet istio-ambient-nat');
    await expect(httpGet({ host: '127.0.0.1', port: agent.config.healthPort }, '/readyz')).rejects.toThrow();

    // Uninstall: a new agent on the same node, DaemonSet gone → host table removed.
    await admin.apps.deleteNamespacedDaemonSet({ namespace: dsNs, name: 'istio-cni-node' });
    const again = new Agent({ config: await node.config(), client: agentClient(), logging: (await import('../../lib/util/log.js')).createLogging({ levels: { default: 'none' }, json: true }) });
    cleanups.push(() => again.stop({ cleanup: true }));
    await again.start();
    const r2 = await again.stop();
    expect(r2.cleanedUp).toBe(true);
    expect(hostTable()).not.toContain('istio-ambient-nat');
  }, 60_000);
});

/** What podwire-cni sends for one invocation (docs/cni-protocol.md). */
function shimRequest(command: string, env: Record<string, string>, config: Record<string, unknown>): string {
  return JSON.stringify({ command, env: { CNI_COMMAND: command, CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin', ...env }, config: JSON.stringify(config) });
}

async function shim(node: AgentTestNode, body: string): Promise<{ status: number; exit: string | undefined; out: string }> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: `${node.runDir}/pluginevent.sock`, method: 'POST', path: '/v1/cni', headers: { 'Content-Type': 'application/json' } }, (res) => {
      let out = '';
      res.setEncoding('utf8').on('data', (d: string) => { out += d; }).on('end', () => resolve({ status: res.statusCode ?? 0, exit: res.headers['x-podwire-cni-exit'] as string | undefined, out }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describeKube('podwire agent: the plugin layer on POST /v1/cni', () => {
  it.skipIf(!privileged('nft', 'iptables-save'))('ADD enrolls an ambient pod before answering, CHECK finds drift, DEL removes it; a sidecar pod gets istio-init\'s rules; STATUS', async () => {
    const { node, ns, agent, peer } = await setup({ namespaceLabels: { 'istio.io/dataplane-mode': 'ambient' } });
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('ztunnel connected', () => agent.node?.zds?.server.connectionCount === 1);
    const { createPod } = await import('../helpers/kube.js');
    const w = await node.wire();
    const created = await createPod(adminClient(), ns, 'via-shim', node.name);
    const uid = created.metadata!.uid!;
    const prevResult = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: w.netnsPath }], ips: [{ interface: 0, address: `${w.ip4}/16`, gateway: '10.244.0.1' }, { interface: 0, address: `${w.ip6}/64` }], dns: {} };
    const config = { cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'istio-cni', ambient_enabled: true, exclude_namespaces: ['kube-system'], pod_namespace: 'istio-system', prevResult };
    const env = { CNI_CONTAINERID: 'sandbox-1', CNI_NETNS: w.netnsPath, CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=via-shim;K8S_POD_UID=${uid}` };

    const add = await shim(node, shimRequest('ADD', env, config));
    expect([add.status, add.exit]).toEqual([200, '0']);
    expect(add.out).toBe(passThrough(prevResult, '1.0.0'));  // as upstream's plugin prints it, in the config's version
    // Answered only after ztunnel's ack: already redirected now.
    expect(peer.active.has(uid)).toBe(true);
    const pod: TestPod = { ...w, uid, name: 'via-shim', namespace: ns, object: created };
    expect(await outbound(node, pod)).toBe('captured');
    expect(await annotation(pod)).toBe('enabled');
    expect((await shim(node, shimRequest('CHECK', env, config))).exit).toBe('0');
    execFileSync('ip', ['netns', 'exec', w.netnsName, 'nft', 'flush', 'ruleset']);
    const check = await shim(node, shimRequest('CHECK', env, config));
    expect(check.exit).toBe('1');
    expect(JSON.parse(check.out)).toMatchObject({ code: 101, msg: expect.stringContaining('redirection drifted') });
    const del = await shim(node, shimRequest('DEL', { ...env, CNI_NETNS: '' }, config));
    expect([del.exit, del.out]).toEqual(['0', '']);
    expect(agent.node!.dataplane.cache.has(uid)).toBe(false);
    await until('ztunnel told', () => !peer.active.has(uid));
    expect((await shim(node, shimRequest('STATUS', {}, config))).exit).toBe('0');

    // A sidecar-injected pod in a namespace outside ambient: istio-init's rules, verified against the model of the goldens.
    const other = await freshNamespace(adminClient());
    cleanups.push(() => removeNamespace(adminClient(), other));
    const w2 = await node.wire();
    await adminClient().core.createNamespacedPod({ namespace: other, body: {
      metadata: { name: 'sidecar', annotations: { 'sidecar.istio.io/status': '{}' } },
      spec: { nodeName: node.name, terminationGracePeriodSeconds: 0, containers: [{ name: 'app', image: 'registry.invalid/a:1' }, { name: 'istio-proxy', image: 'registry.invalid/p:1', args: ['proxy', 'sidecar'] }] },
    } });
    const env2 = { CNI_CONTAINERID: 'sandbox-2', CNI_NETNS: w2.netnsPath, CNI_ARGS: `K8S_POD_NAMESPACE=${other};K8S_POD_NAME=sidecar` };
    const add2 = await shim(node, shimRequest('ADD', env2, { ...config, prevResult: { ...prevResult, ips: [{ interface: 0, address: `${w2.ip4}/16` }] } }));
    expect([add2.status, add2.exit]).toEqual([200, '0']);
    const { verify } = await import('../../lib/redirect/apply.js');
    const { sidecarRules } = await import('../../lib/redirect/sidecar.js');
    const { sidecarConfigFromPod } = await import('../../lib/redirect/annotations.js');
    const { dualStack: _d, ...cfg } = sidecarConfigFromPod({ annotations: { 'sidecar.istio.io/status': '{}' }, podIps: [w2.ip4] });
    const podNs = node.openPod(w2);
    try {
      expect((await verify(podNs, sidecarRules(cfg), { backend: 'iptables' })).ok).toBe(true);
    } finally {
      podNs.close();
    }
    expect(execFileSync('ip', ['netns', 'exec', w2.netnsName, 'iptables-save', '-t', 'nat'], { encoding: 'utf8' })).toContain('-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001');
  }, 60_000);
});

describeKube('podwire agent: DELs queued while it was down', () => {
  it.skipIf(!privileged('nft'))('a DEL the shim queued for an enrolled sandbox is applied at the next start; one for a newer sandbox is not; the heap is trimmed after a snapshot of pods', async () => {
    let firstTrims = 0;
    const { node, ns, agent, peer, config } = await setup({ namespaceLabels: { 'istio.io/dataplane-mode': 'ambient' }, trimHeap: () => { firstTrims++; return true; } });
    const gone = await node.addPod(ns, 'torn-down');
    const kept = await node.addPod(ns, 'recreated');
    await within('agent start', agent.start(), 30_000);
    peer.start();
    for (const p of [gone, kept]) await until(`${p.name} enabled`, async () => (await annotation(p)) === 'enabled');
    await agent.stop({ cleanup: false });
    // While no agent runs: one sandbox is torn down (its process is gone) and the shim queues its DEL;
    // the other pod's queued DEL names an older sandbox's netns, since replaced by the running one.
    node.removeProcEntry(gone.pid);
    const { mkdirSync, writeFileSync, readdirSync } = await import('node:fs');
    const q = `${node.runDir}/cni-del-queue`;
    mkdirSync(q, { recursive: true });
    const rec = (p: TestPod, netns: string) => JSON.stringify({ containerId: `c-${p.name}`, netns, ifname: 'eth0', podNamespace: p.namespace, podName: p.name, podUid: p.uid, time: new Date().toISOString() });
    writeFileSync(`${q}/1-c-${gone.name}.json`, rec(gone, gone.netnsPath));
    writeFileSync(`${q}/2-c-${kept.name}.json`, rec(kept, '/var/run/netns/pwt-an-older-sandbox'));
    // The trim comes once the snapshot is restored and the queued DELs applied, before readiness.
    const trims: Array<{ restored: boolean; queued: number; ready: boolean }> = [];
    const again: Agent = new Agent({
      config, client: agentClient(), logging: (await import('../../lib/util/log.js')).createLogging({ levels: { default: 'none' }, json: true }),
      trimHeap: () => { trims.push({ restored: again.snapshot?.report.pods === 2, queued: readdirSync(q).length, ready: again.readiness.has('snapshotReconciled') }); return true; },
    });
    cleanups.push(() => again.stop({ cleanup: true }));
    await within('second start', again.start(), 30_000);
    expect(firstTrims).toBe(0);  // the first start's snapshot had no pods
    expect(trims).toEqual([{ restored: true, queued: 0, ready: false }]);
    expect(again.node!.dataplane.cache.has(gone.uid)).toBe(false);
    expect(again.node!.dataplane.cache.get(kept.uid)?.netns).toBeTruthy();
    expect(readdirSync(q)).toEqual([]);
    const entries = await probeEntries(node);
    expect(entries.get(gone.ip4)).toBeUndefined();
    expect(entries.get(kept.ip4)).toBe(kept.uid);
  }, 60_000);
});

/** A quiet agent on `node` with the repair controller configured from the node's env plus `extra`; stopped after the test. */
async function repairAgent(node: AgentTestNode, extra: Record<string, string> = {}): Promise<Agent> {
  const { parseRepairConfig } = await import('../../lib/repair/config.js');
  const agent = new Agent({
    config: await node.config(extra), repair: parseRepairConfig(await node.env(extra)), client: agentClient(),
    logging: (await import('../../lib/util/log.js')).createLogging({ levels: { default: 'none' }, json: true }),
  });
  cleanups.push(() => agent.stop({ cleanup: true }));
  return agent;
}

describeKube('podwire agent: repair', () => {
  it.skipIf(!privileged('nft'))('a sidecar pod whose istio-validation failed with 126 gets its rules from the repair controller', async () => {
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const agent = await repairAgent(node);
    await within('agent start', agent.start(), 30_000);
    expect(agent.repair!.pods).toBe(agent.controller!.pods);  // one list + watch of this node's pods, not two
    const w = await node.wire();
    const created = await admin.core.createNamespacedPod({ namespace: ns, body: {
      metadata: { name: 'broken', annotations: { 'sidecar.istio.io/status': '{}' } },
      spec: { nodeName: node.name, terminationGracePeriodSeconds: 0, initContainers: [{ name: 'istio-validation', image: 'registry.invalid/p:1' }],
        containers: [{ name: 'app', image: 'registry.invalid/a:1' }, { name: 'istio-proxy', image: 'registry.invalid/p:1', args: ['proxy', 'sidecar'] }] },
    } });
    node.addProcEntry(w.pid, created.metadata!.uid!, w.netnsPath);
    const { patchPodStatus } = await import('../../lib/kube/pods.js');
    await patchPodStatus(admin, { namespace: ns, name: 'broken' }, { status: {
      phase: 'Pending', podIP: w.ip4, podIPs: [{ ip: w.ip4 }],
      initContainerStatuses: [{ name: 'istio-validation', image: 'registry.invalid/p:1', imageID: '', ready: false, restartCount: 1,
        state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 126, reason: 'Error' } } }],
    } });
    const tables = () => execFileSync('ip', ['netns', 'exec', w.netnsName, 'nft', 'list', 'tables'], { encoding: 'utf8' });
    await until('sidecar rules programmed by repair', () => tables().includes('istio-proxy-nat'), 15_000);
    const repaired = (await agent.metrics.podsRepaired.get()).values.find((v) => v.labels.type === 'repair' && v.labels.result === 'success');
    expect(repaired?.value).toBe(1);
  }, 60_000);
});

describeKube('podwire agent: repair permissions', () => {
  it('REPAIR_DELETE_PODS without delete pods in the agent\'s RBAC: the start fails before anything else, naming it', async () => {
    const { AgentStartError } = await import('../../lib/agent/agent.js');
    const { RepairRbacError } = await import('../../lib/repair/controller.js');
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    const agent = await repairAgent(node, { REPAIR_DELETE_PODS: 'true' });
    const err = await agent.start().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(AgentStartError);
    expect((err as InstanceType<typeof AgentStartError>).stage).toBe('repair permissions');
    expect((err as InstanceType<typeof AgentStartError>).cause).toBeInstanceOf(RepairRbacError);
    expect(agent.node).toBeUndefined();  // nothing on the host was touched
  }, 30_000);
});

describeKube('podwire agent: ambient repair', () => {
  it.skipIf(!privileged('nft'))('a running ambient pod the agent could not enroll (no netns found) is enrolled by the repair controller once its netns appears: traffic captured', async () => {
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    const admin = adminClient();
    const ns = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
    cleanups.push(() => removeNamespace(admin, ns));
    const agent = await repairAgent(node, { REPAIR_AMBIENT_GRACE: '1s', REPAIR_RESYNC_INTERVAL: '1s' });
    const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 200 });
    cleanups.push(() => peer.stop());
    // Running before the agent starts, but no process of it is in /proc: the informer path fails for good.
    const pod = await node.addPod(ns, 'late-netns', {}, { procEntry: false });
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('enrollment failed event', async () => (await admin.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${pod.name}` }))
      .items.some((e) => e.reason === 'EnrollFailed'), 10_000);
    expect(await annotation(pod)).toBeUndefined();
    expect(await outbound(node, pod)).toBe('direct');
    await new Promise((r) => setTimeout(r, 1_500));  // past the grace: repair finds no netns either
    expect(agent.node!.dataplane.cache.has(pod.uid)).toBe(false);

    node.addProcEntry(pod.pid, pod.uid, pod.netnsPath);  // the sandbox is visible now: the next resync repairs
    await until('annotated enabled by repair', async () => (await annotation(pod)) === 'enabled', 15_000);
    expect(await outbound(node, pod)).toBe('captured');
    expect(peer.active.has(pod.uid)).toBe(true);
    const values = (await agent.metrics.podsRepaired.get()).values;
    expect(values.find((v) => v.labels.type === 'repair' && v.labels.result === 'success')?.value).toBe(1);
    expect(agent.repair!.stats.enrolled).toBe(1);
  }, 60_000);
});

describe('agent helpers', () => {
  it('parsePrometheusText reads what prom-client writes', async () => {
    const { createAgentMetrics } = await import('../../lib/agent/metrics.js');
    const m = createAgentMetrics();
    m.pluginRequests.inc({ response_code: '500' }, 2);
    const parsed = parsePrometheusText(await m.registry.metrics());
    expect(parsed.get('istio_cni_plugin_requests_total')!.find((s) => s.labels.response_code === '500')!.value).toBe(2);
  });
});
