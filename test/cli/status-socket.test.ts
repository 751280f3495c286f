// The status socket's bounds and validation (lib/agent/status-socket.ts) and its client's
// (lib/cli/status-client.ts), on real unix sockets with a small in-memory source (the real agent
// answering the real CLI is test/cli/status.test.ts): 0600 in a 0700 dir, connections capped,
// headers bounded in size and time, no bodies, GET only, pod names validated; the client bounded
// in time and size and refusing an answer of another version.
import { lstatSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { PodStatusBook } from '../../lib/agent/pod-status.js';
import { Readiness } from '../../lib/agent/readiness.js';
import { parsePodRef, startStatusServer, STATUS_GUARD, STATUS_SOCKET, type StatusServer } from '../../lib/agent/status-socket.js';
import type { StatusSources } from '../../lib/agent/status.js';
import { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/enablement.js';
import { getStatus, StatusClientError } from '../../lib/cli/status-client.js';
import { unixRequest } from '../helpers/agent-node.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-status-'));
  cleanups.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

function sources(pods: V1Pod[] = [], namespaces: V1Namespace[] = []): StatusSources {
  return {
    nodeName: 'node-a', readiness: new Readiness(),
    policy: { selectors: compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS), excludeNamespaces: ['kube-system'], systemNamespace: 'istio-system' },
    enablementSelectors: DEFAULT_ENABLEMENT_SELECTORS, backend: { backend: 'nftables' },
    zds: { socket: '/x/ztunnel.sock', connections: () => [] },
    install: { enabled: false, ready: () => false, configPath: () => '' },
    queue: () => undefined, driftCheckIntervalMs: 0,
    pods: () => pods, namespace: (n) => namespaces.find((x) => x.metadata?.name === n),
    entries: () => [], probeIps: () => [], book: new PodStatusBook(),
  };
}

async function serve(s: () => StatusSources | undefined, guard: Partial<typeof STATUS_GUARD> = {}): Promise<StatusServer & { dir: string }> {
  const dir = join(tempDir(), 'run');
  const server = await startStatusServer({ runDir: dir, sources: s, guard });
  cleanups.push(() => server.close());
  return Object.assign(server, { dir });
}

/** A raw connection; resolves with everything received until the server closed it. */
function raw(path: string, send: string): { socket: Socket; closed: Promise<string> } {
  const socket = connect(path);
  let got = '';
  socket.setEncoding('utf8').on('data', (d: string) => { got += d; });
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(got)));
  socket.on('error', () => undefined);
  if (send) socket.write(send);
  return { socket, closed };
}

describe('status socket', () => {
  it('parsePodRef takes <namespace>/<name> as the API server validates them, nothing else', () => {
    expect(parsePodRef('default/web-0')).toEqual({ namespace: 'default', name: 'web-0' });
    expect(parsePodRef('a/b.c-d')).toEqual({ namespace: 'a', name: 'b.c-d' });
    for (const bad of ['', 'default', '/web', 'default/', 'a/b/c', 'Default/web', 'default/Web', '../etc/passwd', 'a b/c', `${'n'.repeat(64)}/p`, `ns/${'p'.repeat(254)}`, 'ns/-p', 'ns/p-']) {
      expect(parsePodRef(bad), bad).toBeUndefined();
    }
  });

  it('is a 0600 socket in a 0700 dir, replaces a stale one, and goes at close', async () => {
    const first = await serve(() => sources());
    expect(first.path).toBe(join(first.dir, STATUS_SOCKET));
    expect(lstatSync(first.path).mode & 0o777).toBe(0o600);
    expect(lstatSync(first.dir).mode & 0o777).toBe(0o700);
    const second = await startStatusServer({ runDir: first.dir, sources: () => sources() });
    expect((await unixRequest(second.path, 'GET', '/v1/status')).status).toBe(200);
    await second.close();
    expect(() => lstatSync(second.path)).toThrow(/ENOENT/);
  });

  it('answers GET /v1/status and /v1/explain; refuses other methods, paths, bodies and bad pod refs', async () => {
    const ns: V1Namespace = { metadata: { name: 'shop', labels: { 'istio.io/dataplane-mode': 'ambient' } } };
    const pod: V1Pod = { metadata: { name: 'web', namespace: 'shop', uid: 'u1', labels: {} }, status: { phase: 'Running', podIPs: [{ ip: '10.0.0.9' }] } };
    const s = await serve(() => sources([pod], [ns]));
    const status = await unixRequest(s.path, 'GET', '/v1/status');
    expect(status.status).toBe(200);
    expect(JSON.parse(status.body)).toMatchObject({ version: 1, node: 'node-a', pods: [{ name: 'web', state: 'not-enrolled', decision: { enroll: true, selector: 1 } }] });
    const explain = await unixRequest(s.path, 'GET', '/v1/explain?pod=shop%2Fweb');
    expect(JSON.parse(explain.body)).toMatchObject({ pod: 'shop/web', inMesh: false });
    expect(JSON.parse(explain.body).text).toContain('is selected for ambient');
    expect((await unixRequest(s.path, 'POST', '/v1/status', '{}')).status).toBe(413);  // a body is refused before anything else
    expect((await unixRequest(s.path, 'DELETE', '/v1/status')).status).toBe(405);
    expect((await unixRequest(s.path, 'GET', '/v1/secrets')).status).toBe(404);
    for (const q of ['', '?pod=', '?pod=shop', '?pod=shop/web&pod=shop/db', '?pod=..%2F..%2Fetc', '?pod=SHOP/web']) {
      expect((await unixRequest(s.path, 'GET', `/v1/explain${q}`)).status, q).toBe(400);
    }
  });

  it('answers 503 until the agent has something to show', async () => {
    const s = await serve(() => undefined);
    const r = await unixRequest(s.path, 'GET', '/v1/status');
    expect(r.status).toBe(503);
    await expect(getStatus(s.path, '/v1/status')).rejects.toMatchObject({ code: 'ERR_STATUS_HTTP', detail: { status: 503 } });
  });

  it('caps connections, header size and header time', async () => {
    const s = await serve(() => sources(), { maxConnections: 3, headerDeadlineMs: 300, idleMs: 2000 });
    // Three silent connections are held; a fourth is closed at once; the three go at the header deadline.
    const silent = [raw(s.path, ''), raw(s.path, ''), raw(s.path, '')];
    await new Promise((r) => setTimeout(r, 50));
    const t0 = Date.now();
    const fourth = raw(s.path, '');
    expect(await fourth.closed).toBe('');
    for (const c of silent) expect(await c.closed).toBe('');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(200);
    // A request trickling in never completes its headers within the deadline: closed without an answer.
    const slow = raw(s.path, 'GET /v1/status HTTP/1.1\r\n');
    const tick = setInterval(() => slow.socket.write('X-A: b\r\n'), 50);
    expect(await slow.closed).toBe('');
    clearInterval(tick);
    // Headers beyond 4 KiB: 431.
    const big = raw(s.path, `GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(6000)}\r\n\r\n`);
    expect(await big.closed).toMatch(/^HTTP\/1\.1 431/);
    // And after all that it still answers.
    expect((await unixRequest(s.path, 'GET', '/v1/status')).status).toBe(200);
  });
});

describe('status client', () => {
  it('is bounded in time and size, and refuses another version or a non-JSON answer', async () => {
    const dir = tempDir();
    const listen = (name: string, onConn: (c: Socket) => void) => new Promise<string>((resolve) => {
      const srv: Server = createServer((c) => {
        c.on('error', () => undefined);  // the client going away mid-answer is part of these cases
        onConn(c);
      });
      const p = join(dir, name);
      srv.listen(p, () => resolve(p));
      cleanups.push(() => new Promise((r) => srv.close(r)));
    });
    const answer = (body: string) => (c: Socket) => c.once('data', () => c.end(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`));
    const silent = await listen('silent.sock', (c) => { c.on('data', () => undefined); cleanups.push(() => c.destroy()); });
    await expect(getStatus(silent, '/v1/status', { timeoutMs: 200 })).rejects.toMatchObject({ code: 'ERR_STATUS_TIMEOUT' });
    const huge = await listen('huge.sock', answer(JSON.stringify({ version: 1, pad: 'x'.repeat(100_000) })));
    await expect(getStatus(huge, '/v1/status', { maxBytes: 10_000 })).rejects.toMatchObject({ code: 'ERR_STATUS_TOO_LARGE' });
    const v2 = await listen('v2.sock', answer('{"version":2}'));
    const err = await getStatus(v2, '/v1/status').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StatusClientError);
    expect(err).toMatchObject({ code: 'ERR_STATUS_BAD_ANSWER' });
    const text = await listen('text.sock', answer('not json'));
    await expect(getStatus(text, '/v1/status')).rejects.toMatchObject({ code: 'ERR_STATUS_BAD_ANSWER' });
    await expect(getStatus(join(dir, 'missing.sock'), '/v1/status')).rejects.toMatchObject({ code: 'ERR_STATUS_CONNECT', detail: { errno: 'ENOENT' } });
  });
});
