// Tests against the real control plane (scripts/kube/controlplane.mjs),
// started once per run by test/helpers/kube-setup.ts, which writes its facts
// to the JSON file named by PODWIRE_KUBE_STATE. Every test makes its own
// namespace (pwt-<pid>-<n>) and it is removed after the test.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, onTestFinished } from 'vitest';
import { startControlPlane, type ControlPlane } from '../../scripts/kube/controlplane.mjs';
import type { V1Pod } from '@kubernetes/client-node';
import { KubeClient, type KubeClientOptions } from '../../lib/kube/client.js';
import { loadKubeconfig } from '../../lib/kube/config.js';

export interface KubeEnv {
  server: string;
  caFile: string;
  adminKubeconfig: string;
  adminToken?: string;
  agentKubeconfig: string;
  agentTokenFile: string;
  etcdEndpoint?: string;
}

const inCI = process.env.CI === 'true' || process.env.CI === '1';

/**
 * describe() for suites that need the control plane. Skipped only when a
 * developer opted out (PODWIRE_KUBE=off) outside CI; under CI it always runs,
 * so a missing control plane fails in kubeEnv().
 */
export const describeKube: ReturnType<typeof describe.skipIf> = describe.skipIf(process.env.PODWIRE_KUBE === 'off' && !inCI && !process.env.PODWIRE_KUBE_STATE);

let cached: { file: string; env: KubeEnv } | undefined;

/** The control plane's facts (the state file is read once per worker); throws (never skips) when there is none. */
export function kubeEnv(): KubeEnv {
  const file = process.env.PODWIRE_KUBE_STATE;
  if (cached && cached.file === file) return cached.env;
  if (!file) {
    throw new Error('no test control plane: PODWIRE_KUBE_STATE is not set (vitest globalSetup test/helpers/kube-setup.ts starts one; run through vitest/npm test)');
  }
  let env: KubeEnv;
  try {
    env = JSON.parse(readFileSync(file, 'utf8')) as KubeEnv;
  } catch (err) {
    throw new Error(`no test control plane: cannot read PODWIRE_KUBE_STATE=${file}: ${(err as Error).message}`);
  }
  for (const k of ['server', 'caFile', 'adminKubeconfig', 'agentKubeconfig', 'agentTokenFile'] as const) {
    if (typeof env[k] !== 'string' || !env[k]) throw new Error(`test control plane state ${file} lacks "${k}"`);
  }
  cached = { file, env };
  return env;
}

const clients = new Map<string, KubeClient>();
afterAll(() => {
  for (const c of clients.values()) c.close();
  clients.clear();
});

/** A cluster-admin client (cached per kubeconfig; closed after the file's tests). */
export function adminClient(env: Pick<KubeEnv, 'adminKubeconfig'> = kubeEnv()): KubeClient {
  let c = clients.get(env.adminKubeconfig);
  if (!c) {
    c = new KubeClient(loadKubeconfig(env.adminKubeconfig), { requestTimeoutMs: 30_000 });
    clients.set(env.adminKubeconfig, c);
  }
  return c;
}

/** A client as the agent's ServiceAccount (its kubeconfig); the caller closes it. */
export function agentClient(env: KubeEnv = kubeEnv(), opts: KubeClientOptions = {}): KubeClient {
  return new KubeClient(loadKubeconfig(env.agentKubeconfig), opts);
}

let seq = 0;

/**
 * Creates namespace pwt-<pid>-<n> (with `labels`) and removes it when the
 * current test finishes. There is no controller-manager, so removal does its
 * work: pods deleted at once (grace 0), then the namespace, then its
 * finalizer cleared so it really goes.
 */
export async function freshNamespace(client: KubeClient = adminClient(), labels: Record<string, string> = {}): Promise<string> {
  const name = `pwt-${process.pid}-${++seq}`;
  await client.core.createNamespace({ body: { metadata: { name, labels } } });
  onTestFinished(() => removeNamespace(client, name));
  return name;
}

export async function removeNamespace(client: KubeClient, name: string): Promise<void> {
  await client.core.deleteCollectionNamespacedPod({ namespace: name, gracePeriodSeconds: 0 });
  try {
    await client.core.deleteNamespace({ name });
    await client.core.replaceNamespaceFinalize({ name, body: { metadata: { name }, spec: { finalizers: [] } } });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
  }
}

/** A pod bound to `nodeName` directly (no scheduler, no kubelet: it stays Pending). */
export function podBody(name: string, nodeName: string, labels: Record<string, string> = {}): V1Pod {
  return {
    metadata: { name, labels },
    spec: { nodeName, containers: [{ name: 'app', image: 'registry.invalid/app:1' }], terminationGracePeriodSeconds: 0 },
  };
}

export async function createPod(client: KubeClient, namespace: string, name: string, nodeName: string, labels: Record<string, string> = {}): Promise<V1Pod> {
  return client.core.createNamespacedPod({ namespace, body: podBody(name, nodeName, labels) });
}

/** Deletes at once: a bound pod would otherwise wait for a kubelet that does not exist. */
export async function deletePodNow(client: KubeClient, namespace: string, name: string): Promise<void> {
  await client.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0, body: { gracePeriodSeconds: 0 } });
}

/** Waits until `check()` is truthy, re-checking every `everyMs` (20), for at most `timeoutMs`; then throws naming `what`. */
export { until } from '../../lib/util/until.js';

/** A promise with a deadline: rejects naming `what` if `p` takes longer than `ms`. */
export function within<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([p, new Promise<never>((_, rej) => { t = setTimeout(() => rej(new Error(`${what}: not within ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

/**
 * A control plane of the test's own, for tests that restart or compact it
 * (the shared one must not be disturbed): its dir under $TMPDIR, an admin
 * client, and stop() that removes everything.
 */
export async function ownControlPlane(name: string): Promise<{ cp: ControlPlane; admin: KubeClient; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), `pwt-${name}-`));
  let cp: ControlPlane | undefined;
  try {
    cp = await startControlPlane({ dir: join(dir, 'cp') });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const admin = new KubeClient(loadKubeconfig(cp.adminKubeconfig), { requestTimeoutMs: 5_000 });
  return {
    cp,
    admin,
    async stop() {
      admin.close();
      await cp!.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
