// Credentials: kubeconfig and in-cluster loading with errors that name the
// file and the field, and token rotation proven on the real apiserver (it
// reports which token authenticated the request).
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { AuthenticationV1Api } from '@kubernetes/client-node';
import { KubeClient } from '../../lib/kube/client.js';
import { inClusterConfig, loadCredentials, loadKubeconfig } from '../../lib/kube/config.js';
import { KubeConfigError } from '../../lib/kube/errors.js';
import { adminClient, describeKube, kubeEnv } from '../helpers/kube.js';

let dir: string;
beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'pwt-kube-config-')); });
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function configError(fn: () => unknown): KubeConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(KubeConfigError);
    return err as KubeConfigError;
  }
  throw new Error('expected a KubeConfigError');
}

const kc = (cluster: Record<string, unknown>, user: Record<string, unknown> = {}) => ({
  apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
  clusters: [{ name: 'cl', cluster }], users: [{ name: 'u', user }], contexts: [{ name: 'c', context: { cluster: 'cl', user: 'u', namespace: 'ns1' } }],
});

function write(name: string, doc: unknown): string {
  const f = join(dir, name);
  writeFileSync(f, typeof doc === 'string' ? doc : JSON.stringify(doc));
  return f;
}

it('kubeconfig: a good file loads (relative paths against its directory, namespace from the context)', () => {
  writeFileSync(join(dir, 'ca.crt'), 'not checked until TLS');
  const f = write('k', kc({ server: 'https://127.0.0.1:6443', 'certificate-authority': 'ca.crt' }, { token: 't' }));
  const c = loadKubeconfig(f);
  expect(c.server).toBe('https://127.0.0.1:6443');
  expect(c.namespace).toBe('ns1');
});

it('unchanged files are not re-read per request, and the keep-alive agent is reused until one changes', async () => {
  writeFileSync(join(dir, 'ca.crt'), 'ca-1');
  writeFileSync(join(dir, 'token'), 'tok-1\n');
  const f = write('k', kc({ server: 'https://127.0.0.1:6443', 'certificate-authority': 'ca.crt' }, { tokenFile: 'token' }));
  const client = new KubeClient(loadKubeconfig(f));
  try {
    const creds = client.credentials;
    const a1 = await client.agent();
    const v1 = (await creds.tls()).version;
    expect(await creds.authorization()).toBe('Bearer tok-1');
    for (let i = 0; i < 3; i++) {
      expect(await client.agent()).toBe(a1);
      expect(await creds.authorization()).toBe('Bearer tok-1');
    }
    expect((await creds.tls()).version).toBe(v1);
    writeFileSync(join(dir, 'token'), 'tok-2');
    expect(await creds.authorization()).toBe('Bearer tok-2');
    expect(await client.agent()).toBe(a1);  // a new token needs no new connection
    writeFileSync(join(dir, 'ca.crt'), 'ca-2, longer');
    const a2 = await client.agent();
    expect(a2).not.toBe(a1);
    expect((await creds.tls()).ca?.toString()).toBe('ca-2, longer');
    expect(await client.agent()).toBe(a2);
  } finally {
    client.close();
  }
});

it('kubeconfig: each mistake is a KubeConfigError with its code, file and field', () => {
  const cases: [unknown, string, string | undefined][] = [
    ['{ nope: [', 'KUBE_CONFIG_INVALID', undefined],
    [{ ...kc({ server: 'https://x' }), 'current-context': undefined }, 'KUBE_CONFIG_INVALID', 'current-context'],
    [{ ...kc({ server: 'https://x' }), 'current-context': 'other' }, 'KUBE_CONFIG_INVALID', 'contexts'],
    [kc({}), 'KUBE_CONFIG_INVALID', 'clusters[0].cluster.server'],
    [kc({ server: 'ftp://x' }), 'KUBE_CONFIG_INVALID', 'clusters[0].cluster.server'],
    [kc({ server: 'https://x', 'certificate-authority': 'missing.crt' }), 'KUBE_CONFIG_UNREADABLE', 'clusters[0].cluster.certificate-authority'],
    [kc({ server: 'https://x', 'certificate-authority-data': '%%%' }), 'KUBE_CONFIG_INVALID', 'clusters[0].cluster.certificate-authority-data'],
    [kc({ server: 'https://x', 'insecure-skip-tls-verify': 'yes' }), 'KUBE_CONFIG_INVALID', 'clusters[0].cluster.insecure-skip-tls-verify'],
    [kc({ server: 'https://x' }, { token: 5 }), 'KUBE_CONFIG_INVALID', 'users[0].user.token'],
    [kc({ server: 'https://x' }, { exec: { command: 'aws' } }), 'KUBE_CONFIG_UNSUPPORTED', 'users[0].user.exec'],
    [kc({ server: 'https://x' }, { 'client-certificate-data': 'QUJD' }), 'KUBE_CONFIG_INVALID', 'users[0].user.client-key'],
    [kc({ server: 'https://x' }, { tokenFile: 'nope' }), 'KUBE_CONFIG_UNREADABLE', 'users[0].user.tokenFile'],
    [kc({ server: 'http://x' }, { token: 't' }), 'KUBE_CONFIG_INVALID', 'clusters[0].cluster.server'],
  ];
  for (const [i, [doc, code, field]] of cases.entries()) {
    const f = write(`k${i}`, doc);
    const e = configError(() => loadKubeconfig(f));
    expect({ i, code: e.code, field: e.field }).toEqual({ i, code, field });
    if (code !== 'KUBE_CONFIG_UNREADABLE') expect(e.file).toBe(f);
  }
  const missing = configError(() => loadKubeconfig(join(dir, 'absent')));
  expect(missing).toMatchObject({ code: 'KUBE_CONFIG_UNREADABLE', file: join(dir, 'absent') });
});

it('in-cluster: the environment and the mounted files are checked, naming what is wrong', () => {
  const token = join(dir, 'token');
  const ca = join(dir, 'ca.crt');
  writeFileSync(ca, 'x');
  const env = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
  expect(configError(() => inClusterConfig({ env: {}, tokenFile: token, caFile: ca }))).toMatchObject({ code: 'KUBE_CONFIG_NO_CLUSTER', field: 'KUBERNETES_SERVICE_HOST' });
  expect(configError(() => inClusterConfig({ env: { ...env, KUBERNETES_SERVICE_PORT: 'https' }, tokenFile: token, caFile: ca }))).toMatchObject({ code: 'KUBE_CONFIG_NO_CLUSTER', field: 'KUBERNETES_SERVICE_PORT' });
  expect(configError(() => inClusterConfig({ env, tokenFile: token, caFile: ca }))).toMatchObject({ code: 'KUBE_CONFIG_UNREADABLE', file: token });
  writeFileSync(token, '\n');
  expect(configError(() => inClusterConfig({ env, tokenFile: token, caFile: ca }))).toMatchObject({ code: 'KUBE_TOKEN_EMPTY', file: token });
  writeFileSync(token, 'abc\n');
  expect(configError(() => inClusterConfig({ env, tokenFile: token, caFile: join(dir, 'nope') }))).toMatchObject({ code: 'KUBE_CONFIG_UNREADABLE', file: join(dir, 'nope') });
  const ok = inClusterConfig({ env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, tokenFile: token, caFile: ca, namespaceFile: join(dir, 'none') });
  expect(ok.server).toBe('https://[fd00::1]:443');
  expect(ok.tokenFile).toBe(token);
  // loadCredentials: KUBECONFIG first, in-cluster otherwise.
  expect(loadCredentials({ env, tokenFile: token, caFile: ca }).origin).toBe('in-cluster');
});

/** The JWT's jti claim (TokenRequest tokens carry one). */
const jti = (token: string) => (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { jti: string }).jti;

describeKube('token rotation against the apiserver', () => {
  it('after the token file is replaced, the very next request authenticates with the new token', async () => {
    const env = kubeEnv();
    const admin = adminClient();
    const newToken = async () => (await admin.core.createNamespacedServiceAccountToken({
      namespace: 'istio-system', name: 'podwire-agent',
      body: { spec: { audiences: ['https://kubernetes.default.svc'], expirationSeconds: 3600 } },
    })).status!.token;
    // As the kubelet does: the new token replaces the file atomically.
    const tokenFile = join(dir, 'token');
    const rotate = (t: string) => { writeFileSync(`${tokenFile}.tmp`, t); renameSync(`${tokenFile}.tmp`, tokenFile); };
    const t1 = await newToken();
    rotate(t1);
    const url = new URL(env.server);
    const creds = inClusterConfig({ env: { KUBERNETES_SERVICE_HOST: url.hostname, KUBERNETES_SERVICE_PORT: url.port }, tokenFile, caFile: env.caFile, namespaceFile: join(dir, 'none') });
    const client = new KubeClient(creds);
    // The apiserver reports the credential that authenticated a request: "JTI=<the token's jti>".
    const auth = client.kubeConfig.makeApiClient(AuthenticationV1Api);
    const whoami = async () => {
      const r = await client.call({ verb: 'create', resource: 'selfsubjectreviews' }, (o) => auth.createSelfSubjectReview({ body: { } }, o));
      return { user: r.status?.userInfo?.username, credential: r.status?.userInfo?.extra?.['authentication.kubernetes.io/credential-id']?.[0] };
    };
    try {
      expect(await whoami()).toEqual({ user: 'system:serviceaccount:istio-system:podwire-agent', credential: `JTI=${jti(t1)}` });
      const t2 = await newToken();
      expect(jti(t2)).not.toBe(jti(t1));
      rotate(t2);
      // Both tokens are valid: only the credential id can tell which one was sent.
      expect(await whoami()).toEqual({ user: 'system:serviceaccount:istio-system:podwire-agent', credential: `JTI=${jti(t2)}` });
      // An in-place rewrite (same inode) is seen too.
      const t3 = await newToken();
      writeFileSync(tokenFile, t3);
      expect((await whoami()).credential).toBe(`JTI=${jti(t3)}`);
    } finally {
      client.close();
    }
  });
});
