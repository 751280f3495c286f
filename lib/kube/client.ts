// One connection to one API server: our credentials, one keep-alive agent,
// a deadline on every call and every failure turned into a KubeError.
//
// podwire's own requests (lib/kube/rest.ts: pods, namespaces, nodes, events,
// access reviews, list and watch) go out on Node's http/https and never load
// @kubernetes/client-node's runtime, which costs more memory and start-up
// time than the rest of the agent (docs/benchmarks.md, "Agent memory").
// client-node's typed APIs are still here for callers that want them (tests,
// library users): `core`, `apps` and `kubeConfig` load it on first use,
// synchronously (require of an ES module: Node 20.19 or later).
//
// Why a KubeConfig subclass for those: client-node asks its KubeConfig for
// auth on every request (applySecurityAuthentication for the typed APIs,
// applyToFetchOptions for Watch). Overriding those two is the smallest hook
// that lets us (a) read a rotated token before the next request, (b) reuse
// one keep-alive agent (client-node builds a new https.Agent — and re-reads
// the CA file — per request, so nothing is ever reused), and (c) give Watch a
// connect/header timeout, which it has none of in 1.4.0.
import * as http from 'node:http';
import * as https from 'node:https';
import { createRequire } from 'node:module';
import type { AppsV1Api, ConfigurationOptions, CoreV1Api, KubeConfig, RequestContext, ResponseContext } from '@kubernetes/client-node';
import { KubeConfigError, KubeError, codeForStatus, codeForTransport, type KubeVerb } from './errors.js';
import { checkName, ruleForResource } from './names.js';
import type { KubeCredentials, TlsMaterial } from './config.js';
import { HttpStatusError, send, watchStream, type RequestOptions, type RestRequest, type RestTransport, type WatchRequest } from './rest.js';
import { checkTimeout, optionalTimeout } from '../util/timeout.js';

type ClientNode = typeof import('@kubernetes/client-node');
let clientNode: ClientNode | undefined;

/** client-node itself, loaded on first use (only the typed-API getters need it). */
function loadClientNode(): ClientNode {
  clientNode ??= createRequire(import.meta.url)('@kubernetes/client-node') as ClientNode;
  return clientNode;
}

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
function credentialsKubeConfig(owner: KubeClient): KubeConfig {
  const { KubeConfig: Base } = loadClientNode();
  class CredentialsKubeConfig extends Base {
    constructor() {
      super();
      this.loadFromClusterAndUser({ name: 'podwire', server: owner.credentials.server, skipTLSVerify: false }, { name: 'podwire' });
    }

    override async applySecurityAuthentication(context: RequestContext): Promise<void> {
      const auth = await owner.authorization();
      if (auth) context.setHeaderParam('Authorization', auth);
      context.setHeaderParam('User-Agent', owner.userAgent);
      context.setAgent(await owner.agent());
    }

    override async applyToFetchOptions(): Promise<FetchInit> {
      const auth = await owner.authorization();
      const headers: Record<string, string> = { 'User-Agent': owner.userAgent };
      if (auth) headers.Authorization = auth;
      // node-fetch's `timeout` bounds the wait for the response headers; the watch
      // stream after that is bounded by the informer's idle timer.
      return { agent: await owner.agent(), headers, timeout: owner.requestTimeoutMs } as unknown as FetchInit;
    }
  }
  return new CredentialsKubeConfig();
}

/**
 * What `call()` hands its function: the signal and content type for podwire's
 * own requests (`client.send`), and the same as client-node middleware for its
 * typed APIs (built only when one of them reads it).
 */
export type CallContext = RequestOptions & ConfigurationOptions & { signal: AbortSignal };

function callContext(signal: AbortSignal, contentType: string | undefined): CallContext {
  let middleware: ConfigurationOptions['middleware'];
  return {
    signal,
    ...(contentType ? { contentType } : {}),
    middlewareMergeStrategy: 'append',
    // Per-call middleware (observable style, as the object-param API expects) runs after auth, right before the send.
    get middleware() {
      const { Observable } = loadClientNode();
      middleware ??= [{
        pre: (ctx: RequestContext) => {
          ctx.setSignal(signal);
          if (contentType) ctx.setHeaderParam('Content-Type', contentType);
          return new Observable(Promise.resolve(ctx));
        },
        post: (res: ResponseContext) => new Observable(Promise.resolve(res)),
      }];
      return middleware;
    },
  };
}

export class KubeClient {
  readonly requestTimeoutMs: number;
  readonly userAgent: string;
  private official: { kubeConfig: KubeConfig; core?: CoreV1Api; apps?: AppsV1Api } | undefined;
  private readonly transport: RestTransport;
  private current: { version: string; agent: http.Agent } | undefined;
  private pending: Promise<http.Agent> | undefined;
  private readonly retired: http.Agent[] = [];
  private closed = false;

  constructor(readonly credentials: KubeCredentials, opts: KubeClientOptions = {}) {
    this.requestTimeoutMs = checkTimeout(opts.requestTimeoutMs ?? 10_000, 'requestTimeoutMs');
    this.userAgent = opts.userAgent ?? USER_AGENT;
    this.transport = this;
  }

  /** For client-node's Watch and typed APIs (anything of client-node that takes a KubeConfig); loads client-node. */
  get kubeConfig(): KubeConfig {
    this.official ??= { kubeConfig: credentialsKubeConfig(this) };
    return this.official.kubeConfig;
  }

  /** client-node's typed core/v1 API (loads client-node). Call it through `call()` to get deadlines and KubeErrors. */
  get core(): CoreV1Api {
    const kc = this.kubeConfig;
    return (this.official!.core ??= kc.makeApiClient(loadClientNode().CoreV1Api));
  }

  /** client-node's typed apps/v1 API (loads client-node). Through `call()` too. */
  get apps(): AppsV1Api {
    const kc = this.kubeConfig;
    return (this.official!.apps ??= kc.makeApiClient(loadClientNode().AppsV1Api));
  }

  /** The Authorization header value for the next request (a rotated token is read here). */
  authorization(): Promise<string | undefined> {
    return this.credentials.authorization();
  }

  /**
   * One JSON request of podwire's own (no client-node), for use inside `call()`:
   * `client.call(target, (o) => client.send({ method: 'GET', path }, o))`.
   */
  send<T>(req: RestRequest, o: RequestOptions): Promise<T> {
    return send<T>(this.transport, req, o);
  }

  /** A watch stream (lib/kube/rest.ts watchStream); the informer owns the loop around it. */
  watch(req: WatchRequest, onEvent: (type: string, obj: unknown) => void, onDone: (err?: unknown) => void): void {
    watchStream(this.transport, req, onEvent, onDone);
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
  async call<T>(target: CallTarget, fn: (options: CallContext) => Promise<T>, opts: CallOptions = {}): Promise<T> {
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
    try {
      if (opts.signal?.aborted) throw abortError();
      // The deadline also covers reading the auth files and building the agent.
      return await raceAbort(fn(callContext(ac.signal, opts.contentType)), ac.signal);
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
  if (err instanceof HttpStatusError || (clientNode && err instanceof clientNode.ApiException)) {
    const e = err as { code?: number; statusCode?: number; body: unknown };
    const code = err instanceof HttpStatusError ? err.statusCode : e.code!;
    const st = parseStatus(e.body);
    const d = { ...base, code: codeForStatus(code, st?.reason), status: code } as const;
    return new KubeError({ ...d, ...(st?.reason ? { reason: st.reason } : {}), ...(st?.message ? { serverMessage: st.message } : {}) });
  }
  const status = (err as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number') return new KubeError({ ...base, code: codeForStatus(status), status, serverMessage: (err as Error).message });
  return new KubeError({ ...base, code: codeForTransport(err), status: 0, serverMessage: (err as Error)?.message ?? String(err) });
}
