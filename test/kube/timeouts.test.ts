// No request can hang the agent: a server that accepts the connection and
// never answers fails the call with code Timeout within its bound, and a
// watch that goes silent is dropped by the idle timer and restarted. These
// servers are local fakes on 127.0.0.1 by design (a real apiserver does not
// misbehave on demand).
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer, type Server, type Socket } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { KubeClient } from '../../lib/kube/client.js';
import { loadKubeconfig } from '../../lib/kube/config.js';
import { KubeError } from '../../lib/kube/errors.js';
import { getPod } from '../../lib/kube/pods.js';
import { podInformer } from '../../lib/kube/resources.js';
import { until, within } from '../helpers/kube.js';

let dir: string;
const cleanups: (() => Promise<void> | void)[] = [];
beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'pwt-kube-timeout-')); });
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  rmSync(dir, { recursive: true, force: true });
});

async function listen(server: Server | ReturnType<typeof createHttpServer>): Promise<number> {
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => { sockets.add(s); s.on('close', () => sockets.delete(s)); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }));
  return (server.address() as { port: number }).port;
}

function client(server: string, requestTimeoutMs: number): KubeClient {
  const f = join(dir, `kubeconfig-${Math.random()}`);
  writeFileSync(join(dir, 'ca.crt'), '');
  const cluster: Record<string, unknown> = { server };
  if (server.startsWith('https:')) cluster['insecure-skip-tls-verify'] = true;
  writeFileSync(f, JSON.stringify({ 'current-context': 'c', clusters: [{ name: 'x', cluster }], contexts: [{ name: 'c', context: { cluster: 'x' } }] }));
  const c = new KubeClient(loadKubeconfig(f), { requestTimeoutMs });
  cleanups.push(() => c.close());
  return c;
}

/** Accepts TCP connections and never sends a byte (not even a TLS handshake). */
async function blackHole(): Promise<{ port: number; accepted: () => number }> {
  let accepted = 0;
  const srv = createServer(() => { accepted++; });
  return { port: await listen(srv), accepted: () => accepted };
}

it('a request to a server that accepts and never answers fails with Timeout within its bound', async () => {
  const hole = await blackHole();
  const c = client(`https://127.0.0.1:${hole.port}`, 300);
  const t0 = Date.now();
  let err: unknown;
  try {
    await getPod(c, { namespace: 'ns', name: 'p' }, { retry: { attempts: 1 } });
  } catch (e) {
    err = e;
  }
  const took = Date.now() - t0;
  expect(err).toBeInstanceOf(KubeError);
  expect(err).toMatchObject({ code: 'Timeout', status: 0, verb: 'get', resource: 'pods' });
  expect((err as KubeError).transient).toBe(true);
  expect(hole.accepted()).toBe(1); // it really connected: the deadline, not a refusal, ended it
  expect(took).toBeGreaterThanOrEqual(290);
  expect(took).toBeLessThan(1_500);
  // With its default retry (3 attempts) the worst case is still bounded: 3 × 300 ms + backoff.
  const t1 = Date.now();
  await expect(getPod(c, { namespace: 'ns', name: 'p' })).rejects.toMatchObject({ code: 'Timeout' });
  expect(Date.now() - t1).toBeLessThan(3_000);
  expect(hole.accepted()).toBe(4);
});

it('an informer whose list never answers keeps retrying with Timeout errors, and stop() ends it at once', async () => {
  const hole = await blackHole();
  const c = client(`https://127.0.0.1:${hole.port}`, 200);
  const inf = podInformer(c, { nodeName: 'n1', backoff: { initialMs: 50, maxMs: 100 } });
  const codes: string[] = [];
  inf.on('error', (e) => codes.push((e as KubeError).code));
  inf.start();
  await until('two list timeouts', () => inf.stats.listErrors >= 2, 5_000);
  expect(new Set(codes)).toEqual(new Set(['Timeout']));
  expect(inf.hasSynced).toBe(false);
  await within('stop', inf.stop(), 1_000);
  await expect(inf.synced).rejects.toMatchObject({ code: 'Aborted' });
});

/** A fake apiserver: an empty pod list, and a watch that `mode` makes misbehave. */
async function fakeApiserver(mode: 'silent-stream' | 'no-headers'): Promise<{ url: string; watches: () => number }> {
  let watches = 0;
  const srv = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    const u = new URL(req.url!, 'http://x');
    if (u.pathname !== '/api/v1/pods') { res.writeHead(404).end(); return; }
    if (u.searchParams.get('watch') !== 'true') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: '7' }, items: [] }));
      return;
    }
    watches++;
    expect(u.searchParams.get('resourceVersion')).toBe('7');
    expect(Number(u.searchParams.get('timeoutSeconds'))).toBeGreaterThan(0);
    if (mode === 'silent-stream') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders(); // headers, then silence: a half-dead connection
    } // no-headers: never respond at all
  });
  const port = await listen(srv);
  return { url: `http://127.0.0.1:${port}`, watches: () => watches };
}

it('a watch that goes silent after its headers is dropped by the idle timer and restarted', async () => {
  const api = await fakeApiserver('silent-stream');
  const c = client(api.url, 2_000);
  const inf = podInformer(c, { nodeName: 'n1', idleTimeoutMs: 300, backoff: { initialMs: 20, maxMs: 50 } });
  try {
    await within('sync', inf.start().synced, 5_000);
    await until('two idle timeouts', () => inf.stats.idleTimeouts >= 2, 5_000);
    // Each idle watch was followed by a new one (the second may still be in its backoff).
    expect(inf.stats.restarts).toBeGreaterThanOrEqual(1);
    expect(api.watches()).toBeGreaterThanOrEqual(2);
    expect(inf.stats.relists).toBe(0); // an idle watch resumes from its resourceVersion, it does not relist
  } finally {
    await within('stop', inf.stop(), 1_000);
  }
});

it('a watch whose response headers never come fails with Timeout (the request deadline) and is retried', async () => {
  const api = await fakeApiserver('no-headers');
  const c = client(api.url, 200);
  const inf = podInformer(c, { nodeName: 'n1', backoff: { initialMs: 20, maxMs: 50 } });
  const codes: string[] = [];
  inf.on('error', (e) => codes.push((e as KubeError).code));
  try {
    await within('sync', inf.start().synced, 5_000);
    await until('two watch errors', () => inf.stats.watchErrors >= 2, 5_000);
    expect(new Set(codes)).toEqual(new Set(['Timeout']));
    expect(api.watches()).toBeGreaterThanOrEqual(2);
  } finally {
    await within('stop', inf.stop(), 1_000);
  }
});
