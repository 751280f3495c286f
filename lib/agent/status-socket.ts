// The agent's admin socket, `<CNI_AGENT_RUN_DIR>/status.sock`: what `podwire status` and
// `podwire explain` ask. Root-only by where it lives and what it is (the run dir is 0700, the
// socket 0600, both root's: lib/cni/run-dir.ts, lib/cni/unix-listener.ts), read-only, and bounded
// like the agent's other listeners (lib/util/http-guard.ts): few connections, headers within a
// deadline, no request bodies, small headers, and an answer that refuses to grow past a cap.
//
//   GET /v1/status                     → NodeStatus (lib/agent/status.ts)
//   GET /v1/explain?pod=<ns>/<name>    → Explanation
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenUnix } from '../cni/unix-listener.js';
import { guardHttpServer, type HttpGuardOptions } from '../util/http-guard.js';
import { explainPod, nodeStatus, type StatusSources } from './status.js';

export const STATUS_SOCKET = 'status.sock';

/** Connections at once: a person or a script asks now and then; more are closed as they arrive. */
export const STATUS_GUARD: Readonly<HttpGuardOptions> = Object.freeze({ maxConnections: 8, headerDeadlineMs: 2_000, idleMs: 5_000 });
/** Request line and headers at most (a GET needs a few hundred bytes). */
export const STATUS_MAX_HEADER_BYTES = 4096;
/** An answer larger than this is refused (503) rather than built for a misbehaving node: ~1.5 KB a pod, 10,000 pods fit. */
export const STATUS_MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/** RFC 1123 label (a namespace) and subdomain (a pod name), as the API server validates them. */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const POD_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** `<namespace>/<name>` checked the way the API server checks the two names; undefined when it is not one. */
export function parsePodRef(ref: string): { namespace: string; name: string } | undefined {
  const slash = ref.indexOf('/');
  if (slash < 0 || ref.indexOf('/', slash + 1) >= 0) return undefined;
  const namespace = ref.slice(0, slash);
  const name = ref.slice(slash + 1);
  return NAMESPACE.test(namespace) && POD_NAME.test(name) ? { namespace, name } : undefined;
}

export interface StatusServer {
  readonly path: string;
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = `${JSON.stringify(body)}\n`;
  if (Buffer.byteLength(text) > STATUS_MAX_RESPONSE_BYTES) {
    send(res, 503, { error: `the answer exceeds ${STATUS_MAX_RESPONSE_BYTES} bytes` });
    return;
  }
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store' });
  res.end(text);
}

function handle(req: IncomingMessage, res: ServerResponse, sources: () => StatusSources | undefined): void {
  // No request carries a body: one announced (or chunked) is refused before a byte of it is read.
  if ((req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0') || req.headers['transfer-encoding'] !== undefined) {
    res.setHeader('Connection', 'close');
    send(res, 413, { error: 'requests carry no body' });
    req.socket.destroySoon();
    return;
  }
  if (req.method !== 'GET') {
    res.setHeader('Allow', 'GET');
    send(res, 405, { error: `method ${req.method} not allowed` });
    return;
  }
  let url: URL;
  try {
    url = new URL(req.url ?? '/', 'http://status');
  } catch {
    send(res, 400, { error: 'bad request target' });
    return;
  }
  const s = sources();
  if (!s) {
    send(res, 503, { error: 'the agent is starting: nothing to report yet' });
    return;
  }
  if (url.pathname === '/v1/status') {
    send(res, 200, nodeStatus(s));
    return;
  }
  if (url.pathname === '/v1/explain') {
    const refs = url.searchParams.getAll('pod');
    const ref = refs.length === 1 ? parsePodRef(refs[0]!) : undefined;
    if (!ref) {
      send(res, 400, { error: 'pod=<namespace>/<name> (once, both valid Kubernetes names) is required' });
      return;
    }
    send(res, 200, explainPod(s, ref.namespace, ref.name));
    return;
  }
  send(res, 404, { error: `no such path ${url.pathname}` });
}

/**
 * Serves `<runDir>/status.sock`. `sources` is read per request (undefined until the agent has
 * something to show: 503). The socket replaces a stale one of an earlier run.
 */
export async function startStatusServer(opts: { runDir: string; sources: () => StatusSources | undefined; guard?: Partial<HttpGuardOptions> }): Promise<StatusServer> {
  const server: Server = createServer({ maxHeaderSize: STATUS_MAX_HEADER_BYTES }, (req, res) => {
    try {
      handle(req, res, opts.sources);
    } catch (err) {
      if (!res.headersSent) send(res, 500, { error: (err as Error)?.message ?? String(err) });
      else res.destroy();
    }
  });
  server.headersTimeout = STATUS_GUARD.headerDeadlineMs;
  server.requestTimeout = STATUS_GUARD.headerDeadlineMs * 2;
  guardHttpServer(server, { ...STATUS_GUARD, ...opts.guard });
  const listener = await listenUnix(server, opts.runDir, STATUS_SOCKET, { dirMode: 0o700 });
  return {
    path: listener.path,
    close: () => new Promise<void>((resolve) => {
      server.close(() => { void listener.unlinkIfOurs().then(resolve); });
      server.closeAllConnections();
    }),
  };
}
