// The agent's RBAC is what its code calls, no more and no less. Agents run in-process against the
// real kube-apiserver, each as a fresh ServiceAccount bound to the ClusterRoles of
// scripts/kube/rbac.mjs, through every lifecycle path that talks to the API: start with the node
// readiness taint and the repair access check, informers, an ambient pod enrolled (annotation), a
// pod that cannot be (EnrollFailed Event), a drift repair (Event), a CNI ADD the caches cannot
// answer (GET pod and namespace), repair in delete and label mode (delete, label, Events), stop on
// upgrade (DaemonSet and Node read, taint back on) and on uninstall. Every request of that
// identity is read off the wire (test/helpers/api-requests.ts) and must be answered without 401/403
// and authorized by a rule of the roles bound; over all paths, every rule must have authorized at
// least one request. The table in lib/kube/permissions.ts (which the access checks at start read)
// must name exactly the rules of rbac.mjs, role by role; test/deploy/chart.test.ts holds the
// chart to rbac.mjs.
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { PatchStrategy, type V1PolicyRule } from '@kubernetes/client-node';
import { Agent } from '../../lib/agent/agent.js';
import { createLogging } from '../../lib/util/log.js';
import { tcpProbe, hostPort } from '../../lib/demo/traffic.js';
import { patchPodStatus } from '../../lib/kube/pods.js';
import { GRANTED_TO_EVERY_IDENTITY, PERMISSIONS, ROLE_FEATURES, type Permission } from '../../lib/kube/permissions.js';
import { REDIRECTION_ANNOTATION } from '../../lib/mesh/constants.js';
import { parseRepairConfig } from '../../lib/repair/config.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AGENT_CLUSTER_ROLE, AGENT_CLUSTER_ROLES, NODE_TAINT_CLUSTER_ROLE, REPAIR_DELETE_CLUSTER_ROLE } from '../../scripts/kube/rbac.mjs';
import { authorizes, grantKey, grantsOf, recordRequests, requestInfo, requestLabel, type ApiRequest, type Grant } from '../helpers/api-requests.js';
import { AgentTestNode, NODE_APP, unixRequest, type TestPod } from '../helpers/agent-node.js';
import { agentIdentityWith } from '../helpers/rbac.js';
import { adminClient, createPod, describeKube, freshNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

const quiet = () => createLogging({ levels: { default: 'none' }, json: true });
const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };

/** What each lifecycle test saw: its requests and the roles its identity had. */
const seen: Array<{ path: string; requests: ApiRequest[]; roles: (typeof AGENT_CLUSTER_ROLE)[] }> = [];

/** The requests no grant of `roles` authorizes, and those the server refused, as labels. */
function outside(requests: readonly ApiRequest[], roles: readonly (typeof AGENT_CLUSTER_ROLE)[]): { unpermitted: string[]; refused: string[] } {
  const grants = roles.flatMap((r) => grantsOf(r.rules ?? []));
  const free = GRANTED_TO_EVERY_IDENTITY.map((p) => grantOf(p));
  const unpermitted = requests.filter((r) => ![...grants, ...free].some((g) => authorizes(g, r))).map(requestLabel);
  const refused = requests.filter((r) => r.status === 401 || r.status === 403).map((r) => `${requestLabel(r)}: ${r.status}`);
  return { unpermitted: [...new Set(unpermitted)].sort(), refused: [...new Set(refused)].sort() };
}

const grantOf = (p: Permission): Grant => ({
  group: p.group, resource: p.subresource ? `${p.resource}/${p.subresource}` : p.resource, verb: p.verb, resourceNames: p.resourceNames ?? [],
});
const keys = (gs: readonly Grant[]) => [...new Set(gs.map(grantKey))].sort();

async function annotation(pod: { namespace: string; name: string }): Promise<string | undefined> {
  const p = await adminClient().core.readNamespacedPod({ namespace: pod.namespace, name: pod.name });
  return p.metadata?.annotations?.[REDIRECTION_ANNOTATION];
}

async function events(namespace: string, name: string): Promise<string[]> {
  const l = await adminClient().core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
  return l.items.map((e) => e.reason ?? '');
}

async function captured(node: AgentTestNode, pod: TestPod): Promise<boolean> {
  const ns = node.openPod(pod);
  try {
    const r = await tcpProbe(ns, NODE_APP.host, NODE_APP.port);
    return r.by === 'ztunnel' && r.uid === pod.uid && r.origDst === hostPort(NODE_APP.host, NODE_APP.port);
  } finally {
    ns.close();
  }
}

/** A Node object for the gate and the shutdown decision, without the not-ready taint admission adds. */
async function nodeObject(name: string): Promise<void> {
  const admin = adminClient();
  await admin.core.createNode({ body: { metadata: { name } } });
  cleanups.push(() => admin.core.deleteNode({ name }));
  await admin.call({ verb: 'patch', resource: 'nodes', name }, (o) => admin.core.patchNode({ name, body: { spec: { taints: null } } }, o), { contentType: PatchStrategy.MergePatch });
}

/** A sidecar pod whose istio-validation init container exited 126, as the kubelet reports it. */
async function brokenSidecarPod(ns: string, name: string, nodeName: string): Promise<void> {
  const admin = adminClient();
  await admin.core.createNamespacedPod({ namespace: ns, body: {
    metadata: { name, annotations: { 'sidecar.istio.io/status': '{}' } },
    spec: { nodeName, terminationGracePeriodSeconds: 0, initContainers: [{ name: 'istio-validation', image: 'registry.invalid/p:1' }],
      containers: [{ name: 'app', image: 'registry.invalid/a:1' }, { name: 'istio-proxy', image: 'registry.invalid/p:1', args: ['proxy', 'sidecar'] }] },
  } });
  await patchPodStatus(admin, { namespace: ns, name }, { status: {
    phase: 'Pending', podIP: '10.88.0.9', podIPs: [{ ip: '10.88.0.9' }],
    initContainerStatuses: [{ name: 'istio-validation', image: 'registry.invalid/p:1', imageID: '', ready: false, restartCount: 1,
      state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 126, reason: 'Error' } } }],
  } });
}

/** The agent's DaemonSet in `namespace`, as the chart names it (the shutdown decision reads it). */
async function daemonSet(namespace: string): Promise<void> {
  const admin = adminClient();
  await admin.apps.createNamespacedDaemonSet({ namespace, body: {
    metadata: { name: 'istio-cni-node' },
    spec: { selector: { matchLabels: { app: 'x' } }, template: { metadata: { labels: { app: 'x' } }, spec: { containers: [{ name: 'c', image: 'registry.invalid/x:1' }] } } },
  } });
}

describe('the permission table and scripts/kube/rbac.mjs', () => {
  it('each ClusterRole grants exactly the permissions of its features, and the base role does not repeat what others grant for themselves only', () => {
    const byRole = { base: AGENT_CLUSTER_ROLE, repairDelete: REPAIR_DELETE_CLUSTER_ROLE, nodeTaint: NODE_TAINT_CLUSTER_ROLE };
    expect(AGENT_CLUSTER_ROLES).toEqual([AGENT_CLUSTER_ROLE, REPAIR_DELETE_CLUSTER_ROLE, NODE_TAINT_CLUSTER_ROLE]);
    for (const [role, features] of Object.entries(ROLE_FEATURES)) {
      const rules = byRole[role as keyof typeof byRole].rules ?? [];
      expect(keys(grantsOf(rules)), role).toEqual(keys(features.flatMap((f) => PERMISSIONS[f].map(grantOf))));
      // One grant per rule atom: a rule listing a verb twice, or two rules granting the same, is a sign of drift.
      expect(grantsOf(rules).length, role).toBe(keys(grantsOf(rules)).length);
    }
  });

  it('requestInfo reads a request as the apiserver does', () => {
    expect(requestInfo('GET', '/api/v1/pods?fieldSelector=spec.nodeName%3Dn&limit=500')).toMatchObject({ group: '', resource: 'pods', verb: 'list' });
    expect(requestInfo('GET', '/api/v1/pods?watch=true&resourceVersion=5')).toMatchObject({ group: '', resource: 'pods', verb: 'watch' });
    expect(requestInfo('GET', '/api/v1/watch/namespaces')).toMatchObject({ resource: 'namespaces', verb: 'watch' });
    expect(requestInfo('PATCH', '/api/v1/namespaces/a/pods/p/status')).toMatchObject({ group: '', namespace: 'a', resource: 'pods/status', name: 'p', verb: 'patch' });
    expect(requestInfo('GET', '/api/v1/namespaces/a')).toMatchObject({ resource: 'namespaces', name: 'a', verb: 'get' });
    expect(requestInfo('PUT', '/api/v1/namespaces/a/finalize')).toMatchObject({ resource: 'namespaces/finalize', name: 'a', verb: 'update' });
    expect(requestInfo('POST', '/api/v1/namespaces/a/events')).toMatchObject({ resource: 'events', namespace: 'a', verb: 'create' });
    expect(requestInfo('GET', '/apis/apps/v1/namespaces/s/daemonsets/istio-cni-node')).toMatchObject({ group: 'apps', resource: 'daemonsets', name: 'istio-cni-node', verb: 'get' });
    expect(requestInfo('DELETE', '/api/v1/namespaces/a/pods')).toMatchObject({ verb: 'deletecollection' });
    expect(requestInfo('GET', '/version').resource).toBeUndefined();
  });
});

/** An agent identity bound to `roles` (the base role first), its requests recorded, and a node with its Node object. */
async function recordedAgent(roles: readonly (typeof AGENT_CLUSTER_ROLE)[]) {
  const client = await agentIdentityWith(roles.filter((r) => r !== AGENT_CLUSTER_ROLE).map((r) => r.metadata.name));
  const rec = await recordRequests(client);
  cleanups.push(async () => rec.stop());
  const node = await AgentTestNode.create();
  cleanups.push(() => node.teardown());
  await nodeObject(node.name);
  return { client, rec, admin: adminClient(), node };
}

describeKube('the agent\'s requests are exactly what its ClusterRoles grant', () => {
  it.skipIf(!privileged('nft'))('delete-mode repair and the node readiness taint: start, informers, annotation, EnrollFailed, drift Event, CNI ADD lookups, delete, upgrade stop', async () => {
    const roles = [AGENT_CLUSTER_ROLE, REPAIR_DELETE_CLUSTER_ROLE, NODE_TAINT_CLUSTER_ROLE];
    const { client, rec, admin, node } = await recordedAgent(roles);
    const home = await freshNamespace(admin);  // the agent's POD_NAMESPACE: its DaemonSet, of no other test
    await daemonSet(home);
    const amb = await freshNamespace(admin, AMBIENT);
    const plain = await freshNamespace(admin);
    const meshed = await node.addPod(amb, 'meshed');
    const lost = await node.addPod(amb, 'no-netns', {}, { procEntry: false });

    const env = {
      POD_NAMESPACE: home, NODE_READINESS_TAINT: 'true', AMBIENT_DRIFT_CHECK_INTERVAL: '1s',
      // Repair deletes; the ambient fallback (an unenrolled pod past the grace) must not delete the no-netns pod meanwhile.
      REPAIR_REPAIR_PODS: 'false', REPAIR_DELETE_PODS: 'true', REPAIR_AMBIENT_GRACE: '1h',
    };
    const agent = new Agent({ config: await node.config(env), repair: parseRepairConfig(await node.env(env)), client, logging: quiet() });
    cleanups.push(() => agent.stop({ cleanup: true }));
    const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 200 });
    cleanups.push(() => peer.stop());
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('meshed annotated', async () => (await annotation(meshed)) === 'enabled');
    await until('EnrollFailed on the pod without a netns', async () => (await events(amb, lost.name)).includes('EnrollFailed'));

    await until('meshed captured', () => captured(node, meshed));
    execFileSync('ip', ['netns', 'exec', meshed.netnsName, 'nft', 'flush', 'ruleset']);
    await until('drift repaired with its Event', async () => (await events(amb, meshed.name)).includes('RedirectionDriftRepaired'), 10_000);

    // A CNI ADD the caches cannot answer: the pod and its namespace come from one GET each.
    agent.controller!.pods._pauseForTest();
    agent.controller!.namespaces._pauseForTest();
    const late = await freshNamespace(admin, AMBIENT);
    const w = await node.wire();
    const created = await createPod(admin, late, 'fresh', node.name);
    node.addProcEntry(w.pid, created.metadata!.uid!, w.netnsPath);
    node.pods.set(`${late}/fresh`, { ...w, uid: created.metadata!.uid!, name: 'fresh', namespace: late, object: created });
    const body = `{"Netns":"${w.netnsPath}","PodName":"fresh","PodNamespace":"${late}","IPs":[{"Interface":2,"Address":{"IP":"${w.ip4}","Mask":"//8AAA=="},"Gateway":"10.244.0.1"}]}`;
    expect(await unixRequest(`${node.runDir}/pluginevent.sock`, 'POST', '/cmdadd', body)).toEqual({ status: 200, body: '' });
    expect(await annotation({ namespace: late, name: 'fresh' })).toBe('enabled');
    agent.controller!.pods._resumeForTest();
    agent.controller!.namespaces._resumeForTest();

    await brokenSidecarPod(plain, 'broken', node.name);
    await until('broken pod deleted with its Event', async () => agent.repair!.stats.deleted === 1 && (await events(plain, 'broken')).includes('DeleteBrokenPod'));

    // Upgrade: the DaemonSet is there and targets the node, so the node is tainted for the next agent.
    expect((await agent.stop()).cleanedUp).toBe(false);
    expect((await admin.core.readNode({ name: node.name })).spec?.taints?.map((t) => t.key)).toContain('cni.podwire.io/not-ready');
    rec.stop();

    expect(rec.requests.some((r) => r.verb === 'watch' && r.resource === 'pods')).toBe(true);  // the recording sees the agent
    expect(outside(rec.requests, roles)).toEqual({ unpermitted: [], refused: [] });
    seen.push({ path: 'delete mode + taint', requests: [...rec.requests], roles });
  }, 90_000);

  it.skipIf(!privileged('nft'))('label-mode repair with the base role alone: label through pods/status and its Event, uninstall stop', async () => {
    const roles = [AGENT_CLUSTER_ROLE];
    const { client, rec, admin, node } = await recordedAgent(roles);
    const home = await freshNamespace(admin);  // no DaemonSet in it: an uninstall
    const plain = await freshNamespace(admin);
    const env = { POD_NAMESPACE: home, REPAIR_REPAIR_PODS: 'false', REPAIR_LABEL_PODS: 'true' };
    const agent = new Agent({ config: await node.config(env), repair: parseRepairConfig(await node.env(env)), client, logging: quiet() });
    cleanups.push(() => agent.stop({ cleanup: true }));
    await within('agent start', agent.start(), 30_000);
    await brokenSidecarPod(plain, 'broken', node.name);
    await until('broken pod labelled with its Event', async () => agent.repair!.stats.labelled === 1 && (await events(plain, 'broken')).includes('LabelBrokenPod'));
    expect((await admin.core.readNamespacedPod({ namespace: plain, name: 'broken' })).metadata?.labels?.['cni.istio.io/uninitialized']).toBe('true');
    expect((await agent.stop()).cleanedUp).toBe(true);
    rec.stop();

    expect(rec.requests.some((r) => r.verb === 'watch' && r.resource === 'pods')).toBe(true);
    expect(outside(rec.requests, roles)).toEqual({ unpermitted: [], refused: [] });
    seen.push({ path: 'label mode', requests: [...rec.requests], roles });
  }, 60_000);

  it('over both paths, every rule of every role authorized a request (no grant is unused)', () => {
    expect(seen.map((s) => s.path)).toEqual(['delete mode + taint', 'label mode']);
    const all = seen.flatMap((s) => s.requests);
    const unused = AGENT_CLUSTER_ROLES.flatMap((role) => grantsOf(role.rules as V1PolicyRule[])
      .filter((g) => !all.some((r) => authorizes(g, r)))
      .map((g) => `${role.metadata.name}: ${grantKey(g)}`));
    expect(unused).toEqual([]);
    // And the other way, once more over the union: nothing asked that no role grants.
    expect(outside(all, AGENT_CLUSTER_ROLES).unpermitted).toEqual([]);
  });
});
