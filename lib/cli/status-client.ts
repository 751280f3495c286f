// The client side of the agent's status socket (lib/agent/status-socket.ts), for `podwire status`
// and `podwire explain`: one GET, bounded in time and size, answered JSON checked for the version
// this CLI speaks. Failures are StatusClientError with a code, never a matched message.
import { request } from 'node:http';
import { join } from 'node:path';
import { STATUS_MAX_RESPONSE_BYTES, STATUS_SOCKET } from '../agent/status-socket.js';
import { STATUS_VERSION } from '../agent/status.js';

export type StatusClientErrorCode =
  /** Nothing listens at the path, or it may not be opened (not root). */
  | 'ERR_STATUS_CONNECT'
  | 'ERR_STATUS_TIMEOUT'
  | 'ERR_STATUS_TOO_LARGE'
  /** The agent answered with an error status. */
  | 'ERR_STATUS_HTTP'
  /** Not JSON, or a version this CLI does not know. */
  | 'ERR_STATUS_BAD_ANSWER';

export class StatusClientError extends Error {
  constructor(readonly code: StatusClientErrorCode, message: string, readonly detail: { status?: number; errno?: string } = {}, opts: { cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'StatusClientError', enumerable: false });
  }
}

/** `<CNI_AGENT_RUN_DIR or /var/run/istio-cni>/status.sock`: where the agent on this node serves it. */
export function defaultStatusSocket(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.CNI_AGENT_RUN_DIR || '/var/run/istio-cni', STATUS_SOCKET);
}

export const STATUS_CLIENT_TIMEOUT_MS = 10_000;

/** GET `path` on the socket; resolves with the parsed JSON of a 200 answer. */
export function getStatus<T>(socketPath: string, path: string, opts: { timeoutMs?: number; maxBytes?: number } = {}): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? STATUS_CLIENT_TIMEOUT_MS;
  const maxBytes = opts.maxBytes ?? STATUS_MAX_RESPONSE_BYTES;
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const fail = (err: StatusClientError) => {
      if (settled) return;
      settled = true;
      req.destroy();
      reject(err);
    };
    const req = request({ socketPath, path, method: 'GET', headers: { Accept: 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > maxBytes) fail(new StatusClientError('ERR_STATUS_TOO_LARGE', `the agent's answer exceeds ${maxBytes} bytes`));
        else chunks.push(c);
      });
      res.on('error', (err) => fail(new StatusClientError('ERR_STATUS_CONNECT', `reading the answer from ${socketPath}: ${err.message}`, {}, { cause: err })));
      res.on('end', () => {
        if (settled) return;
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch (err) {
          fail(new StatusClientError('ERR_STATUS_BAD_ANSWER', `the agent at ${socketPath} answered something that is not JSON`, { status: res.statusCode ?? 0 }, { cause: err }));
          return;
        }
        const o = body as { error?: unknown; version?: unknown };
        if (res.statusCode !== 200) {
          fail(new StatusClientError('ERR_STATUS_HTTP', `the agent answered ${res.statusCode}: ${typeof o?.error === 'string' ? o.error : 'no reason given'}`, { status: res.statusCode ?? 0 }));
          return;
        }
        if (o?.version !== STATUS_VERSION) {
          fail(new StatusClientError('ERR_STATUS_BAD_ANSWER', `the agent speaks status version ${String(o?.version)}, this podwire ${STATUS_VERSION}: use the podwire of the agent's image`, { status: 200 }));
          return;
        }
        settled = true;
        resolve(body as T);
      });
    });
    req.setTimeout(timeoutMs, () => fail(new StatusClientError('ERR_STATUS_TIMEOUT', `no answer from ${socketPath} within ${timeoutMs} ms`)));
    req.on('error', (err: NodeJS.ErrnoException) => {
      const hint = err.code === 'EACCES' ? ' (the socket is root\'s: run as root)' : err.code === 'ENOENT' || err.code === 'ECONNREFUSED' ? ' (is the agent running on this node? --socket names another path)' : '';
      fail(new StatusClientError('ERR_STATUS_CONNECT', `cannot reach the agent at ${socketPath}: ${err.message}${hint}`, { ...(err.code ? { errno: err.code } : {}) }, { cause: err }));
    });
    req.end();
  });
}
