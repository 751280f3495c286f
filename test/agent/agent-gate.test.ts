// The node readiness taint as the agent drives it (NODE_READINESS_TAINT):
// on from the start until the agent is ready, then off; an upgrade-stop puts
// it back for the next agent; without `patch nodes` the agent refuses to
// start, naming the permission; after `kill -9` of the agent process the
// restarted one taints the node again until it is ready.
import { afterEach, expect, it } from 'vitest';
import { PatchStrategy, RbacAuthorizationV1Api, type V1Node } from '@kubernetes/client-node';
import { Agent, AgentStartError } from '../../lib/agent/agent.js';
import { createLogging } from '../../lib/util/log.js';
import { NodeGate, NodeGateError } from '../../lib/agent/node-gate.js';
import { Informer } from '../../lib/kube/informer.js';
import { NODES } from '../../lib/kube/resources.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { spawnAgent, type SpawnedCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { adminClient, agentClient, describeKube, kubeEnv, until } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const KEY = 'cni.podwire.io/not-ready';
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

async function nodeObject(name: string): Promise<void> {
  const admin = adminClient();
  await admin.core.createNode({ body: { metadata: { name } } });
  cleanups.push(() => admin.core.deleteNode({ name }));
  // The TaintNodesByCondition admission adds node.kubernetes.io/not-ready to a new Node: clear it, ours is what is watched.
  await admin.call({ verb: 'patch', resource: 'nodes', name }, (o) => admin.core.patchNode({ name, body: { spec: { taints: null } } }, o), { contentType: PatchStrategy.MergePatch });
}

async function grantNodePatch(name: string): Promise<void> {
  const api = adminClient().kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  const role = `pwt-gate-${process.pid}-${name}`;
  await api.createClusterRole({ body: { metadata: { name: role }, rules: [{ apiGroups: [''], resources: ['nodes'], resourceNames: [name], verbs: ['get', 'patch'] }] } });
  cleanups.push(() => api.deleteClusterRole({ name: role }));
  await api.createClusterRoleBinding({ body: {
    metadata: { name: role }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ kind: 'ServiceAccount', namespace: 'istio-system', name: 'podwire-agent' }],
  } });
  cleanups.push(() => api.deleteClusterRoleBinding({ name: role }));
}

const ours = (n: V1Node | undefined) => (n?.spec?.taints ?? []).some((t) => t.key === KEY && t.effect === 'NoSchedule');

describeKube('podwire agent: node readiness taint', () => {
  it.skipIf(!privileged('nft'))('tainted from start until ready, then untainted; an upgrade-stop taints again; no node patch right → a clear start error', async () => {
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    await nodeObject(node.name);
    const quiet = () => createLogging({ levels: { default: 'none' }, json: true });

    // Without `patch nodes` (the default role): the start fails at once, naming the permission.
    const refused = new Agent({ config: await node.config({ NODE_READINESS_TAINT: 'true' }), client: agentClient(), logging: quiet() });
    cleanups.push(() => refused.stop({ cleanup: false }));
    const err = await refused.start().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(AgentStartError);
    expect((err as AgentStartError).stage).toBe('node readiness taint');
    expect((err as AgentStartError).cause).toBeInstanceOf(NodeGateError);
    expect(((err as AgentStartError).cause as NodeGateError).code).toBe('ERR_NODE_GATE_RBAC');
    expect((err as Error).message).toContain('nodes/patch');

    await grantNodePatch(node.name);
    // Every state of the Node as a watch delivers it.
    const watch = new Informer<V1Node>(adminClient(), NODES, { fieldSelector: `metadata.name=${node.name}` } as never);
    const history: Array<{ tainted: boolean; ready: boolean }> = [];
    // Just before the untaint everything else is done: the agent must still be not ready, naming the taint.
    let beforeUntaint: { ready: boolean; unmet: string[]; tainted: boolean } | undefined;
    const agent: Agent = new Agent({
      config: await node.config({ NODE_READINESS_TAINT: 'true' }), client: agentClient(), logging: quiet(),
      beforeUntaint: async () => {
        beforeUntaint = { ready: agent.readiness.ready, unmet: agent.readiness.unmet(), tainted: ours(await adminClient().core.readNode({ name: node.name })) };
      },
    });
    cleanups.push(() => agent.stop({ cleanup: true }));
    const record = (n: V1Node) => history.push({ tainted: ours(n), ready: agent.readiness.unmet().length === 0 });
    watch.on('add', record);
    watch.on('update', record);
    await watch.start().synced;
    cleanups.push(() => watch.stop());
    await until('the grant is in effect', async () => {
      await new NodeGate({ client: agentClient(), nodeName: node.name }).check();
      return true;
    });
    await agent.start();
    expect(beforeUntaint).toEqual({ ready: false, unmet: ['nodeUntainted'], tainted: true });
    // start() resolves ready, and ready means the API server already has the Node untainted.
    expect(agent.readiness.ready).toBe(true);
    expect(ours(await adminClient().core.readNode({ name: node.name }))).toBe(false);
    await until('untainted', () => !ours(watch.get(node.name)));
    // Tainted while not ready, never tainted once ready.
    expect(history.some((h) => h.tainted && !h.ready)).toBe(true);
    expect(history.filter((h) => h.ready).every((h) => !h.tainted)).toBe(true);
    expect(ours((await adminClient().core.readNode({ name: node.name })))).toBe(false);
    // Stop as an upgrade (cleanup: false): tainted for the next agent.
    await agent.stop({ cleanup: false });
    expect(ours(await adminClient().core.readNode({ name: node.name }))).toBe(true);
  }, 60_000);
});

const startAgentProcess = (env: Record<string, string>): SpawnedCli =>
  spawnAgent({ ...env, KUBECONFIG: kubeEnv().agentKubeconfig }, (fn) => cleanups.push(fn));

describeKube('podwire agent (process): node readiness taint across kill -9', () => {
  it.skipIf(!privileged('nft'))('the restarted agent taints the node from its start until it is ready again', async () => {
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    await nodeObject(node.name);
    await grantNodePatch(node.name);
    await until('the grant is in effect', async () => {
      await new NodeGate({ client: agentClient(), nodeName: node.name }).check();
      return true;
    });
    const env = await node.env({ NODE_READINESS_TAINT: 'true', AMBIENT_DRIFT_CHECK_INTERVAL: '0', REPAIR_ENABLED: 'false' });
    const readyz = async () => (await httpGet({ host: '127.0.0.1', port: Number(env.HEALTH_PORT) }, '/readyz').catch(() => ({ status: 0 }))).status;
    const tainted = async () => ours(await adminClient().core.readNode({ name: node.name }));
    const watch = new Informer<V1Node>(adminClient(), NODES, { fieldSelector: `metadata.name=${node.name}` } as never);
    const seen: boolean[] = [];
    watch.on('update', (n: V1Node) => { if (seen.at(-1) !== ours(n)) seen.push(ours(n)); });
    await watch.start().synced;
    cleanups.push(() => watch.stop());

    const first = startAgentProcess(env);
    await until('first agent ready', async () => (await readyz()) === 200, 60_000);
    expect(await tainted()).toBe(false);
    expect(seen).toEqual([true, false]);
    first.child.kill('SIGKILL');
    expect((await first.done).signal).toBe('SIGKILL');
    // Nobody is left to taint it: the documented failure mode (docs/agent.md) — the next agent does.
    expect(await tainted()).toBe(false);

    const second = startAgentProcess(env);
    await until('tainted by the restarted agent', async () => seen.length >= 3, 30_000);
    expect(seen[2]).toBe(true);
    await until('second agent ready', async () => (await readyz()) === 200, 60_000);
    // Ready only after the taint came off (untaint is the last step before ready).
    expect(await tainted()).toBe(false);
    await until('watch saw the untaint', () => seen.length >= 4);
    expect(seen).toEqual([true, false, true, false]);
    second.child.kill('SIGTERM');
    await second.done;
  }, 120_000);
});
