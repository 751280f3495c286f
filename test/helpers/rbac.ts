// Identities of their own for RBAC tests (and a client for any ServiceAccount, `clientAs`): a ServiceAccount pwt-<pid>-<n> in the agent's namespace
// bound to the agent's base ClusterRole plus the named extra ones (scripts/kube/rbac.mjs), with a
// TokenRequest token. Granting the extras to the shared agent ServiceAccount instead would change
// what every other test file running at the same time is allowed.
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { onTestFinished } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeClient } from '../../lib/kube/client.js';
import { KubeError } from '../../lib/kube/errors.js';
import { loadKubeconfig } from '../../lib/kube/config.js';
import { rejection } from './rejection.js';
import { AGENT_NAMESPACE } from '../../scripts/kube/controlplane.mjs';
import { AGENT_CLUSTER_ROLE } from '../../scripts/kube/rbac.mjs';
import { adminClient, kubeEnv } from './kube.js';

let seq = 0;

/** A client as a fresh ServiceAccount with the base agent role and `extraRoles`; all of it removed when the test finishes. */
export async function agentIdentityWith(extraRoles: readonly string[]): Promise<KubeClient> {
  const admin = adminClient();
  const name = `pwt-${process.pid}-sa-${++seq}`;
  await admin.core.createNamespacedServiceAccount({ namespace: AGENT_NAMESPACE, body: { metadata: { name } } });
  onTestFinished(() => admin.core.deleteNamespacedServiceAccount({ namespace: AGENT_NAMESPACE, name }).then(() => undefined));
  const rbac = admin.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  for (const role of [AGENT_CLUSTER_ROLE.metadata.name, ...extraRoles]) {
    const binding = `${name}-${role}`;
    await rbac.createClusterRoleBinding({ body: {
      metadata: { name: binding }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ kind: 'ServiceAccount', namespace: AGENT_NAMESPACE, name }],
    } });
    onTestFinished(() => rbac.deleteClusterRoleBinding({ name: binding }).then(() => undefined));
  }
  return clientAs(AGENT_NAMESPACE, name);
}

/** A client authenticated as ServiceAccount `namespace/name` with a TokenRequest token; closed and its kubeconfig removed when the test finishes. */
export async function clientAs(namespace: string, name: string): Promise<KubeClient> {
  const tr = await adminClient().core.createNamespacedServiceAccountToken({ namespace, name, body: {
    spec: { audiences: ['https://kubernetes.default.svc'], expirationSeconds: 3600 },
  } });
  const { server, caFile } = kubeEnv();
  const dir = mkdtempSync(join(tmpdir(), 'pwt-sa-'));
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'kubeconfig');
  writeFileSync(file, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': name,
    clusters: [{ name: 'podwire-test', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name, user: { token: tr.status!.token } }],
    contexts: [{ name, context: { cluster: 'podwire-test', user: name } }],
  }), { mode: 0o600 });
  const client = new KubeClient(loadKubeconfig(file), { requestTimeoutMs: 10_000 });
  onTestFinished(() => client.close());
  return client;
}

/** The KubeError a call fails with (fails the test when the call succeeds or throws something else). */
export const kubeFailure = (p: Promise<unknown>): Promise<KubeError> => rejection(p, KubeError);
