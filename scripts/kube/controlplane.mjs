// A real Kubernetes control plane for tests, benchmarks and developers:
// etcd and kube-apiserver on 127.0.0.1 (free ports, a data dir of its own),
// TLS from a CA generated here (openssl), service-account token signing,
// RBAC, and two identities with kubeconfigs:
//   admin  — a static token in system:masters (tests set things up with it)
//   agent  — ServiceAccount istio-system/podwire-agent bound to ClusterRole
//            podwire-agent: exactly what the chart grants the node agent.
// No kubelet, scheduler or controller-manager: tests play the kubelet, and
// admission plugins that need those controllers (ServiceAccount) are off.
// With `nodes` (scripts/kube/cluster.mjs, the real node): ServiceAccount
// admission on, the Node authorizer and NodeRestriction, privileged pods
// allowed, and a kubelet token per node name (user system:node:<name>).
//
//   const cp = await startControlPlane({ dir });  ...  await cp.stop();
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ensureBinaries } from './build.mjs';
import { AGENT_CLUSTER_ROLE, AGENT_CLUSTER_ROLES } from './rbac.mjs';

export const AGENT_NAMESPACE = 'istio-system';
export const AGENT_SERVICE_ACCOUNT = 'podwire-agent';

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function openssl(args, cwd) {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw Object.assign(new Error(`openssl ${args[0]} failed: ${r.stderr || r.error?.message}`), { code: 'KUBE_CERTS' });
}

// A CA, the apiserver's serving cert (127.0.0.1, localhost, kubernetes.default…) and the SA signing key.
function makeCerts(dir) {
  const d = join(dir, 'pki');
  mkdirSync(d, { recursive: true, mode: 0o700 });
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=podwire-test-ca'], d);
  writeFileSync(join(d, 'server.ext'), [
    'basicConstraints=CA:FALSE', 'keyUsage=digitalSignature,keyEncipherment', 'extendedKeyUsage=serverAuth',
    // 10.96.0.1: the `kubernetes` Service's ClusterIP, how pods (and a real node) reach it.
    'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc', '',
  ].join('\n'));
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=kube-apiserver'], d);
  openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext'], d);
  openssl(['genpkey', '-algorithm', 'RSA', '-out', 'sa.key', '-pkeyopt', 'rsa_keygen_bits:2048'], d);
  openssl(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], d);
  return { ca: join(d, 'ca.crt'), cert: join(d, 'server.crt'), key: join(d, 'server.key'), saKey: join(d, 'sa.key'), saPub: join(d, 'sa.pub') };
}

/** A kubeconfig for `user` authenticating with a bearer token. */
export function tokenKubeconfig(server, caFile, user, token) {
  return JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': user,
    clusters: [{ name: 'podwire-test', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: user, context: { cluster: 'podwire-test', user } }],
  }, null, 2);
}

function writeAtomic(path, text, mode = 0o600) {
  const tmp = `${path}.${randomBytes(6).toString('hex')}`;
  writeFileSync(tmp, text, { mode, flag: 'wx' });
  renameSync(tmp, path);
}

/** One HTTPS call to the apiserver with a bearer token; resolves { status, body }. */
export function apiCall(server, caFile, token, method, path, body, timeoutMs = 10_000) {
  const url = new URL(path, server);
  const payload = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method, ca: readFileSync(caFile), timeout: timeoutMs,
      headers: { authorization: `Bearer ${token}`, accept: 'application/json',
        ...(payload ? { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json', 'content-length': payload.length } : {}) },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let parsed = text;
        try { parsed = JSON.parse(text); } catch { /* not JSON (readyz) */ }
        resolve({ status: res.statusCode, body: parsed });
      });
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error(`${method} ${path}: timed out`), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

function etcdCall(endpoint, path, body) {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${endpoint}${path}`, { method: 'POST', timeout: 10_000, headers: { 'content-type': 'application/json', 'content-length': payload.length } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (res.statusCode !== 200) reject(new Error(`etcd ${path}: HTTP ${res.statusCode} ${text}`));
        else resolve(JSON.parse(text));
      });
    });
    req.on('timeout', () => req.destroy(new Error(`etcd ${path}: timed out`)));
    req.on('error', reject);
    req.end(payload);
  });
}

async function waitFor(what, check, timeoutMs, child) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    if (child && child.exitCode !== null) throw Object.assign(new Error(`${what}: the process exited (${child.exitCode}) before it was ready; see its log`), { code: 'KUBE_START' });
    try {
      if (await check()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw Object.assign(new Error(`${what}: not ready after ${timeoutMs} ms${last ? ` (${last.message})` : ''}`), { code: 'KUBE_START' });
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Detached children outlive this process (`npm run kube:up`); the others are
// killed when it exits, however it exits, so a crashed test run leaves none.
function startProcess(bin, args, logFile, detached) {
  const fd = openSync(logFile, 'a');
  // Not detached: the kernel kills it when this process dies, however it dies (a SIGTERM'd test
  // runner runs no 'exit' handler; setpriv execs the binary, so the pid is the binary's).
  const argv = detached ? [bin, ...args] : ['setpriv', '--pdeathsig', 'KILL', '--', bin, ...args];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd], detached });
  closeSync(fd);
  if (detached) {
    child.unref();
  } else {
    const kill = () => child.kill('SIGKILL');
    process.once('exit', kill);
    child.once('exit', () => process.removeListener('exit', kill));
  }
  return child;
}

async function stopProcess(child, graceMs = 5000) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Starts etcd and kube-apiserver, sets up RBAC and the agent identity, and
 * writes the kubeconfigs into `dir` (which it owns and removes on stop).
 * `detached`: the processes outlive this one (stop them by pid, see down.mjs).
 */
export async function startControlPlane({ dir, log = () => undefined, detached = false, nodes } = {}) {
  if (!dir) throw new TypeError('startControlPlane: dir is required');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const bins = ensureBinaries({ log });
  const pki = makeCerts(dir);
  const [etcdPort, etcdPeerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const etcdEndpoint = `http://127.0.0.1:${etcdPort}`;
  const server = `https://127.0.0.1:${apiPort}`;
  const adminToken = randomBytes(24).toString('hex');
  const nodeTokens = Object.fromEntries((nodes ?? []).map((n) => [n, randomBytes(24).toString('hex')]));
  writeFileSync(join(dir, 'tokens.csv'), [
    `${adminToken},podwire-admin,podwire-admin,system:masters`,
    ...Object.entries(nodeTokens).map(([n, t]) => `${t},system:node:${n},system:node:${n},system:nodes`),
  ].join('\n') + '\n', { mode: 0o600 });
  const children = {};
  const etcdArgs = [
    '--name', 'podwire-test', '--data-dir', join(dir, 'etcd'),
    '--listen-client-urls', etcdEndpoint, '--advertise-client-urls', etcdEndpoint,
    '--listen-peer-urls', `http://127.0.0.1:${etcdPeerPort}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${etcdPeerPort}`,
    '--initial-cluster', `podwire-test=http://127.0.0.1:${etcdPeerPort}`,
    '--unsafe-no-fsync', '--log-level', 'warn',
  ];
  const apiArgs = [
    '--etcd-servers', etcdEndpoint, '--bind-address', '127.0.0.1', '--advertise-address', '127.0.0.1',
    '--secure-port', String(apiPort), '--tls-cert-file', pki.cert, '--tls-private-key-file', pki.key,
    '--token-auth-file', join(dir, 'tokens.csv'), '--authorization-mode', nodes ? 'Node,RBAC' : 'RBAC',
    '--service-account-issuer', 'https://kubernetes.default.svc', '--service-account-key-file', pki.saPub,
    '--service-account-signing-key-file', pki.saKey, '--api-audiences', 'https://kubernetes.default.svc',
    '--service-cluster-ip-range', '10.96.0.0/16',
    ...(nodes ? ['--enable-admission-plugins', 'NodeRestriction', '--allow-privileged=true'] : ['--disable-admission-plugins', 'ServiceAccount']),
    '--cert-dir', join(dir, 'apiserver-certs'), '--profiling=false', '--v', '1',
  ];
  const admin = (method, path, body) => apiCall(server, pki.ca, adminToken, method, path, body);
  const startApiserver = async () => {
    children.apiserver = startProcess(bins.kubeApiserver, apiArgs, join(dir, 'kube-apiserver.log'), detached);
    await waitFor('kube-apiserver /readyz', async () => (await admin('GET', '/readyz')).status === 200, 120_000, children.apiserver);
  };
  const stop = async () => {
    await stopProcess(children.apiserver);
    await stopProcess(children.etcd);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    children.etcd = startProcess(bins.etcd, etcdArgs, join(dir, 'etcd.log'), detached);
    await waitFor('etcd', async () => {
      const r = await etcdCall(etcdEndpoint, '/v3/kv/range', { key: Buffer.from('/').toString('base64') });
      return r.header !== undefined;
    }, 30_000, children.etcd);
    await startApiserver();
    // A cluster gets the agent's identity and roles from the chart (helm install), not from here.
    if (!nodes) await setupRbac(admin);
  } catch (err) {
    const logs = ['etcd.log', 'kube-apiserver.log'].map((f) => { try { return `--- ${f}\n${readFileSync(join(dir, f), 'utf8').split('\n').slice(-15).join('\n')}`; } catch { return ''; } }).join('\n');
    await stop();
    err.message += `\n${logs}`;
    throw err;
  }

  const agentTokenFile = join(dir, 'agent-token');
  const newAgentToken = async () => {
    const r = await admin('POST', `/api/v1/namespaces/${AGENT_NAMESPACE}/serviceaccounts/${AGENT_SERVICE_ACCOUNT}/token`,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: ['https://kubernetes.default.svc'], expirationSeconds: 3600 } });
    if (r.status !== 201) throw new Error(`TokenRequest: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.status.token;
  };
  const agentToken = nodes ? '' : await newAgentToken();
  if (!nodes) writeAtomic(agentTokenFile, agentToken);
  const adminKubeconfig = join(dir, 'admin.kubeconfig');
  const agentKubeconfig = join(dir, 'agent.kubeconfig');
  writeAtomic(adminKubeconfig, tokenKubeconfig(server, pki.ca, 'podwire-admin', adminToken));
  if (!nodes) writeAtomic(agentKubeconfig, tokenKubeconfig(server, pki.ca, AGENT_SERVICE_ACCOUNT, agentToken));

  return {
    dir, server, caFile: pki.ca, caKey: pki.ca.replace(/\.crt$/, '.key'), saKey: pki.saKey, adminKubeconfig, agentKubeconfig, agentTokenFile, etcdEndpoint, adminToken, nodeTokens,
    pids: () => ({ etcd: children.etcd?.pid, apiserver: children.apiserver?.pid }),
    admin,
    /** Writes a fresh agent token into agentTokenFile (as a kubelet rotating a projected token) and returns it. */
    async rotateAgentToken() {
      const t = await newAgentToken();
      writeAtomic(agentTokenFile, t);
      return t;
    },
    /** Kills kube-apiserver and starts it again on the same etcd and port. */
    async restartApiserver({ downMs = 0 } = {}) {
      await stopProcess(children.apiserver);
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      await startApiserver();
    },
    /**
     * Compacts etcd at its current revision: lists at older resourceVersions get 410 Gone.
     * Watches are served from the apiserver's watch cache: for a watch 410, restart it too.
     */
    async compact() {
      const r = await etcdCall(etcdEndpoint, '/v3/kv/range', { key: Buffer.from('/').toString('base64') });
      const revision = r.header.revision;
      await etcdCall(etcdEndpoint, '/v3/kv/compaction', { revision, physical: true });
      return Number(revision);
    },
    stop,
  };
}

// The agent's identity: its namespace, ServiceAccount, ClusterRoles and the base role's binding.
async function setupRbac(admin) {
  const must = async (what, r) => {
    const res = await r;
    if (res.status >= 300 && res.status !== 409) throw new Error(`${what}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
  };
  await must('namespace', admin('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: AGENT_NAMESPACE } }));
  await must('serviceaccount', admin('POST', `/api/v1/namespaces/${AGENT_NAMESPACE}/serviceaccounts`,
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: AGENT_SERVICE_ACCOUNT } }));
  // All roles exist; only the base one is bound to the agent (tests bind the others to identities of their own).
  for (const role of AGENT_CLUSTER_ROLES) await must(`clusterrole ${role.metadata.name}`, admin('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', role));
  await must('clusterrolebinding', admin('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: AGENT_CLUSTER_ROLE.metadata.name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: AGENT_CLUSTER_ROLE.metadata.name },
    subjects: [{ kind: 'ServiceAccount', name: AGENT_SERVICE_ACCOUNT, namespace: AGENT_NAMESPACE }],
  }));
}
