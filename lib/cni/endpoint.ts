// The agent's CNI event endpoint (istio-cni.md §1.4, §2.5, §5.5; architecture.md "The node
// process"): HTTP/1.1 over a unix stream socket at `<runDir>/pluginevent.sock`.
//
// Routes: `POST /cmdadd` — upstream's plugin body (see cni-types.ts), validated, then handed to an
// injected `onCmdAdd` (pod lookup + enrollment live in the agent, not here). `POST /v1/cni` —
// podwire's own shim (docs/cni-protocol.md): the body goes to `onCni`, the answer is 200 with the
// shim's stdout as the body and its exit code in `X-Podwire-Cni-Exit`, or 503 while the agent is
// not ready (the shim retries), or 404 when no `onCni` is given.
//
// Wire behaviour, as upstream's `cni-watcher.go` answers (`http.Error`: text/plain, message + "\n"):
//   200, empty body              the handler resolved
//   400 `<message>`              empty body, bad JSON, a field of the wrong type/value
//   500 `<handler error text>`   the handler rejected (upstream: pod lookup or AddPodToMesh failed)
//   500 `timed out …`            the handler did not settle within handlerTimeoutMs (default 5 s,
//                                the plugin's own total timeout; upstream has only the request context)
//   404 `404 page not found`     any other path (Go's NotFound text)
//   405 `Method Not Allowed`     a non-POST on a known path, with `Allow: POST`. Upstream's mux
//                                accepts any method on /cmdadd; only POST is intended, so only POST.
//   413                          body over maxBodyBytes (1 MiB; upstream reads unbounded)
//   503 `node agent busy …`      the bodies in flight would exceed bodyBudgetBytes (the shim retries)
//   408                          the body did not arrive within bodyDeadlineMs of its headers
// 413, 503 (busy) and 408 close the connection without reading the rest of the body.
// The handler's AbortSignal fires on timeout, on client disconnect (Go's request context) and on close().
//
// Bounds (the socket is reachable by anything root on the node; a flood must neither take the
// agent to its fd limit nor its memory up): lib/util/http-guard.ts caps connections (more are
// closed at accept), closes a connection whose request headers are not complete headerDeadlineMs
// after accept or the previous answer, and one without traffic for idleMs (above the 25 s in
// which the agent answers every invocation, lib/cni/invoke.ts); lib/util/http-body.ts bounds
// each body in size and time, and all bodies held at once (read, or in a handler) by one budget.
//
// Socket: upstream chmods its socket 0666 after listen (§1.4). podwire's is 0600 (only the root
// agent and root-run plugins talk to it), made by unix-listener.ts without a window where it is
// wider, replacing a stale socket of a previous run atomically. runDir is `mkdir -p`'d 0750.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { CmdAddBodyError, parseCmdAddBody, type CmdAddRequest } from './cmdadd-body.js';
import { guardHttpServer, type HttpGuardOptions } from '../util/http-guard.js';
import { ByteBudget, readBoundedBody, type Lease } from '../util/http-body.js';
import { optionalTimeout } from '../util/timeout.js';
import { listenUnix, UnixListenerError, type UnixListener } from './unix-listener.js';

export { CmdAddBodyError, parseCmdAddBody, unmapIp, type CmdAddRequest, type CniIpConfig, type CmdAddBodyErrorCode } from './cmdadd-body.js';

import { PLUGIN_EVENT_SOCKET } from './constants.js';

export { PLUGIN_EVENT_SOCKET };
export const CMDADD_PATH = '/cmdadd';
/** podwire's shim: a whole CNI invocation (docs/cni-protocol.md). */
export const CNI_PATH = '/v1/cni';
/** The shim's exit code rides in this response header; the body is its stdout. */
export const CNI_EXIT_HEADER = 'X-Podwire-Cni-Exit';
export const DEFAULT_MAX_BODY_BYTES = 1 << 20;
/**
 * The largest `/v1/cni` request podwire-cni sends: its stdin (at most 1 MiB, and valid JSON: the
 * shim parses it before sending) as a JSON string, which escaping at most doubles (`"`, `\` and
 * the whitespace \t \n \r are the only bytes of valid JSON that get escaped, each to 2 bytes),
 * plus the CNI_* variables (each at most 64 KiB; a runtime sets half a dozen short ones).
 */
export const SHIM_REQUEST_MAX_BYTES = 3 << 20;
/** All request bodies held at once (being read or in a handler); a request past it is answered 503. */
export const DEFAULT_BODY_BUDGET_BYTES = 4 << 20;
/** A body must be complete this long after its headers (the shim writes its request at once). */
export const DEFAULT_BODY_DEADLINE_MS = 5_000;
/**
 * Connections at most (a node runs ~110 pods; ADD and DEL of all of them at once fit), headers
 * within 5 s of accept, no connection silent for longer than the 25 s every answer takes at most.
 */
export const DEFAULT_CNI_GUARD: Readonly<HttpGuardOptions> = Object.freeze({ maxConnections: 256, headerDeadlineMs: 5_000, idleMs: 30_000 });
/** The upstream plugin's total HTTP timeout (§2.5): after that nobody is waiting for the answer. */
export const DEFAULT_HANDLER_TIMEOUT_MS = 5_000;

const MAX_HEADER_BYTES = 16 * 1024;
const HEADERS_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 10_000;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;
/** sun_path is 108 bytes including the NUL. */
const MAX_SOCKET_PATH_BYTES = 107;

export type CniEndpointErrorCode =
  /** Bad options (runDir, handler, limits). */
  | 'ERR_CNI_ENDPOINT_OPTIONS'
  /** Creating the run dir or the socket failed; the errno code is in `errno`. */
  | 'ERR_CNI_ENDPOINT_LISTEN'
  /** onCmdAdd rejected (the client got a 500 with its message). */
  | 'ERR_CNI_ENDPOINT_HANDLER'
  /** onCmdAdd did not settle within handlerTimeoutMs (the client got a 500). */
  | 'ERR_CNI_ENDPOINT_TIMEOUT'
  /** The server failed after it started listening. */
  | 'ERR_CNI_ENDPOINT_SERVER';

export class CniEndpointError extends Error {
  constructor(
    readonly code: CniEndpointErrorCode,
    message: string,
    opts: { cause?: unknown; errno?: string } = {},
  ) {
    super(`cni endpoint: ${message}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    if (opts.errno !== undefined) this.errno = opts.errno;
  }
  declare readonly errno?: string;

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'CniEndpointError', enumerable: false });
  }
}

export interface CmdAddContext {
  /** Aborted on handler timeout, client disconnect or close(). */
  signal: AbortSignal;
}

export interface CniEndpointOptions {
  /** CNI_AGENT_RUN_DIR; the socket is `<runDir>/pluginevent.sock`. */
  runDir: string;
  /** Look the pod up and enroll it; reject to fail the pod's sandbox (500 with the error's message). */
  onCmdAdd: (req: CmdAddRequest, ctx: CmdAddContext) => Promise<void>;
  /** Default 5000 ms. */
  handlerTimeoutMs?: number;
  /** Default 1 MiB. */
  maxBodyBytes?: number;
  /** Bytes of all bodies held at once (default 4 MiB; at least maxBodyBytes). */
  bodyBudgetBytes?: number;
  /** Default 5000 ms. */
  bodyDeadlineMs?: number;
  /** Connection cap, header deadline and idle timeout; DEFAULT_CNI_GUARD for what is not given. */
  guard?: Partial<HttpGuardOptions>;
  /** How long close() waits for in-flight requests before cutting connections and aborting handlers (ms, default 2000). */
  closeGraceMs?: number;
  /** Handler failures, timeouts and server errors. */
  onError?: (err: CniEndpointError) => void;
  /**
   * `POST /v1/cni`: one CNI invocation (the raw body); resolves to what the
   * shim prints and exits with, or 'not-ready' (503: the shim retries).
   * Absent: the route answers 404.
   */
  onCni?: (body: Buffer, ctx: CmdAddContext) => Promise<{ exitCode: number; stdout: string } | 'not-ready'>;
  /** Every answered request (for `istio_cni_plugin_requests_total{response_code}`). */
  onResponse?: (info: { path: string; status: number }) => void;
}

export interface CniEndpoint {
  readonly server: Server;
  readonly socketPath: string;
  /** Body bytes charged to the budget now: 0 whenever no request holds a body. */
  readonly bodyBytesInFlight: number;
  /** Stop accepting, let in-flight requests finish (up to closeGraceMs), unlink our socket. Idempotent. */
  close(): Promise<void>;
}

interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  path: string;
  opts: Required<Pick<CniEndpointOptions, 'handlerTimeoutMs' | 'maxBodyBytes' | 'bodyDeadlineMs'>> & CniEndpointOptions;
  /** Aborted by close() once the grace period is over. */
  closing: AbortSignal;
  /** This request's share of the body budget, released when its route is done. */
  lease: Lease;
}

interface Route {
  method: 'POST';
  handle(ctx: Ctx): Promise<void>;
}

const ROUTES: Record<string, Route> = {
  [CMDADD_PATH]: { method: 'POST', handle: handleCmdAdd },
  [CNI_PATH]: { method: 'POST', handle: handleCni },
};

function send(ctx: Ctx, status: number, message?: string, close = false): void {
  const { res } = ctx;
  if (res.headersSent || res.destroyed) return;
  res.statusCode = status;
  const buf = message === undefined ? Buffer.alloc(0) : Buffer.from(`${message}\n`, 'utf8');  // Go's http.Error
  if (message !== undefined) {
    res.setHeader('Content-Type', 'text/plain; charset=utf-8');
    res.setHeader('X-Content-Type-Options', 'nosniff');
  }
  res.setHeader('Content-Length', buf.length);
  if (close) {
    // The rest of the request body is never read: answer, then drop the connection.
    res.setHeader('Connection', 'close');
    res.once('finish', () => ctx.req.socket.destroy());
  }
  res.end(buf);
  ctx.opts.onResponse?.({ path: ctx.path, status });
}

/** Reads the body within its bounds; undefined when a 413, 503 or 408 has been sent instead (or the client left). */
async function readBody(ctx: Ctx): Promise<Buffer | undefined> {
  const { req, opts } = ctx;
  const r = await readBoundedBody(req, { maxBytes: opts.maxBodyBytes, deadlineMs: opts.bodyDeadlineMs, lease: ctx.lease });
  if (r.ok) return r.body;
  if (r.reason === 'too-large') send(ctx, 413, `request body larger than ${opts.maxBodyBytes} bytes`, true);
  else if (r.reason === 'busy') send(ctx, 503, 'node agent busy: too many request bodies in flight', true);
  else if (r.reason === 'timeout') send(ctx, 408, `request body not complete within ${opts.bodyDeadlineMs} ms`, true);
  // 'gone': a client that went away mid-body has nobody to answer (upstream: read error → 500).
  return undefined;
}

async function handleCmdAdd(ctx: Ctx): Promise<void> {
  const body = await readBody(ctx);
  if (body === undefined) return;

  let ev: CmdAddRequest;
  try {
    ev = parseCmdAddBody(body);
  } catch (e) {
    if (e instanceof CmdAddBodyError) return send(ctx, 400, e.message);
    throw e;
  }

  const { opts, res } = ctx;
  const ac = new AbortController();
  const onGone = () => { if (!res.writableFinished) ac.abort(new Error('client disconnected')); };
  const onClosing = () => ac.abort(new Error('endpoint closing'));
  res.once('close', onGone);
  ctx.closing.addEventListener('abort', onClosing, { once: true });

  const pod = `${ev.podNamespace}/${ev.podName}`;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), opts.handlerTimeoutMs);
  });
  try {
    let work: Promise<void>;
    try {
      work = Promise.resolve(opts.onCmdAdd(ev, { signal: ac.signal }));
    } catch (e) {
      work = Promise.reject(e);  // a handler that throws synchronously is a failure like any other
    }
    const outcome = await Promise.race([work.then(() => 'ok' as const, (e: unknown) => ({ err: e })), timedOut]);
    if (outcome === 'ok') return send(ctx, 200);
    if (outcome === 'timeout') {
      const msg = `timed out after ${opts.handlerTimeoutMs} ms adding pod ${pod} to the mesh`;
      ac.abort(new Error(msg));
      work.catch(() => {});  // a late rejection after the timeout has nobody to report to
      opts.onError?.(new CniEndpointError('ERR_CNI_ENDPOINT_TIMEOUT', msg));
      return send(ctx, 500, msg);
    }
    const text = outcome.err instanceof Error ? outcome.err.message : String(outcome.err);
    opts.onError?.(new CniEndpointError('ERR_CNI_ENDPOINT_HANDLER', `adding pod ${pod}: ${text}`, { cause: outcome.err }));
    return send(ctx, 500, text);
  } finally {
    clearTimeout(timer);
    res.off('close', onGone);
    ctx.closing.removeEventListener('abort', onClosing);
  }
}

// The plugin's own deadline (agent_timeout_ms) bounds this; closing the endpoint aborts it.
async function handleCni(ctx: Ctx): Promise<void> {
  const { opts, res } = ctx;
  if (!opts.onCni) return send(ctx, 404, 'no CNI plugin handler');
  const body = await readBody(ctx);
  if (body === undefined) return;
  const ac = new AbortController();
  const onGone = () => { if (!res.writableFinished) ac.abort(new Error('client disconnected')); };
  const onClosing = () => ac.abort(new Error('endpoint closing'));
  res.once('close', onGone);
  ctx.closing.addEventListener('abort', onClosing, { once: true });
  try {
    const reply = await opts.onCni(body, { signal: ac.signal });
    if (reply === 'not-ready') return send(ctx, 503, 'node agent not ready');
    if (res.headersSent || res.destroyed) return;
    const buf = Buffer.from(reply.stdout, 'utf8');
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json');
    res.setHeader(CNI_EXIT_HEADER, String(reply.exitCode));
    res.setHeader('Content-Length', buf.length);
    res.end(buf);
    opts.onResponse?.({ path: ctx.path, status: 200 });
  } catch (err) {
    opts.onError?.(new CniEndpointError('ERR_CNI_ENDPOINT_HANDLER', `CNI invocation: ${(err as Error)?.message ?? String(err)}`, { cause: err }));
    return send(ctx, 500, (err as Error)?.message ?? String(err));
  } finally {
    res.off('close', onGone);
    ctx.closing.removeEventListener('abort', onClosing);
  }
}

function option(check: () => unknown): void {
  try {
    check();
  } catch (e) {
    throw new CniEndpointError('ERR_CNI_ENDPOINT_OPTIONS', (e as Error).message);
  }
}

function validate(opts: CniEndpointOptions): void {
  if (opts === null || typeof opts !== 'object') throw new CniEndpointError('ERR_CNI_ENDPOINT_OPTIONS', 'options must be an object');
  if (typeof opts.runDir !== 'string' || opts.runDir === '') throw new CniEndpointError('ERR_CNI_ENDPOINT_OPTIONS', 'runDir must be a non-empty string');
  if (typeof opts.onCmdAdd !== 'function') throw new CniEndpointError('ERR_CNI_ENDPOINT_OPTIONS', 'onCmdAdd must be a function');
  option(() => optionalTimeout(opts.handlerTimeoutMs, 'handlerTimeoutMs', undefined));
  option(() => optionalTimeout(opts.closeGraceMs, 'closeGraceMs', undefined, { allowZero: true }));
  const max = opts.maxBodyBytes;
  if (max !== undefined && !(Number.isSafeInteger(max) && max > 0)) {
    throw new CniEndpointError('ERR_CNI_ENDPOINT_OPTIONS', `maxBodyBytes must be a positive integer, got ${String(max)}`);
  }
  const budget = opts.bodyBudgetBytes;
  if (budget !== undefined && !(Number.isSafeInteger(budget) && budget >= (max ?? DEFAULT_MAX_BODY_BYTES))) {
    throw new CniEndpointError('ERR_CNI_ENDPOINT_OPTIONS', `bodyBudgetBytes must be an integer >= maxBodyBytes, got ${String(budget)}`);
  }
  option(() => optionalTimeout(opts.bodyDeadlineMs, 'bodyDeadlineMs', undefined));
  const sock = join(opts.runDir, PLUGIN_EVENT_SOCKET);
  if (Buffer.byteLength(sock) > MAX_SOCKET_PATH_BYTES) {
    throw new CniEndpointError('ERR_CNI_ENDPOINT_OPTIONS', `socket path longer than ${MAX_SOCKET_PATH_BYTES} bytes: ${sock}`);
  }
}

/** Creates `<runDir>/pluginevent.sock` (mode 0600) and serves it. */
export async function startCniEndpoint(options: CniEndpointOptions): Promise<CniEndpoint> {
  validate(options);
  const opts = {
    ...options,
    handlerTimeoutMs: options.handlerTimeoutMs ?? DEFAULT_HANDLER_TIMEOUT_MS,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    bodyDeadlineMs: options.bodyDeadlineMs ?? DEFAULT_BODY_DEADLINE_MS,
  };
  const socketPath = join(opts.runDir, PLUGIN_EVENT_SOCKET);
  const closingAc = new AbortController();
  const budget = new ByteBudget(options.bodyBudgetBytes ?? Math.max(DEFAULT_BODY_BUDGET_BYTES, opts.maxBodyBytes));

  const server = createServer(
    { maxHeaderSize: MAX_HEADER_BYTES, headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS },
    (req, res) => {
      const path = (req.url ?? '').split('?', 1)[0] ?? '';
      const ctx: Ctx = { req, res, path, opts, closing: closingAc.signal, lease: budget.lease() };
      const route = Object.hasOwn(ROUTES, path) ? ROUTES[path] : undefined;
      const hasBody = req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
      if (route === undefined) return send(ctx, 404, '404 page not found', hasBody);
      if (req.method !== route.method) {
        res.setHeader('Allow', route.method);
        return send(ctx, 405, 'Method Not Allowed', hasBody);
      }
      route.handle(ctx).catch((err: unknown) => {
        opts.onError?.(new CniEndpointError('ERR_CNI_ENDPOINT_SERVER', (err as Error)?.message ?? String(err), { cause: err }));
        send(ctx, 500, 'internal error');
      }).finally(() => ctx.lease.release());
    },
  );
  server.maxHeadersCount = 64;
  try {
    guardHttpServer(server, { ...DEFAULT_CNI_GUARD, ...opts.guard });
  } catch (e) {
    throw new CniEndpointError('ERR_CNI_ENDPOINT_OPTIONS', (e as Error).message);
  }

  let listener: UnixListener;
  try {
    listener = await listenUnix(server, opts.runDir, PLUGIN_EVENT_SOCKET);
  } catch (e) {
    throw e instanceof UnixListenerError
      ? new CniEndpointError('ERR_CNI_ENDPOINT_LISTEN', e.message, { cause: e, errno: e.errno })
      : e;
  }

  server.on('error', (err) => opts.onError?.(new CniEndpointError('ERR_CNI_ENDPOINT_SERVER', err.message, { cause: err })));

  let closing: Promise<void> | undefined;
  return {
    server,
    socketPath,
    get bodyBytesInFlight() {
      return budget.used;
    },
    close() {
      closing ??= (async () => {
        await new Promise<void>((done) => {
          const timer = setTimeout(() => {
            closingAc.abort();
            server.closeAllConnections();
          }, opts.closeGraceMs ?? 2_000);
          timer.unref();
          server.close(() => {
            clearTimeout(timer);
            done();
          });
          server.closeIdleConnections();
        });
        // Unlink only our own socket: a newer agent may already have replaced the path.
        await listener.unlinkIfOurs();
      })();
      return closing;
    },
  };
}
