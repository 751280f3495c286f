// The agent's two small HTTP servers (istio-cni.md §1.2, §3.7, §9): health on :8000
// (`/healthz`, `/readyz`) and Prometheus metrics on :<MONITORING_PORT> (`/metrics`, 15014).
//
// Both answer from memory and never read a request body: GET (and HEAD) only, 405 otherwise,
// 404 for other paths; a request that carries a body gets `Connection: close` so the body is
// never drained. Header size, header/request time and idle keep-alive are bounded, and so are
// open connections (lib/util/http-guard.ts): with hostNetwork anyone who reaches the node connects.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { Readiness } from './readiness.js';
import { DEFAULT_HTTP_GUARD, guardHttpServer, type HttpGuardOptions } from '../util/http-guard.js';
import { optionalTimeout } from '../util/timeout.js';

export { Readiness, READINESS_CONDITIONS, type ReadinessCondition } from './readiness.js';


export type MonitorServerErrorCode =
  /** Bad options (port, host). */
  | 'ERR_MONITOR_OPTIONS'
  /** listen() failed (EADDRINUSE, EACCES, EADDRNOTAVAIL…); the errno code is in `errno`. */
  | 'ERR_MONITOR_LISTEN'
  /** Collecting the registry failed during a scrape (the client got a 500). */
  | 'ERR_MONITOR_COLLECT'
  /** The server failed after it started listening. */
  | 'ERR_MONITOR_SERVER';

export type MonitorServerKind = 'health' | 'metrics';

export class MonitorServerError extends Error {
  constructor(
    readonly code: MonitorServerErrorCode,
    readonly server: MonitorServerKind,
    message: string,
    opts: { cause?: unknown; errno?: string } = {},
  ) {
    super(`${server} server: ${message}`, opts.cause === undefined ? undefined : { cause: opts.cause });
    if (opts.errno !== undefined) this.errno = opts.errno;
  }
  declare readonly errno?: string;

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'MonitorServerError', enumerable: false });
  }
}

export interface ServerOptions {
  /** TCP port; 0 = any free port (tests). */
  port: number;
  /** Address to bind; default Node's (`::` when IPv6 is available, else `0.0.0.0`), as upstream's `:port`. */
  host?: string;
  /** Called with errors that happen while serving (a failed scrape, a server error). */
  onError?: (err: MonitorServerError) => void;
  /** How long close() waits for in-flight requests before cutting connections (ms, default 2000). */
  closeGraceMs?: number;
  /** Connection cap, header deadline and idle timeout (lib/util/http-guard.ts; defaults there). */
  guard?: Partial<HttpGuardOptions>;
}

export interface RunningServer {
  readonly server: Server;
  /** The bound address and port (the real port when 0 was asked). */
  readonly host: string;
  readonly port: number;
  /** `http://host:port` (IPv6 hosts bracketed). */
  readonly url: string;
  /** Stop accepting, close idle connections, let in-flight requests finish (up to closeGraceMs), then resolve. Idempotent. */
  close(): Promise<void>;
}

export interface HealthServer extends RunningServer {
  readonly readiness: Readiness;
}

export interface HealthServerOptions extends ServerOptions {
  /** The conditions /readyz checks; a new, unset one by default (see `.readiness`). */
  readiness?: Readiness;
}

export interface MetricsServerOptions extends ServerOptions {
  registry: Registry;
}

const MAX_HEADER_BYTES = 8 * 1024;
const HEADERS_TIMEOUT_MS = 5_000;
const REQUEST_TIMEOUT_MS = 10_000;
const KEEP_ALIVE_TIMEOUT_MS = 5_000;

type Route = (req: IncomingMessage, res: ServerResponse) => void;

/** `/healthz` → 200 while serving; `/readyz` → 200 when every readiness condition is set, else 503 listing the unmet ones. */
export function startHealthServer(opts: HealthServerOptions): Promise<HealthServer> {
  const readiness = opts.readiness ?? new Readiness();
  const routes: Record<string, Route> = {
    '/healthz': (req, res) => send(req, res, 200, 'ok\n'),
    '/readyz': (req, res) => {
      const unmet = readiness.unmet();
      if (unmet.length === 0) send(req, res, 200, 'ready\n');
      else send(req, res, 503, `not ready: ${unmet.join(', ')}\n`);
    },
  };
  return start('health', opts, routes).then((s) => Object.assign(s, { readiness }));
}

/** `/metrics` → the registry in Prometheus text format, with the registry's content type. */
export function startMetricsServer(opts: MetricsServerOptions): Promise<RunningServer> {
  const { registry } = opts;
  if (registry === null || typeof registry !== 'object' || typeof registry.metrics !== 'function') {
    return Promise.reject(new MonitorServerError('ERR_MONITOR_OPTIONS', 'metrics', 'registry must be a prom-client Registry'));
  }
  const routes: Record<string, Route> = {
    '/metrics': (req, res) => {
      registry.metrics().then(
        (text) => send(req, res, 200, text, registry.contentType),
        (err: unknown) => {
          opts.onError?.(new MonitorServerError('ERR_MONITOR_COLLECT', 'metrics', 'collecting metrics failed', { cause: err }));
          send(req, res, 500, 'collecting metrics failed\n');
        },
      );
    },
  };
  return start('metrics', opts, routes);
}

function send(req: IncomingMessage, res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  if (res.headersSent || res.destroyed) return;
  const buf = Buffer.from(body, 'utf8');
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', buf.length);
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  if (hasBody(req)) res.setHeader('Connection', 'close');  // never drain a body we don't read
  res.end(req.method === 'HEAD' ? undefined : buf);
}

function hasBody(req: IncomingMessage): boolean {
  const len = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
}

function validate(kind: MonitorServerKind, opts: ServerOptions): void {
  if (opts === null || typeof opts !== 'object') throw new MonitorServerError('ERR_MONITOR_OPTIONS', kind, 'options must be an object');
  const { port, host, closeGraceMs } = opts;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new MonitorServerError('ERR_MONITOR_OPTIONS', kind, `port must be an integer 0-65535, got ${String(port)}`);
  }
  if (host !== undefined && (typeof host !== 'string' || host === '')) {
    throw new MonitorServerError('ERR_MONITOR_OPTIONS', kind, 'host must be a non-empty string');
  }
  try {
    optionalTimeout(closeGraceMs, 'closeGraceMs', undefined, { allowZero: true });
  } catch (e) {
    throw new MonitorServerError('ERR_MONITOR_OPTIONS', kind, (e as Error).message);
  }
}

function start(kind: MonitorServerKind, opts: ServerOptions, routes: Record<string, Route>): Promise<RunningServer> {
  try {
    validate(kind, opts);
  } catch (e) {
    return Promise.reject(e);
  }
  const server = createServer(
    { maxHeaderSize: MAX_HEADER_BYTES, headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS, keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS },
    (req, res) => {
      const path = (req.url ?? '').split('?', 1)[0] ?? '';
      const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
      if (route === undefined) return send(req, res, 404, 'not found\n');
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.setHeader('Allow', 'GET, HEAD');
        return send(req, res, 405, 'method not allowed\n');
      }
      route(req, res);
    },
  );
  server.maxHeadersCount = 64;
  try {
    guardHttpServer(server, { ...DEFAULT_HTTP_GUARD, ...opts.guard });
  } catch (e) {
    return Promise.reject(new MonitorServerError('ERR_MONITOR_OPTIONS', kind, (e as Error).message));
  }

  return new Promise<RunningServer>((resolve, reject) => {
    const onListenError = (err: NodeJS.ErrnoException) => {
      reject(new MonitorServerError('ERR_MONITOR_LISTEN', kind, `cannot listen on ${opts.host ?? '*'}:${opts.port}: ${err.message}`, { cause: err, errno: err.code ?? '' }));
    };
    server.once('error', onListenError);
    server.listen({ port: opts.port, host: opts.host }, () => {
      server.off('error', onListenError);
      server.on('error', (err) => opts.onError?.(new MonitorServerError('ERR_MONITOR_SERVER', kind, err.message, { cause: err })));
      const addr = server.address() as AddressInfo;
      const host = addr.address;
      let closing: Promise<void> | undefined;
      resolve({
        server,
        host,
        port: addr.port,
        url: `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`,
        close() {
          closing ??= new Promise<void>((done) => {
            const timer = setTimeout(() => server.closeAllConnections(), opts.closeGraceMs ?? 2_000);
            timer.unref();
            server.close(() => {
              clearTimeout(timer);
              done();
            });
            server.closeIdleConnections();
          });
          return closing;
        },
      });
    });
  });
}
