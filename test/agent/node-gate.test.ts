// The node readiness gate against the real control plane, as the agent's
// ServiceAccount. The default agent ClusterRole has `get nodes` but not
// `patch nodes`; tests that need the patch grant it here with a ClusterRole
// and binding of their own, limited (resourceNames) to this test's Node, so
// no other suite sees the agent with more than its default rights. Every
// Node, ClusterRole and binding made here is removed in afterEach.
import { afterAll, afterEach, expect, it } from 'vitest';
import { ApiException, AuthorizationV1Api, PatchStrategy, RbacAuthorizationV1Api, type V1Taint } from '@kubernetes/client-node';
import { DEFAULT_GATE_TAINT_KEY, NodeGate, NodeGateError } from '../../lib/agent/node-gate.js';
import type { KubeClient } from '../../lib/kube/client.js';
import { adminClient, agentClient, describeKube, until } from '../helpers/kube.js';

const AGENT_SA = { namespace: 'istio-system', name: 'podwire-agent' };
const FOREIGN: V1Taint = { key: 'pwt.test/foreign', value: 'x', effect: 'NoSchedule' };
const OURS = { key: DEFAULT_GATE_TAINT_KEY, effect: 'NoSchedule' };
const prefix = `pwt-ng-${process.pid}-`;
let seq = 0;
const cleanups: (() => Promise<unknown> | void)[] = [];

const ignoreNotFound = (err: unknown) => { if (!(err instanceof ApiException && err.code === 404)) throw err; };
const rbac = () => adminClient().kubeConfig.makeApiClient(RbacAuthorizationV1Api);

/**
 * A Node whose taints are exactly `taints`. The TaintNodesByCondition admission
 * plugin adds node.kubernetes.io/not-ready:NoSchedule to every new Node; that
 * one is removed here so the tests can compare whole lists.
 */
async function createNode(taints: V1Taint[] = []): Promise<string> {
  const name = `${prefix}${++seq}`;
  await adminClient().core.createNode({ body: { metadata: { name } } });
  cleanups.push(() => adminClient().core.deleteNode({ name }).catch(ignoreNotFound));
  await setTaintsAsAdmin(name, () => taints);
  expect(await taintsOf(name)).toEqual(taints);
  return name;
}

async function taintsOf(name: string): Promise<V1Taint[]> {
  const n = await adminClient().core.readNode({ name });
  return (n.spec?.taints ?? []).map((t) => ({ key: t.key, effect: t.effect, ...(t.value ? { value: t.value } : {}) }));
}

/** Another writer sets the taints (admin, its own read-modify-write under the read's resourceVersion). */
async function setTaintsAsAdmin(name: string, next: (taints: V1Taint[]) => V1Taint[]): Promise<void> {
  const admin = adminClient();
  const n = await admin.core.readNode({ name });
  const taints = next(n.spec?.taints ?? []);
  const body = { metadata: { resourceVersion: n.metadata!.resourceVersion }, spec: { taints: taints.length ? taints : null } };
  await admin.call({ verb: 'patch', resource: 'nodes', name }, (o) => admin.core.patchNode({ name, body }, o), { contentType: PatchStrategy.MergePatch });
}
const addTaintAsAdmin = (name: string, taint: V1Taint) => setTaintsAsAdmin(name, (t) => [...t, taint]);

/** Grants the agent SA get+patch on exactly these Nodes; waits until the authorizer sees it. */
async function grantNodePatch(...nodes: string[]): Promise<void> {
  const name = `${prefix}rbac-${++seq}`;
  const api = rbac();
  await api.createClusterRole({ body: { metadata: { name }, rules: [{ apiGroups: [''], resources: ['nodes'], resourceNames: nodes, verbs: ['get', 'patch'] }] } });
  cleanups.push(() => api.deleteClusterRole({ name }).catch(ignoreNotFound));
  await api.createClusterRoleBinding({ body: {
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
    subjects: [{ kind: 'ServiceAccount', ...AGENT_SA }],
  } });
  cleanups.push(() => api.deleteClusterRoleBinding({ name }).catch(ignoreNotFound));
  const probe = agent();
  await until('the agent may patch the node', async () => {
    const authz = probe.kubeConfig.makeApiClient(AuthorizationV1Api);
    const all = await Promise.all(nodes.map((n) => authz.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: { resource: 'nodes', verb: 'patch', name: n } } } })));
    return all.every((r) => r.status?.allowed);
  });
}

function agent(): KubeClient {
  const c = agentClient(undefined, { requestTimeoutMs: 5_000 });
  cleanups.push(() => c.close());
  return c;
}

/** An agent client whose node patches first run `before(n)` (n = 1, 2, …), between the gate's read and its write. */
function interceptPatches(client: KubeClient, before: (n: number) => Promise<void>): { patches: () => number } {
  let n = 0;
  const orig = client.call.bind(client);
  client.call = (async (t, fn, o) => {
    if (t.verb === 'patch' && t.resource === 'nodes') await before(++n);
    return orig(t, fn, o);
  }) as KubeClient['call'];
  return { patches: () => n };
}

async function gateError(p: Promise<unknown>): Promise<NodeGateError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(NodeGateError);
  return err as NodeGateError;
}

describeKube('NodeGate (real control plane, agent ServiceAccount)', () => {
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  afterAll(async () => {
    const nodes = (await adminClient().core.listNode()).items.map((n) => n.metadata!.name!).filter((n) => n.startsWith(prefix));
    const roles = (await rbac().listClusterRole()).items.map((r) => r.metadata!.name!).filter((n) => n.startsWith(prefix));
    const bindings = (await rbac().listClusterRoleBinding()).items.map((r) => r.metadata!.name!).filter((n) => n.startsWith(prefix));
    expect({ nodes, roles, bindings }).toEqual({ nodes: [], roles: [], bindings: [] });
  });

  it('taint adds exactly our taint and keeps a foreign one; twice is once; untaint removes ours only', async () => {
    const node = await createNode([FOREIGN]);
    await grantNodePatch(node);
    const gate = new NodeGate({ client: agent(), nodeName: node });
    await gate.check();
    await gate.taint();
    expect(await taintsOf(node)).toEqual([FOREIGN, OURS]);
    const rv = (await adminClient().core.readNode({ name: node })).metadata!.resourceVersion;
    await gate.taint();
    expect(await taintsOf(node)).toEqual([FOREIGN, OURS]);
    // The second taint() wrote nothing.
    expect((await adminClient().core.readNode({ name: node })).metadata!.resourceVersion).toBe(rv);
    await gate.untaint();
    expect(await taintsOf(node)).toEqual([FOREIGN]);
    await gate.untaint();
    expect(await taintsOf(node)).toEqual([FOREIGN]);
  });

  it('a Node without taints: taint then untaint leaves it without taints; a custom key works', async () => {
    const node = await createNode();
    await grantNodePatch(node);
    const gate = new NodeGate({ client: agent(), nodeName: node, taintKey: 'example.com/cni-not-ready' });
    await gate.taint();
    expect(await taintsOf(node)).toEqual([{ key: 'example.com/cni-not-ready', effect: 'NoSchedule' }]);
    await gate.untaint();
    expect((await adminClient().core.readNode({ name: node })).spec?.taints ?? []).toEqual([]);
  });

  it('a taint added by another writer between our read and our write is not lost (409, re-read, retry)', async () => {
    const node = await createNode([FOREIGN]);
    await grantNodePatch(node);
    const client = agent();
    const concurrent: V1Taint = { key: 'pwt.test/concurrent', effect: 'NoSchedule' };
    const { patches } = interceptPatches(client, async (n) => { if (n === 1) await addTaintAsAdmin(node, concurrent); });
    const gate = new NodeGate({ client, nodeName: node });
    await gate.taint();
    expect(await taintsOf(node)).toEqual([FOREIGN, concurrent, OURS]);
    expect(patches()).toBe(2);

    // The same on the way out: a taint added while untaint() is in flight stays.
    const late: V1Taint = { key: 'pwt.test/late', effect: 'PreferNoSchedule' };
    const { patches: outPatches } = interceptPatches(client, async (n) => { if (n === 1) await addTaintAsAdmin(node, late); });
    await gate.untaint();
    expect(await taintsOf(node)).toEqual([FOREIGN, concurrent, late]);
    expect(outPatches()).toBe(2);
  });

  it('a Node that keeps changing: ERR_NODE_GATE_CONFLICT after the configured attempts', async () => {
    const node = await createNode();
    await grantNodePatch(node);
    const client = agent();
    const { patches } = interceptPatches(client, async (n) => addTaintAsAdmin(node, { key: `pwt.test/churn-${n}`, effect: 'NoSchedule' }));
    const err = await gateError(new NodeGate({ client, nodeName: node, conflictAttempts: 3 }).taint());
    expect(err.code).toBe('ERR_NODE_GATE_CONFLICT');
    expect(patches()).toBe(3);
    expect((await taintsOf(node)).map((t) => t.key)).not.toContain(DEFAULT_GATE_TAINT_KEY);
  });

  it('the default agent RBAC (no node patch): check() and taint() fail with ERR_NODE_GATE_RBAC naming nodes/patch', async () => {
    const node = await createNode([FOREIGN]);
    const gate = new NodeGate({ client: agent(), nodeName: node });
    const err = await gateError(gate.check());
    expect(err.code).toBe('ERR_NODE_GATE_RBAC');
    expect(err.missing).toEqual(['nodes/patch']);
    expect(err.message).toContain('nodes/patch');
    expect(err.message).toContain(node);
    const err2 = await gateError(gate.taint());
    expect(err2.code).toBe('ERR_NODE_GATE_RBAC');
    expect(err2.missing).toEqual(['nodes/patch']);
    expect(await taintsOf(node)).toEqual([FOREIGN]);
  });

  it('a missing Node: check(), taint() and untaint() fail with ERR_NODE_GATE_NO_NODE', async () => {
    const node = `${prefix}absent-${++seq}`;
    await grantNodePatch(node);
    const gate = new NodeGate({ client: agent(), nodeName: node });
    for (const op of [() => gate.check(), () => gate.taint(), () => gate.untaint()]) {
      const err = await gateError(op());
      expect(err.code).toBe('ERR_NODE_GATE_NO_NODE');
      expect(err.message).toContain(node);
    }
  });

  it('options are checked', () => {
    const client = adminClient();
    expect(() => new NodeGate({ client, nodeName: '' })).toThrow(TypeError);
    expect(() => new NodeGate({ client, nodeName: 'n', taintKey: '' })).toThrow(TypeError);
    expect(() => new NodeGate({ client, nodeName: 'n', effect: 'NoExecute' as 'NoSchedule' })).toThrow(TypeError);
    const g = new NodeGate({ client, nodeName: 'n' });
    expect([g.taintKey, g.effect]).toEqual([DEFAULT_GATE_TAINT_KEY, 'NoSchedule']);
  });
});
