// The requests podwire's own components make, on Node's http/https with the
// client's keep-alive agent and credentials: one JSON request, and one watch
// stream of JSON lines. This replaces client-node's runtime on every path the
// agent, the repair controller and the CNI plugin take: importing client-node
// costs about 70 MB of RSS and 0.9 s of start-up here (its generated models,
// node-fetch, openid-client, ws...), more than the rest of the agent together
// (docs/benchmarks.md, "Agent memory"). client-node stays the source of the
// types, and KubeClient's `core`/`apps`/`kubeConfig` still give its full
// typed API to whoever asks for it (loaded on first use).
import * as http from 'node:http';
import * as https from 'node:https';
import { KubeError } from './errors.js';
import { reviveDates, type DateKind } from './dates.js';

/** JSON merge patch (what client-node calls PatchStrategy.MergePatch). */
export const MERGE_PATCH = 'application/merge-patch+json';
/** JSON patch (RFC 6902), client-node's default for patches. */
export const JSON_PATCH = 'application/json-patch+json';

/** The largest response body read into memory (a list page of 500 pods is a few MB). */
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;
/** The longest watch line (one object). */
export const MAX_WATCH_LINE_BYTES = 16 * 1024 * 1024;

/** What a request needs of its client (KubeClient). */
export interface RestTransport {
  readonly server: string;
  readonly userAgent: string;
  readonly requestTimeoutMs: number;
  agent(): Promise<http.Agent>;
  authorization(): Promise<string | undefined>;
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface RestRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The path below the server's URL, segments already validated (KubeClient.call checks names). */
  path: string;
  query?: Query;
  body?: unknown;
  /** The Dates of the answer are revived for this kind (its items' for a list). */
  kind?: DateKind;
  list?: boolean;
}

/** Per-call options (KubeClient.call makes them: its deadline's signal, the patch content type). */
export interface RequestOptions {
  signal?: AbortSignal;
  contentType?: string;
}

/** A non-2xx answer: its status and body (KubeClient.call turns it into a KubeError). */
export class HttpStatusError extends Error {
  constructor(readonly statusCode: number, readonly body: string) {
    super(`HTTP ${statusCode}: ${http.STATUS_CODES[statusCode] ?? 'unknown status'}`);
    this.name = 'HttpStatusError';
  }
}

/** A response too large to hold (hostile or broken server). */
export class ResponseTooLargeError extends Error {
  readonly code = 'EMSGSIZE';
  constructor(limit: number) {
    super(`response body larger than ${limit} bytes`);
  }
}

export function requestUrl(server: string, path: string, query?: Query): URL {
  const url = new URL(server.replace(/\/+$/, '') + path);
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
  return url;
}

async function headers(t: RestTransport, extra: Record<string, string>): Promise<Record<string, string>> {
  const h: Record<string, string> = { Accept: 'application/json', 'User-Agent': t.userAgent, ...extra };
  const auth = await t.authorization();
  if (auth) h.Authorization = auth;
  return h;
}

/** One request; resolves with the parsed JSON answer (Dates revived), rejects with HttpStatusError or the transport's error. */
export async function send<T>(t: RestTransport, req: RestRequest, opts: RequestOptions = {}): Promise<T> {
  const url = requestUrl(t.server, req.path, req.query);
  const payload = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body));
  const extra: Record<string, string> = {};
  if (payload) {
    extra['Content-Type'] = opts.contentType ?? (req.method === 'PATCH' ? JSON_PATCH : 'application/json');
    extra['Content-Length'] = String(payload.length);
  }
  const h = await headers(t, extra);
  const agent = await t.agent();
  opts.signal?.throwIfAborted();
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const mod = url.protocol === 'http:' ? http : https;
    const r = mod.request(url, { method: req.method, agent, headers: h, ...(opts.signal ? { signal: opts.signal } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_RESPONSE_BYTES) return res.destroy(new ResponseTooLargeError(MAX_RESPONSE_BYTES));
        chunks.push(c);
      });
      res.on('error', reject);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    r.on('error', reject);
    r.end(payload);
  });
  if (status < 200 || status > 299) throw new HttpStatusError(status, text);
  if (text === '') return undefined as T;
  const obj = JSON.parse(text) as T;
  if (req.kind && obj && typeof obj === 'object') {
    if (req.list) for (const it of (obj as { items?: unknown[] }).items ?? []) reviveDates(it, req.kind);
    else reviveDates(obj, req.kind);
  }
  return obj;
}

export interface WatchRequest {
  /** For errors, e.g. `pods`. */
  resource: string;
  path: string;
  query: Query;
  kind: DateKind;
  /** Ends the stream (no done() call after it). */
  signal: AbortSignal;
}

/**
 * A watch: `onEvent(type, object)` per line (objects of `kind` with their Dates
 * revived, ERROR statuses as they come), then `onDone()` once: with nothing on a
 * clean end, an error with `statusCode` for a non-200 answer, a KubeError
 * Timeout when the response headers do not come within the client's request
 * deadline, or the transport's error. Lines that are not JSON are skipped.
 */
export function watchStream(t: RestTransport, req: WatchRequest, onEvent: (type: string, obj: unknown) => void, onDone: (err?: unknown) => void): void {
  let ended = false;
  let headerTimer: NodeJS.Timeout | undefined;
  let r: http.ClientRequest | undefined;
  const done = (err?: unknown) => {
    if (ended) return;
    ended = true;
    clearTimeout(headerTimer);
    req.signal.removeEventListener('abort', onAbort);
    r?.destroy();
    if (!req.signal.aborted) onDone(err);
  };
  const onAbort = () => done();
  req.signal.addEventListener('abort', onAbort, { once: true });
  void (async () => {
    const url = requestUrl(t.server, req.path, { ...req.query, watch: true });
    const h = await headers(t, {});
    const agent = await t.agent();
    if (ended) return;
    const mod = url.protocol === 'http:' ? http : https;
    headerTimer = setTimeout(() => done(new KubeError({ code: 'Timeout', status: 0, verb: 'watch', resource: req.resource, serverMessage: `no response headers within ${t.requestTimeoutMs} ms` })), t.requestTimeoutMs);
    r = mod.request(url, { method: 'GET', agent, headers: h }, (res) => {
      clearTimeout(headerTimer);
      if (res.statusCode !== 200) {
        res.resume();
        return done(Object.assign(new Error(http.STATUS_CODES[res.statusCode ?? 0] ?? `HTTP ${res.statusCode}`), { statusCode: res.statusCode }));
      }
      // A quiet watch must not be dropped by a middlebox; the informer's idle timer handles a dead one.
      res.socket?.setKeepAlive(true, 30_000);
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      const line = (buf: Buffer) => {
        if (buf.length === 0) return;
        let data: { type?: unknown; object?: unknown };
        try {
          data = JSON.parse(buf.toString('utf8')) as typeof data;
        } catch {
          return;
        }
        if (typeof data?.type !== 'string') return;
        const obj = data.type === 'ERROR' || data.object === null || typeof data.object !== 'object' ? data.object : reviveDates(data.object, req.kind);
        onEvent(data.type, obj);
      };
      res.on('data', (chunk: Buffer) => {
        let start = 0;
        for (let nl = chunk.indexOf(10); nl >= 0 && !ended; nl = chunk.indexOf(10, start)) {
          const part = chunk.subarray(start, nl);
          if (pendingBytes > 0) {
            pending.push(part);
            line(Buffer.concat(pending));
            pending = [];
            pendingBytes = 0;
          } else {
            line(part);
          }
          start = nl + 1;
        }
        if (ended || start >= chunk.length) return;
        pendingBytes += chunk.length - start;
        if (pendingBytes > MAX_WATCH_LINE_BYTES) return done(new ResponseTooLargeError(MAX_WATCH_LINE_BYTES));
        pending.push(chunk.subarray(start));
      });
      res.on('error', (err) => done(err));
      res.on('end', () => done());
      res.on('close', () => done());
    });
    r.on('error', (err) => done(err));
    r.end();
  })().catch((err: unknown) => done(err));
}
