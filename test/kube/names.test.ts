// Object names are validated before they reach a request path. client-node escapes a segment
// with encodeURIComponent, which keeps `.` and `..`, and the URL parser then resolves them: a
// GET of pod `..` was a GET of the Namespace. Every refusal must happen before any request: a
// local HTTP server that records what reaches it shows none did, and the real apiserver shows
// what `..` used to fetch.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient } from '../../lib/kube/client.js';
import { loadKubeconfig } from '../../lib/kube/config.js';
import { KubeError } from '../../lib/kube/errors.js';
import { checkNamespace, checkPodName, InvalidNameError, nameProblem } from '../../lib/kube/names.js';
import { annotatePodViaStatus, deletePod, getPod, patchPodMetadata } from '../../lib/kube/pods.js';
import { adminClient, createPod, describeKube, freshNamespace } from '../helpers/kube.js';

// Each refused for a pod name (and, but for 254 chars of 'a', for a namespace too).
const BAD_NAMES: Array<[string, string]> = [
  ['dot-dot', '..'], ['dot', '.'], ['slash', 'a/b'], ['escaped dot-dot', '%2e%2e'], ['uppercase', 'Web-0'],
  ['254 characters', 'a'.repeat(254)], ['empty', ''], ['leading dash', '-a'], ['trailing dot', 'a.'],
  ['double dot', 'a..b'], ['space', 'a b'], ['newline', 'a\nb'], ['unicode', 'pöd'],
];

describe('name rules', () => {
  it.each(BAD_NAMES)('refuses a pod name (%s)', (_what, name) => {
    expect(nameProblem(name, 'dns-subdomain')).toBeDefined();
    expect(() => checkPodName(name)).toThrow(InvalidNameError);
  });

  it('accepts what the apiserver accepts', () => {
    for (const n of ['web-0', 'a', 'a.b-c.d', '0', 'a'.repeat(253), `${'a'.repeat(63)}.${'b'.repeat(63)}`]) expect(nameProblem(n, 'dns-subdomain')).toBeUndefined();
    for (const n of ['default', 'kube-system', 'a'.repeat(63), '1a']) expect(nameProblem(n, 'dns-label')).toBeUndefined();
    for (const u of ['6b2f1a7e-0c3d-4e8a-9f21-5d7c8b9a0e11', 'u1', 'x'.repeat(128)]) expect(nameProblem(u, 'uid')).toBeUndefined();
    for (const n of ['system:node', 'web-0.17c2f']) expect(nameProblem(n, 'path-segment')).toBeUndefined();
  });

  it('namespaces are labels: no dots, at most 63', () => {
    for (const n of ['a.b', 'a'.repeat(64), '..', '', 'A']) expect(() => checkNamespace(n)).toThrow(InvalidNameError);
    expect(nameProblem('a'.repeat(64), 'dns-label')?.reason).toBe('too-long');
    expect(nameProblem('..', 'path-segment')?.reason).toBe('dot-segment');
    expect(nameProblem('%2e%2e', 'path-segment')?.reason).toBe('bad-char');
  });

  it('a UID is non-empty, at most 128, without \'/\' or control characters', () => {
    expect(nameProblem('', 'uid')?.reason).toBe('empty');
    expect(nameProblem('x'.repeat(129), 'uid')?.reason).toBe('too-long');
    expect(nameProblem('../x', 'uid')?.reason).toBe('bad-char');
    expect(nameProblem('a\u0000b', 'uid')?.reason).toBe('bad-char');
    expect(nameProblem('a\u0085b', 'uid')?.reason).toBe('bad-char');
  });

  it('the error names the field and the rule (a typed code, no API error)', () => {
    let err: unknown;
    try {
      checkPodName('..', 'PodName');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidNameError);
    expect(err).not.toBeInstanceOf(KubeError);
    expect(err).toMatchObject({ code: 'ERR_KUBE_INVALID_NAME', field: 'PodName', value: '..', rule: 'dns-subdomain', reason: 'bad-format' });
  });
});

describe('KubeClient refuses a bad name before any request', () => {
  const requests: string[] = [];
  let dir: string;
  let server: ReturnType<typeof createServer>;
  let client: KubeClient;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pwt-kube-names-'));
    // Answers every request 404 with a Status, and records its path.
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      requests.push(req.url ?? '');
      req.resume();
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const f = join(dir, 'kubeconfig');
    writeFileSync(f, JSON.stringify({ 'current-context': 'c', clusters: [{ name: 'x', cluster: { server: `http://127.0.0.1:${port}` } }], contexts: [{ name: 'c', context: { cluster: 'x' } }] }));
    client = new KubeClient(loadKubeconfig(f), { requestTimeoutMs: 5000 });
  });
  afterAll(async () => {
    client.close();
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  async function refusal(p: Promise<unknown>): Promise<InvalidNameError> {
    const err = await p.then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidNameError);
    return err as InvalidNameError;
  }

  it('a valid name does reach the server (the recorder works)', async () => {
    requests.length = 0;
    const err = await getPod(client, { namespace: 'default', name: 'web-0' }, { retry: { attempts: 1 } }).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ name: 'KubeError', code: 'NotFound' });
    expect(requests).toEqual(['/api/v1/namespaces/default/pods/web-0']);
  });

  it.each(BAD_NAMES)('pod name (%s): getPod, patches and delete send nothing', async (_what, name) => {
    requests.length = 0;
    const ref = { namespace: 'default', name };
    expect((await refusal(getPod(client, ref, { retry: { attempts: 1 } }))).field).toBe('name');
    await refusal(patchPodMetadata(client, ref, { labels: { a: 'b' } }));
    await refusal(annotatePodViaStatus(client, ref, { annotations: { a: 'b' } }));
    await refusal(deletePod(client, ref, { uid: 'u' }));
    expect(requests).toEqual([]);
  });

  it.each([['..'], ['.'], ['a/b'], ['%2e%2e'], ['Default'], ['a.b'], [''], ['a'.repeat(64)]])('namespace %j sends nothing', async (ns) => {
    requests.length = 0;
    expect((await refusal(getPod(client, { namespace: ns, name: 'web-0' }, { retry: { attempts: 1 } }))).field).toBe('namespace');
    expect((await refusal(client.call({ verb: 'get', resource: 'namespaces', name: ns }, (o) => client.core.readNamespace({ name: ns }, o)))).field).toBe('name');
    expect(requests).toEqual([]);
  });

  it('other resources: a name that is not a path segment sends nothing', async () => {
    requests.length = 0;
    for (const name of ['..', '.', 'a/b', '%2e%2e']) {
      await refusal(client.call({ verb: 'get', resource: 'nodes', name }, (o) => client.core.readNode({ name }, o)));
      await refusal(client.call({ verb: 'get', resource: 'configmaps', namespace: 'default', name }, (o) => client.core.readNamespacedConfigMap({ namespace: 'default', name }, o)));
    }
    expect(requests).toEqual([]);
  });
});

describeKube('against the real apiserver', () => {
  it('GET of pod ".." is refused instead of returning the Namespace', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    await createPod(admin, ns, 'web-0', 'node-x');
    expect((await getPod(admin, { namespace: ns, name: 'web-0' })).metadata?.name).toBe('web-0');
    for (const name of ['..', '.', '%2e%2e']) {
      const got = await getPod(admin, { namespace: ns, name }).then((v) => ({ value: v as { kind?: string } }), (e: unknown) => ({ err: e }));
      expect(got).toEqual({ err: expect.any(InvalidNameError) });
    }
  });
});
