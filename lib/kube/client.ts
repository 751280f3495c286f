// One connection to one API server: client-node's typed CoreV1Api and Watch,
// fed by our credentials, with a deadline on every call and every failure
// turned into a KubeError.
//
// Why a KubeConfig subclass: client-node asks its KubeConfig for auth on
// every request (applySecurityAuthentication for the typed APIs,
// applyToFetchOptions for Watch). Overriding those two is the smallest hook
// that lets us (a) read a rotated token before the next request, (b) reuse
// one keep-alive agent (client-node builds a new https.Agent — and re-reads
// the CA file — per request, so nothing is ever reused), and (c) give Watch a
// connect/header timeout, which it has none of in 1.4.0.
import * as http from 'node:http';
import * as https from 'node:https';
import { ApiException, AppsV1Api, CoreV1Api, KubeConfig, Observable, type ConfigurationOptions, type RequestContext, type ResponseContext } from '@kubernetes/client-node';
import { KubeConfigError, KubeError, codeForStatus, codeForTransport, type KubeVerb } from './errors.js';
import { checkName, ruleForResource } from './names.js';
import type { KubeCredentials, TlsMaterial } from './config.js';
import { checkTimeout, optionalTimeout } from '../util/timeout.js';

export const USER_AGENT = 'podwire/0.1.0';

export interface KubeClientOptions {
  /** Deadline of one request (not of a watch stream), in ms. Default 10 000. */
  requestTimeoutMs?: number;
  /** Sent as User-Agent (apiserver audit logs and priority-and-fairness see it). */
  userAgent?: string;
}

/** What a call is, for its KubeError. */
export interface CallTarget {
  verb: KubeVerb;
  resource: string;
  namespace?: string;
  name?: string;
}

export interface CallOptions {
  /** Overrides the client's requestTimeoutMs for this call. */
  timeoutMs?: number;
  /** Cancels the call; it then fails with code 'Aborted'. */
  signal?: AbortSignal;
  /** Content-Type of the body (patches: client-node would send JSON Patch by default). */
  contentType?: string;
}

type FetchInit = Awaited<ReturnType<KubeConfig['applyToFetchOptions']>>;

/** The KubeConfig client-node's APIs and Watch see: its auth hooks are ours. */
class CredentialsKubeConfig extends KubeConfig {
  constructor(private readonly owner: KubeClient) {
    super();
    this.loadFromClusterAndUser({ name: 'podwire', server: owner.credentials.server, skipTLSVerify: false }, { name: 'podwire' });
  }

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    const auth = await this.owner.credentials.authorization();
    if (auth) context.setHeaderParam('Authorization', auth);
    context.setHeaderParam('User-Agent', this.owner.userAgent);
    context.setAgent(await this.owner.agent());
  }

  override async applyToFetchOptions(): Promise<FetchInit> {
    const auth = await this.owner.credentials.authorization();
    const headers: Record<string, string> = { 'User-Agent': this.owner.userAgent };
    if (auth) headers.Authorization = auth;
    // node-fetch's `timeout` bounds the wait for the response headers; the watch
    // stream after that is bounded by the informer's idle timer.
    return { agent: await this.owner.agent(), headers, timeout: this.owner.requestTimeoutMs } as unknown as FetchInit;
  }
}

export class KubeClient {
  readonly requestTimeoutMs: number;
  readonly userAgent: string;
  /** For client-node's Watch (and anything else of client-node that takes a KubeConfig). */
  readonly kubeConfig: KubeConfig;
  /** client-node's typed core/v1 API. Call it through `call()` to get deadlines and KubeErrors. */
  readonly core: CoreV1Api;
  /** client-node's typed apps/v1 API (the agent reads its own DaemonSet at shutdown). Through `call()` too. */
  readonly apps: AppsV1Api;
  private current: { version: string; agent: http.Agent } | undefined;
  private pending: Promise<http.Agent> | undefined;
  private readonly retired: http.Agent[] = [];
  private closed = false;

  constructor(readonly credentials: KubeCredentials, opts: KubeClientOptions = {}) {
    this.requestTimeoutMs = checkTimeout(opts.requestTimeoutMs ?? 10_000, 'requestTimeoutMs');
    this.userAgent = opts.userAgent ?? USER_AGENT;
    this.kubeConfig = new CredentialsKubeConfig(this);
    this.core = this.kubeConfig.makeApiClient(CoreV1Api);
    this.apps = this.kubeConfig.makeApiClient(AppsV1Api);
  }

  get server(): string {
    return this.credentials.server;
  }

  /**
   * The keep-alive agent for the current TLS material; rebuilt when a CA or
   * client cert file changed. The old agent keeps serving its open streams
   * and is destroyed on close().
   */
  async agent(): Promise<http.Agent> {
    if (this.closed) throw new KubeError({ code: 'Aborted', status: 0, verb: 'get', resource: '', serverMessage: 'the client is closed' });
    // One lookup at a time: concurrent requests share it instead of each building an agent.
    this.pending ??= (async () => {
      try {
        const tls = await this.credentials.tls();
        if (this.current?.version !== tls.version) {
          if (this.current) this.retired.push(this.current.agent);
          this.current = { version: tls.version, agent: this.makeAgent(tls) };
        }
        return this.current.agent;
      } finally {
        this.pending = undefined;
      }
    })();
    return this.pending;
  }

  private makeAgent(tls: TlsMaterial): http.Agent {
    // keepAlive: the informers' relists and the agent's patches reuse connections.
    if (this.server.startsWith('http:')) return new http.Agent({ keepAlive: true });
    const o: https.AgentOptions = { keepAlive: true, rejectUnauthorized: tls.rejectUnauthorized };
    if (tls.ca) o.ca = tls.ca;
    if (tls.cert) o.cert = tls.cert;
    if (tls.key) o.key = tls.key;
    if (tls.servername) o.servername = tls.servername;
    return new https.Agent(o);
  }

  /**
   * Runs one client-node call with a deadline, mapping any failure to a
   * KubeError. `fn` gets the per-call options to pass as the API method's
   * last argument (they carry the abort signal and the content type).
   * The target's namespace and name are validated first (InvalidNameError, no request made):
   * `fn` must put those same values into the path.
   */
  async call<T>(target: CallTarget, fn: (options: ConfigurationOptions) => Promise<T>, opts: CallOptions = {}): Promise<T> {
    if (target.namespace !== undefined) checkName(target.namespace, 'dns-label', 'namespace');
    if (target.name !== undefined) checkName(target.name, ruleForResource(target.resource), 'name');
    const timeoutMs = optionalTimeout(opts.timeoutMs, 'timeoutMs', this.requestTimeoutMs);
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, timeoutMs);
    const onAbort = () => ac.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const contentType = opts.contentType;
    // Per-call middleware (observable style, as the object-param API expects) runs after auth, right before the send.
    const options: ConfigurationOptions = {
      middleware: [{
        pre: (ctx: RequestContext) => {
          ctx.setSignal(ac.signal);
          if (contentType) ctx.setHeaderParam('Content-Type', contentType);
          return new Observable(Promise.resolve(ctx));
        },
        post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
      }],
      middlewareMergeStrategy: 'append',
    };
    try {
      if (opts.signal?.aborted) throw abortError();
      // The deadline also covers reading the auth files and building the agent.
      return await raceAbort(fn(options), ac.signal);
    } catch (err) {
      throw toKubeError(err, target, timedOut ? 'Timeout' : opts.signal?.aborted ? 'Aborted' : undefined, timeoutMs);
    } finally {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Destroys every connection (open watches end with an error). Idempotent. */
  close(): void {
    this.closed = true;
    this.current?.agent.destroy();
    for (const a of this.retired) a.destroy();
    this.retired.length = 0;
    this.current = undefined;
  }
}

function abortError(): Error {
  return Object.assign(new Error('aborted'), { name: 'AbortError' });
}

/** Rejects as soon as `signal` aborts, even if `p` is stuck before its request was sent. */
function raceAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortError());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError());
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

interface StatusBody { reason?: string; message?: string; code?: number }

function parseStatus(body: unknown): StatusBody | undefined {
  let b = body;
  if (typeof body === 'string') {
    try {
      b = JSON.parse(body);
    } catch {
      return body.trim() ? { message: body.trim().slice(0, 500) } : undefined;
    }
  }
  if (typeof b !== 'object' || b === null) return undefined;
  const s = b as Record<string, unknown>;
  const out: StatusBody = {};
  if (typeof s.reason === 'string') out.reason = s.reason;
  if (typeof s.message === 'string') out.message = s.message;
  if (typeof s.code === 'number') out.code = s.code;
  return out;
}

/** Any failure of a call as a KubeError (KubeConfigErrors — an unreadable token file — pass through). */
export function toKubeError(err: unknown, target: CallTarget, forced?: 'Timeout' | 'Aborted', timeoutMs?: number): KubeError | KubeConfigError {
  if (err instanceof KubeError || err instanceof KubeConfigError) return err;
  const base = { verb: target.verb, resource: target.resource, namespace: target.namespace, name: target.name, cause: err };
  if (forced) {
    return new KubeError({ ...base, code: forced, status: 0, serverMessage: forced === 'Timeout' ? `no answer within ${timeoutMs} ms` : 'aborted by the caller' });
  }
  if (err instanceof ApiException) {
    const st = parseStatus(err.body);
    const d = { ...base, code: codeForStatus(err.code, st?.reason), status: err.code } as const;
    return new KubeError({ ...d, ...(st?.reason ? { reason: st.reason } : {}), ...(st?.message ? { serverMessage: st.message } : {}) });
  }
  const status = (err as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number') return new KubeError({ ...base, code: codeForStatus(status), status, serverMessage: (err as Error).message });
  return new KubeError({ ...base, code: codeForTransport(err), status: 0, serverMessage: (err as Error)?.message ?? String(err) });
}
