// podwire's own requests (lib/kube/rest.ts) against a local HTTP server playing a broken or
// hostile API server: how a watch stream is cut into events, what a bad answer becomes. The
// behaviour against the real apiserver is in informer*.test.ts, resilience and timeouts.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KubeClient } from '../../lib/kube/client.js';
import { KubeCredentials } from '../../lib/kube/config.js';
import { KubeError } from '../../lib/kube/errors.js';
import { MAX_WATCH_LINE_BYTES } from '../../lib/kube/rest.js';

const servers: http.Server[] = [];
const clients: KubeClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => { s.closeAllConnections(); s.close(r); })));
});

async function serve(handler: http.RequestListener): Promise<KubeClient> {
  const s = http.createServer(handler);
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const c = new KubeClient(new KubeCredentials(`http://127.0.0.1:${(s.address() as AddressInfo).port}`, 'test', { token: 'tok', insecure: false }), { requestTimeoutMs: 2000 });
  clients.push(c);
  return c;
}

function watchAll(c: KubeClient): Promise<{ events: Array<[string, unknown]>; err: unknown }> {
  return new Promise((resolve) => {
    const events: Array<[string, unknown]> = [];
    c.watch({ resource: 'pods', path: '/api/v1/pods', query: { resourceVersion: '5' }, kind: 'Pod', signal: new AbortController().signal },
      (type, obj) => events.push([type, obj]), (err) => resolve({ events, err }));
  });
}

describe('watch stream', () => {
  it('cuts events at newlines whatever the chunking, skips lines that are not JSON, and revives Dates', async () => {
    let url = '';
    let auth = '';
    const c = await serve((req, res) => {
      url = req.url!;
      auth = req.headers.authorization ?? '';
      res.writeHead(200, { 'content-type': 'application/json' });
      const a = JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '6', creationTimestamp: '2026-12-01T00:00:00Z' } } });
      const b = JSON.stringify({ type: 'MODIFIED', object: { metadata: { name: 'b', resourceVersion: '7' } } });
      // a split in three writes, then garbage, then b and a bookmark in one write without the last newline.
      res.write(a.slice(0, 10));
      res.write(a.slice(10, 30));
      res.write(`${a.slice(30)}\nnot json\n\n`);
      res.end(`${b}\n${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '8' } } })}`);
    });
    const { events, err } = await watchAll(c);
    expect(err).toBeUndefined();
    expect(new URL(url, 'http://x').searchParams.get('watch')).toBe('true');
    expect(new URL(url, 'http://x').searchParams.get('resourceVersion')).toBe('5');
    expect(auth).toBe('Bearer tok');
    // The last line had no newline: the stream ended before it was complete, so it is not an event.
    expect(events.map(([t]) => t)).toEqual(['ADDED', 'MODIFIED']);
    expect((events[0]![1] as { metadata: { creationTimestamp: unknown } }).metadata.creationTimestamp).toBeInstanceOf(Date);
  });

  it('a non-200 answer ends it with that status', async () => {
    const c = await serve((_req, res) => { res.writeHead(410); res.end('{"kind":"Status","code":410}'); });
    const { events, err } = await watchAll(c);
    expect(events).toEqual([]);
    expect((err as { statusCode: number }).statusCode).toBe(410);
  });

  it('a line longer than the cap ends it with an error instead of growing without bound', async () => {
    const c = await serve((_req, res) => {
      res.writeHead(200);
      const chunk = Buffer.alloc(1024 * 1024, 0x61);
      let sent = 0;
      const more = () => {
        while (sent <= MAX_WATCH_LINE_BYTES) {
          sent += chunk.length;
          if (!res.write(chunk)) return res.once('drain', more);
        }
        res.end();
      };
      more();
    });
    const { err } = await watchAll(c);
    expect((err as { code?: string }).code).toBe('EMSGSIZE');
  });

  it('aborting it ends it quietly (no done call)', async () => {
    const c = await serve((_req, res) => { res.writeHead(200); res.write('\n'); });
    const ac = new AbortController();
    let done = 0;
    let started!: () => void;
    const open = new Promise<void>((r) => { started = r; });
    servers[0]!.once('request', () => setTimeout(started, 50));
    c.watch({ resource: 'pods', path: '/api/v1/pods', query: {}, kind: 'Pod', signal: ac.signal }, () => undefined, () => { done++; });
    await open;
    ac.abort();
    await new Promise((r) => setTimeout(r, 100));
    expect(done).toBe(0);
  });
});

describe('one request', () => {
  it('a non-2xx answer becomes a KubeError with the Status reason and message', async () => {
    const c = await serve((_req, res) => {
      res.writeHead(409, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', reason: 'Conflict', message: 'the object has been modified', code: 409 }));
    });
    const err = await c.call({ verb: 'patch', resource: 'pods', namespace: 'ns', name: 'p' }, (o) => c.send({ method: 'PATCH', path: '/api/v1/namespaces/ns/pods/p', body: {} }, o)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeError);
    expect(err).toMatchObject({ code: 'Conflict', status: 409, reason: 'Conflict', serverMessage: 'the object has been modified', verb: 'patch', resource: 'pods', namespace: 'ns' });
  });

  it('sends the body as JSON with the content type asked for, and parses the answer', async () => {
    let seen: { method?: string; type?: string; body?: string } = {};
    const c = await serve((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => { body += d.toString(); });
      req.on('end', () => {
        seen = { method: req.method!, type: req.headers['content-type']!, body };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ metadata: { name: 'p', creationTimestamp: '2026-12-01T00:00:00Z' } }));
      });
    });
    const pod = await c.call({ verb: 'patch', resource: 'pods', namespace: 'ns', name: 'p' },
      (o) => c.send<{ metadata: { creationTimestamp: unknown } }>({ method: 'PATCH', path: '/api/v1/namespaces/ns/pods/p', body: { metadata: { labels: { a: 'b' } } }, kind: 'Pod' }, o),
      { contentType: 'application/merge-patch+json' });
    expect(seen).toEqual({ method: 'PATCH', type: 'application/merge-patch+json', body: '{"metadata":{"labels":{"a":"b"}}}' });
    expect(pod.metadata.creationTimestamp).toBeInstanceOf(Date);
  });
});

describe('list pages', () => {
  it('an informer follows the `continue` token over every page (the wire name, not the model\'s _continue)', async () => {
    const { podInformer } = await import('../../lib/kube/resources.js');
    const pods = Array.from({ length: 5 }, (_, i) => ({ metadata: { name: `p${i}`, namespace: 'ns', uid: `u${i}`, resourceVersion: '10' } }));
    const queries: string[] = [];
    const c = await serve((req, res) => {
      const u = new URL(req.url!, 'http://x');
      if (u.searchParams.get('watch') === 'true') { res.writeHead(200); return; }
      queries.push(u.search);
      const from = Number(u.searchParams.get('continue') ?? 0);
      const limit = Number(u.searchParams.get('limit'));
      const next = from + limit < pods.length ? String(from + limit) : undefined;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: '10', ...(next ? { continue: next } : {}) }, items: pods.slice(from, from + limit) }));
    });
    const inf = podInformer(c, { nodeName: 'n1', pageSize: 2 });
    try {
      await inf.start().synced;
      expect(inf.list().map((p) => p.metadata!.name).sort()).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
      expect(queries).toHaveLength(3);
      expect(new URLSearchParams(queries[0]).get('fieldSelector')).toBe('spec.nodeName=n1');
    } finally {
      await inf.stop();
    }
  });
});
