// The shutdown decision (istio-cni.md §5.13) against the real control plane, asked as the
// agent's ServiceAccount so its ClusterRole (DaemonSet istio-cni-node get, nodes get) is what
// answers. Every DaemonSet and Node made here is removed in afterEach (before freshNamespace's
// own removal, which cannot delete a DaemonSet without a namespace controller).
import { createServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { ApiException, type V1DaemonSet, type V1PodSpec } from '@kubernetes/client-node';
import { decideCleanup, type SafeUpgradeOptions } from '../../lib/agent/safe-upgrade.js';
import { KubeClient } from '../../lib/kube/client.js';
import { loadKubeconfig } from '../../lib/kube/config.js';
import { adminClient, agentClient, describeKube, freshNamespace, kubeEnv } from '../helpers/kube.js';

const DS = 'istio-cni-node';
const LABEL = 'podwire.test/cni';
let dir: string;
let seq = 0;
const cleanups: (() => Promise<unknown> | void)[] = [];

// Raw client-node calls (admin setup) fail with ApiException, not KubeError.
const ignoreNotFound = (err: unknown) => { if (!(err instanceof ApiException && err.code === 404)) throw err; };

/** A client whose calls are counted; closed after the test. */
function counted(client: KubeClient): { client: KubeClient; calls: () => number } {
  let n = 0;
  const orig = client.call.bind(client);
  client.call = ((t, fn, o) => { n++; return orig(t, fn, o); }) as KubeClient['call'];
  cleanups.push(() => client.close());
  return { client, calls: () => n };
}

/** A client of the test CA to `server` with `token` (kubeconfig in the test's temp dir). */
function clientFor(server: string, token?: string): KubeClient {
  const file = join(dir, `kubeconfig-${++seq}`);
  writeFileSync(file, JSON.stringify({
    'current-context': 'c', contexts: [{ name: 'c', context: { cluster: 'x', user: 'u' } }],
    clusters: [{ name: 'x', cluster: { server, 'certificate-authority': kubeEnv().caFile } }],
    users: [{ name: 'u', user: token ? { token } : {} }],
  }));
  return new KubeClient(loadKubeconfig(file), { requestTimeoutMs: 2_000 });
}

async function createNode(labels: Record<string, string> = {}): Promise<string> {
  const name = `pwt-su-${process.pid}-${++seq}`;
  await adminClient().core.createNode({ body: { metadata: { name, labels } } });
  cleanups.push(() => adminClient().core.deleteNode({ name }).catch(ignoreNotFound));
  return name;
}

async function createDaemonSet(namespace: string, spec: Partial<V1PodSpec> = {}, extra: { name?: string; finalizers?: string[] } = {}): Promise<V1DaemonSet> {
  const admin = adminClient();
  const name = extra.name ?? DS;
  const labels = { app: name };
  const body: V1DaemonSet = {
    metadata: { name, ...(extra.finalizers ? { finalizers: extra.finalizers } : {}) },
    spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'cni', image: 'registry.invalid/cni:1' }], ...spec } } },
  };
  const created = await admin.apps.createNamespacedDaemonSet({ namespace, body });
  cleanups.push(async () => {
    // A finalizer would hold it (there is no controller to clear it): drop finalizers, then delete.
    try {
      const cur = await admin.apps.readNamespacedDaemonSet({ namespace, name });
      if (cur.metadata?.finalizers?.length) await admin.apps.replaceNamespacedDaemonSet({ namespace, name, body: { ...cur, metadata: { ...cur.metadata, finalizers: [] } } });
      await admin.apps.deleteNamespacedDaemonSet({ namespace, name });
    } catch (err) {
      ignoreNotFound(err);
    }
  });
  return created;
}

/** A port nothing listens on: bound once by us, then closed. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as { port: number };
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describeKube('safe upgrade: the shutdown cleanup decision', () => {
  let agent: KubeClient;
  const decide = (o: Partial<SafeUpgradeOptions> & Pick<SafeUpgradeOptions, 'namespace' | 'nodeName'>) =>
    decideCleanup({ client: agent, disableSafeUpgrade: false, ...o });

  beforeAll(() => {
    agent = agentClient(kubeEnv());
    dir = mkdtempSync(join(tmpdir(), 'pwt-safe-upgrade-'));
  });
  afterAll(async () => {
    agent?.close();
    rmSync(dir, { recursive: true, force: true });
    // Nothing this file made is left: no Node, no DaemonSet in its namespaces.
    const admin = adminClient();
    const nodes = (await admin.core.listNode()).items.map((n) => n.metadata!.name!).filter((n) => n.startsWith(`pwt-su-${process.pid}-`));
    const sets = (await admin.apps.listDaemonSetForAllNamespaces()).items.filter((d) => d.metadata!.namespace!.startsWith(`pwt-${process.pid}-`));
    expect({ nodes, sets }).toEqual({ nodes: [], sets: [] });
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('DaemonSet and Node exist: skip cleanup (upgrade or reboot), one GET of each', async () => {
    const namespace = await freshNamespace();
    const nodeName = await createNode();
    await createDaemonSet(namespace);
    const c = counted(agentClient(kubeEnv()));
    const d = await decideCleanup({ client: c.client, namespace, nodeName, disableSafeUpgrade: false });
    expect(d).toEqual({ skipCleanup: true, reason: `upgrade or reboot: DaemonSet ${namespace}/${DS} exists and still targets node ${nodeName}` });
    expect(c.calls()).toBe(2);
  });

  it('DaemonSet missing: clean up (uninstall)', async () => {
    const namespace = await freshNamespace();
    const nodeName = await createNode();
    const d = await decide({ namespace, nodeName });
    expect(d).toEqual({ skipCleanup: false, reason: `uninstall: DaemonSet ${namespace}/${DS} not found` });
  });

  it('DaemonSet exists but the Node is gone: clean up', async () => {
    const namespace = await freshNamespace();
    await createDaemonSet(namespace);
    const d = await decide({ namespace, nodeName: `pwt-su-${process.pid}-absent` });
    expect(d.skipCleanup).toBe(false);
    expect(d.reason).toMatch(/no longer exists/);
  });

  it('DaemonSet being deleted (held by a finalizer): clean up', async () => {
    const namespace = await freshNamespace();
    const nodeName = await createNode();
    await createDaemonSet(namespace, {}, { finalizers: ['podwire.test/hold'] });
    const admin = adminClient();
    await admin.apps.deleteNamespacedDaemonSet({ namespace, name: DS });
    expect((await admin.apps.readNamespacedDaemonSet({ namespace, name: DS })).metadata?.deletionTimestamp).toBeTruthy();
    const d = await decide({ namespace, nodeName });
    expect(d).toEqual({ skipCleanup: false, reason: `uninstall: DaemonSet ${namespace}/${DS} is being deleted` });
  });

  it('required node affinity: skip while the node matches, clean up once it no longer does', async () => {
    const namespace = await freshNamespace();
    const nodeName = await createNode({ [LABEL]: 'on' });
    await createDaemonSet(namespace, {
      affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: LABEL, operator: 'In', values: ['on'] }] }] } } },
    });
    expect((await decide({ namespace, nodeName })).skipCleanup).toBe(true);
    // The node is relabelled out of the DaemonSet: its agent is leaving for good.
    const admin = adminClient();
    const n = await admin.core.readNode({ name: nodeName });
    await admin.core.replaceNode({ name: nodeName, body: { ...n, metadata: { ...n.metadata, labels: { [LABEL]: 'off' } } } });
    const d = await decide({ namespace, nodeName });
    expect(d.skipCleanup).toBe(false);
    expect(d.reason).toMatch(/no longer targets node .* nodeAffinity/);
  });

  it('disableSafeUpgrade: clean up without any API call', async () => {
    const c = counted(agentClient(kubeEnv()));
    const d = await decideCleanup({ client: c.client, namespace: 'istio-system', nodeName: 'n1', disableSafeUpgrade: true, istioOwnedConfig: true });
    expect(d.skipCleanup).toBe(false);
    expect(c.calls()).toBe(0);
  });

  it('401 (a token the apiserver does not know) and 403 (RBAC does not allow): clean up, no retries', async () => {
    const namespace = await freshNamespace();
    const nodeName = await createNode();
    await createDaemonSet(namespace);
    const bad = counted(clientFor(kubeEnv().server, 'not-a-valid-token'));
    // istioOwnedConfig would retry transient errors twice and default to skip: neither happens.
    const d401 = await decideCleanup({ client: bad.client, namespace, nodeName, disableSafeUpgrade: false, istioOwnedConfig: true, retryDelayMs: 10 });
    expect(d401.skipCleanup).toBe(false);
    expect(d401.reason).toMatch(/Unauthorized \(HTTP 401\)/);
    expect(bad.calls()).toBe(1);
    // The role allows only the name istio-cni-node; another DaemonSet (which exists) is refused.
    await createDaemonSet(namespace, {}, { name: 'other-cni' });
    const d403 = await decide({ namespace, nodeName, daemonSetName: 'other-cni', istioOwnedConfig: true, retryDelayMs: 10 });
    expect(d403.skipCleanup).toBe(false);
    expect(d403.reason).toMatch(/Forbidden \(HTTP 403\)/);
  });

  it('unreachable API server: retries, then the default (skip for istio-owned config, else clean up)', async () => {
    const server = `https://127.0.0.1:${await closedPort()}`;
    const owned = counted(clientFor(server));
    const t0 = Date.now();
    const d = await decideCleanup({ client: owned.client, namespace: 'istio-system', nodeName: 'n1', disableSafeUpgrade: false, istioOwnedConfig: true, retryDelayMs: 50 });
    expect(d.skipCleanup).toBe(true);
    expect(d.reason).toMatch(/gave up after 3 attempt\(s\) \(last: get daemonsets: Unavailable\)/);
    expect(owned.calls()).toBe(3);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100);
    const plain = counted(clientFor(server));
    const d2 = await decideCleanup({ client: plain.client, namespace: 'istio-system', nodeName: 'n1', disableSafeUpgrade: false, retryDelayMs: 50 });
    expect(d2.skipCleanup).toBe(false);
    expect(plain.calls()).toBe(1);
  });

  it('an abort stops the retries and returns the default', async () => {
    const c = counted(clientFor(`https://127.0.0.1:${await closedPort()}`));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const t0 = Date.now();
    const d = await decideCleanup({ client: c.client, namespace: 'istio-system', nodeName: 'n1', disableSafeUpgrade: false, istioOwnedConfig: true, retryDelayMs: 10_000, signal: ac.signal });
    expect(d.skipCleanup).toBe(true);
    expect(d.reason).toMatch(/^aborted/);
    expect(c.calls()).toBe(1);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('bad options throw', async () => {
    const base = { client: agent, namespace: 'istio-system', nodeName: 'n1', disableSafeUpgrade: false };
    await expect(decideCleanup({ ...base, client: {} as KubeClient })).rejects.toThrow(TypeError);
    await expect(decideCleanup({ ...base, nodeName: '' })).rejects.toThrow(TypeError);
    await expect(decideCleanup({ ...base, disableSafeUpgrade: 'false' as unknown as boolean })).rejects.toThrow(TypeError);
    await expect(decideCleanup({ ...base, retryDelayMs: -1 })).rejects.toThrow(RangeError);
  });
});
