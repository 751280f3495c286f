// Where the API server is and who we are to it: a kubeconfig file or the
// in-cluster ServiceAccount mount. Everything is validated when loaded, so a
// wrong file fails at start with a KubeConfigError naming the file and the
// field, not later as an opaque TLS or 401 failure. Files (token, CA, client
// cert/key) are WatchedFiles: re-read when they change, so a rotated
// projected token is on the very next request.
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import { loadYaml } from '../util/yaml.js';
import { KubeConfigError } from './errors.js';
import { WatchedFile } from './watched-file.js';
import { isJsonObject } from '../util/json.js';

/** The in-cluster ServiceAccount mount (what the kubelet projects into every pod). */
export const SERVICEACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** TLS material for the connection; `version` changes whenever any of it was re-read. */
export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  /** false only for `insecure-skip-tls-verify: true`. */
  rejectUnauthorized: boolean;
  servername?: string;
  version: string;
}

type Source = { data: Buffer } | { file: WatchedFile };

/**
 * Credentials for one API server. Built by loadKubeconfig / inClusterConfig /
 * loadCredentials; the client asks for `authorization()` and `tls()` on every
 * request, which costs a stat per file and re-reads only what changed.
 */
export class KubeCredentials {
  /** @internal use the loaders. */
  constructor(
    readonly server: string,
    /** Where they came from, for messages: the kubeconfig path, or `in-cluster`. */
    readonly origin: string,
    private readonly parts: {
      ca?: Source; cert?: Source; key?: Source;
      token?: string; tokenFile?: WatchedFile;
      basic?: { username: string; password: string };
      insecure: boolean; servername?: string;
    },
    /** The context's (kubeconfig) or the ServiceAccount's (in-cluster) namespace. */
    readonly namespace?: string,
  ) {}

  /** The Authorization header value for the next request, or undefined (client certs only). */
  async authorization(): Promise<string | undefined> {
    const p = this.parts;
    if (p.tokenFile) {
      const t = await p.tokenFile.text();
      if (!t) throw new KubeConfigError('KUBE_TOKEN_EMPTY', `token file ${p.tokenFile.path} is empty`, p.tokenFile.path);
      return `Bearer ${t}`;
    }
    if (p.token) return `Bearer ${p.token}`;
    if (p.basic) return `Basic ${Buffer.from(`${p.basic.username}:${p.basic.password}`).toString('base64')}`;
    return undefined;
  }

  /** The token file, when the token comes from one (in-cluster, or a kubeconfig's tokenFile). */
  get tokenFile(): string | undefined {
    return this.parts.tokenFile?.path;
  }

  async tls(): Promise<TlsMaterial> {
    const p = this.parts;
    const read = async (s: Source | undefined) => (s === undefined ? undefined : 'data' in s ? s.data : await s.file.read());
    const [ca, cert, key] = await Promise.all([read(p.ca), read(p.cert), read(p.key)]);
    const reads = [p.ca, p.cert, p.key].map((s) => (s && 'file' in s ? s.file.reads : 0)).join('.');
    const out: TlsMaterial = { rejectUnauthorized: !p.insecure, version: reads };
    if (ca) out.ca = ca;
    if (cert) out.cert = cert;
    if (key) out.key = key;
    if (p.servername) out.servername = p.servername;
    return out;
  }
}

export interface InClusterOptions {
  /** Default /var/run/secrets/kubernetes.io/serviceaccount/token. */
  tokenFile?: string;
  /** Default /var/run/secrets/kubernetes.io/serviceaccount/ca.crt. */
  caFile?: string;
  /** Default /var/run/secrets/kubernetes.io/serviceaccount/namespace (optional file). */
  namespaceFile?: string;
  /** Where KUBERNETES_SERVICE_HOST/PORT are read from (default process.env). */
  env?: NodeJS.ProcessEnv;
}

/** In-cluster credentials: the ServiceAccount token and CA, the service address from the environment. */
export function inClusterConfig(opts: InClusterOptions = {}): KubeCredentials {
  const env = opts.env ?? process.env;
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host) throw new KubeConfigError('KUBE_CONFIG_NO_CLUSTER', 'in-cluster: KUBERNETES_SERVICE_HOST is not set', undefined, 'KUBERNETES_SERVICE_HOST');
  if (!port || !/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
    throw new KubeConfigError('KUBE_CONFIG_NO_CLUSTER', `in-cluster: KUBERNETES_SERVICE_PORT is ${port ? `"${port}", not a port` : 'not set'}`, undefined, 'KUBERNETES_SERVICE_PORT');
  }
  const tokenPath = opts.tokenFile ?? join(SERVICEACCOUNT_DIR, 'token');
  const caPath = opts.caFile ?? join(SERVICEACCOUNT_DIR, 'ca.crt');
  const tokenFile = mustRead(tokenPath, 'ServiceAccount token', undefined, undefined, (data) => {
    if (data.toString('utf8').trim() === '') throw new KubeConfigError('KUBE_TOKEN_EMPTY', `token file ${tokenPath} is empty`, tokenPath);
  });
  const caFile = mustRead(caPath, 'ServiceAccount CA bundle');
  let namespace: string | undefined;
  try {
    namespace = readFileSync(opts.namespaceFile ?? join(SERVICEACCOUNT_DIR, 'namespace'), 'utf8').trim() || undefined;
  } catch {
    // optional: only a default for namespaced calls
  }
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  return new KubeCredentials(server, 'in-cluster', { tokenFile, ca: { file: caFile }, insecure: false }, namespace);
}

export interface KubeconfigOptions {
  /** Use this context instead of current-context. */
  context?: string;
}

/** Credentials from a kubeconfig file (its current-context, or `context`). Relative paths are relative to the file. */
export function loadKubeconfig(file: string, opts: KubeconfigOptions = {}): KubeCredentials {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new KubeConfigError('KUBE_CONFIG_UNREADABLE', `kubeconfig ${file}: ${(err as Error).message}`, file, undefined, { cause: err });
  }
  let doc: unknown;
  try {
    doc = loadYaml<unknown>(text);
  } catch (err) {
    throw new KubeConfigError('KUBE_CONFIG_INVALID', `kubeconfig ${file} is not valid YAML: ${(err as Error).message}`, file, undefined, { cause: err });
  }
  const bad = (field: string, what: string): never => {
    throw new KubeConfigError('KUBE_CONFIG_INVALID', `kubeconfig ${file}: ${field} ${what}`, file, field);
  };
  if (!isJsonObject(doc)) return bad('(document)', 'is not a mapping');
  const ctxName = opts.context ?? doc['current-context'];
  if (typeof ctxName !== 'string' || ctxName === '') return bad('current-context', 'is missing (and no context was given)');
  const ctxEntry = findNamed(doc, 'contexts', ctxName, file);
  const ctx = ctxEntry.value.context;
  const ctxField = `contexts[${ctxEntry.index}].context`;
  if (!isJsonObject(ctx)) return bad(ctxField, 'is missing');
  if (typeof ctx.cluster !== 'string' || !ctx.cluster) return bad(`${ctxField}.cluster`, 'is missing');
  const clEntry = findNamed(doc, 'clusters', ctx.cluster, file);
  const cl = clEntry.value.cluster;
  const clField = `clusters[${clEntry.index}].cluster`;
  if (!isJsonObject(cl)) return bad(clField, 'is missing');

  // The server: http(s) URL with a host; client-go accepts plain http, so do we.
  const server = cl.server;
  if (typeof server !== 'string' || !server) return bad(`${clField}.server`, 'is missing');
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    return bad(`${clField}.server`, `is not a URL: "${server}"`);
  }
  if ((url.protocol !== 'https:' && url.protocol !== 'http:') || !url.hostname) return bad(`${clField}.server`, `must be an http(s) URL with a host: "${server}"`);
  if (cl['proxy-url'] !== undefined) {
    throw new KubeConfigError('KUBE_CONFIG_UNSUPPORTED', `kubeconfig ${file}: ${clField}.proxy-url is not supported`, file, `${clField}.proxy-url`);
  }
  const base = dirname(file);
  const insecure = optBool(cl, 'insecure-skip-tls-verify', clField, file) ?? false;
  const ca = source(cl, 'certificate-authority', clField, base, file, 'CA bundle');
  const servername = optString(cl, 'tls-server-name', clField, file);

  // The user: none is allowed (anonymous, or a client cert only).
  let user: Record<string, unknown> = {};
  let userField = '';
  if (ctx.user !== undefined) {
    if (typeof ctx.user !== 'string' || !ctx.user) return bad(`${ctxField}.user`, 'must be a user name');
    const uEntry = findNamed(doc, 'users', ctx.user, file);
    userField = `users[${uEntry.index}].user`;
    const u = uEntry.value.user;
    if (u !== undefined && u !== null && !isJsonObject(u)) return bad(userField, 'is not a mapping');
    user = (u as Record<string, unknown> | null) ?? {};
  }
  for (const k of ['exec', 'auth-provider']) {
    if (user[k] !== undefined) {
      throw new KubeConfigError('KUBE_CONFIG_UNSUPPORTED', `kubeconfig ${file}: ${userField}.${k} is not supported (use a token, tokenFile or client certificate)`, file, `${userField}.${k}`);
    }
  }
  const cert = source(user, 'client-certificate', userField, base, file, 'client certificate');
  const key = source(user, 'client-key', userField, base, file, 'client key');
  if ((cert === undefined) !== (key === undefined)) return bad(`${userField}.${cert ? 'client-key' : 'client-certificate'}`, 'is missing (client-certificate and client-key go together)');
  const token = optString(user, 'token', userField, file);
  const tokenPath = optString(user, 'tokenFile', userField, file);
  const username = optString(user, 'username', userField, file);
  const password = optString(user, 'password', userField, file);
  const parts: ConstructorParameters<typeof KubeCredentials>[2] = { insecure };
  if (ca) parts.ca = ca;
  if (cert) parts.cert = cert;
  if (key) parts.key = key;
  if (servername) parts.servername = servername;
  // client-go's precedence: token over tokenFile.
  if (token) parts.token = token;
  else if (tokenPath) parts.tokenFile = mustRead(resolvePath(base, tokenPath), 'token file', file, `${userField}.tokenFile`);
  else if (username !== undefined) parts.basic = { username, password: password ?? '' };
  if (url.protocol === 'http:' && (parts.token || parts.tokenFile || parts.basic)) {
    // Like kubectl, we would send them in clear text; refuse rather than leak a token.
    throw new KubeConfigError('KUBE_CONFIG_INVALID', `kubeconfig ${file}: ${clField}.server is http:// but the user has credentials (they would go in clear text)`, file, `${clField}.server`);
  }
  const ns = optString(ctx, 'namespace', ctxField, file);
  return new KubeCredentials(url.origin + url.pathname.replace(/\/$/, ''), file, parts, ns);
}

export interface LoadOptions extends InClusterOptions, KubeconfigOptions {
  /** A kubeconfig path; wins over KUBECONFIG and in-cluster. */
  kubeconfig?: string;
}

/**
 * The agent's rule: an explicit kubeconfig, else $KUBECONFIG (its first
 * entry), else in-cluster. No ~/.kube/config fallback: a node agent running
 * as root must never pick up an admin's personal config by accident.
 */
export function loadCredentials(opts: LoadOptions = {}): KubeCredentials {
  const env = opts.env ?? process.env;
  const file = opts.kubeconfig ?? env.KUBECONFIG?.split(':').find((f) => f !== '');
  return file ? loadKubeconfig(file, opts) : inClusterConfig(opts);
}

// ---------------------------------------------------------------------------


function findNamed(doc: Record<string, unknown>, list: 'clusters' | 'contexts' | 'users', name: string, file: string): { index: number; value: Record<string, unknown> } {
  const arr = doc[list];
  if (!Array.isArray(arr)) throw new KubeConfigError('KUBE_CONFIG_INVALID', `kubeconfig ${file}: ${list} is missing`, file, list);
  const index = arr.findIndex((e) => isJsonObject(e) && e.name === name);
  if (index < 0) throw new KubeConfigError('KUBE_CONFIG_INVALID', `kubeconfig ${file}: ${list} has no entry named "${name}"`, file, list);
  return { index, value: arr[index] as Record<string, unknown> };
}

function optString(o: Record<string, unknown>, k: string, at: string, file: string): string | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new KubeConfigError('KUBE_CONFIG_INVALID', `kubeconfig ${file}: ${at}.${k} must be a string`, file, `${at}.${k}`);
  return v;
}

function optBool(o: Record<string, unknown>, k: string, at: string, file: string): boolean | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new KubeConfigError('KUBE_CONFIG_INVALID', `kubeconfig ${file}: ${at}.${k} must be true or false`, file, `${at}.${k}`);
  return v;
}

const BASE64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/;

/** `<k>` (a path) or `<k>-data` (base64), the kubeconfig convention; -data wins, as in client-go. */
function source(o: Record<string, unknown>, k: string, at: string, base: string, file: string, what: string): Source | undefined {
  const data = optString(o, `${k}-data`, at, file);
  if (data !== undefined && data !== '') {
    if (!BASE64.test(data)) throw new KubeConfigError('KUBE_CONFIG_INVALID', `kubeconfig ${file}: ${at}.${k}-data is not base64`, file, `${at}.${k}-data`);
    return { data: Buffer.from(data, 'base64') };
  }
  const path = optString(o, k, at, file);
  if (path === undefined || path === '') return undefined;
  return { file: mustRead(resolvePath(base, path), what, file, `${at}.${k}`) };
}

const resolvePath = (base: string, p: string) => (isAbsolute(p) ? p : join(base, p));

/** A WatchedFile that must be readable now (so a wrong path fails at load, naming the field that gave it). */
function mustRead(path: string, what: string, kubeconfig?: string, field?: string, check?: (data: Buffer) => void): WatchedFile {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch (err) {
    const via = kubeconfig ? ` (from ${field} in ${kubeconfig})` : '';
    throw new KubeConfigError('KUBE_CONFIG_UNREADABLE', `${what} ${path}${via}: ${(err as Error).message}`, path, field, { cause: err });
  }
  check?.(data);
  return new WatchedFile(path, what);
}
