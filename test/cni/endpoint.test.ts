// The CNI event endpoint (spec §2.5, §5.5): a real unix socket in a temp run dir, upstream's
// plugin body sent byte-for-byte (also as the raw HTTP request Go's client writes), the parsed
// request the handler got, socket mode, every error status, handler failure/timeout, close.
import { request } from 'node:http';
import { connect, createServer as createNetServer } from 'node:net';
import { existsSync, linkSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CniEndpointError, parseCmdAddBody, startCniEndpoint, type CmdAddRequest, type CniEndpoint, type CniEndpointOptions,
} from '../../lib/cni/endpoint.js';

// What upstream's plugin sends: Go json.Marshal of CNIPluginAddEvent (no tags → capitalised keys, compact).
const UPSTREAM_BODY =
  '{"Netns":"/var/run/netns/cni-6b2f1a7e-0c3d-4e8a-9f21-5d7c8b9a0e11","PodName":"web-0","PodNamespace":"default",' +
  '"IPs":[{"Interface":0,"Address":{"IP":"10.244.0.5","Mask":"////AA=="},"Gateway":"10.244.0.1"},' +
  '{"Interface":null,"Address":{"IP":"fd00:10:244::5","Mask":"//////////8AAAAAAAAAAA=="},"Gateway":"fd00:10:244::1"}]}';
// The spec's §2.5 shape with spaces, an IPv4-mapped address and Gateway "" (Go's nil net.IP).
const SPEC_BODY =
  '{"Netns": "/var/run/netns/cni-1", "PodName": "app-1", "PodNamespace": "ns1", "IPs": [ {"Interface": 2, ' +
  '"Address": {"IP": "::ffff:10.0.0.2", "Mask": "////AA=="}, "Gateway": ""} ] }';
// No prevResult → IPs null.
const NO_PREV_BODY = '{"Netns":"/var/run/netns/cni-2","PodName":"p","PodNamespace":"n","IPs":null}';

let dirs: string[] = [];
let endpoints: CniEndpoint[] = [];

afterEach(async () => {
  await Promise.all(endpoints.map((e) => e.close()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
  endpoints = [];
});

function tempRoot(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-cniep-'));
  dirs.push(d);
  return d;
}

async function start(opts: Partial<CniEndpointOptions> = {}): Promise<{ ep: CniEndpoint; got: CmdAddRequest[] }> {
  const got: CmdAddRequest[] = [];
  const ep = await startCniEndpoint({
    runDir: join(tempRoot(), 'run', 'istio-cni'),
    onCmdAdd: async (req) => { got.push(req); },
    ...opts,
  });
  endpoints.push(ep);
  return { ep, got };
}

interface Reply { status: number; headers: Record<string, string | string[] | undefined>; body: string }

function send(socketPath: string, method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, headers: { Host: 'unix', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Writes raw bytes to the socket and returns everything the server sent until it closed. */
function raw(socketPath: string, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const s = connect(socketPath, () => s.write(bytes));
    s.on('data', (c) => {
      chunks.push(c);
      // one complete response is enough: Go's client keeps the connection alive
      const text = Buffer.concat(chunks).toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(text);
      if (head >= 0 && len && text.length >= head + 4 + Number(len[1])) { s.destroy(); resolve(text); }
    });
    s.on('error', reject);
    s.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
  });
}

describe('POST /cmdadd with upstream bodies', () => {
  it('accepts the exact HTTP request Go\'s plugin client writes; 200 with an empty body', async () => {
    const { ep, got } = await start();
    const wire =
      'POST /cmdadd HTTP/1.1\r\nHost: unix\r\nUser-Agent: Go-http-client/1.1\r\n' +
      `Content-Length: ${Buffer.byteLength(UPSTREAM_BODY)}\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n` +
      UPSTREAM_BODY;
    const reply = await raw(ep.socketPath, wire);
    expect(reply).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(reply).toMatch(/\r\nContent-Length: 0\r\n/i);
    expect(reply.endsWith('\r\n\r\n')).toBe(true);
    expect(got).toHaveLength(1);
    expect(got[0]).toEqual({
      netns: '/var/run/netns/cni-6b2f1a7e-0c3d-4e8a-9f21-5d7c8b9a0e11',
      podName: 'web-0',
      podNamespace: 'default',
      ips: ['10.244.0.5', 'fd00:10:244::5'],
      ipConfigs: [
        { interface: 0, ip: '10.244.0.5', mask: Buffer.from([255, 255, 255, 0]), gateway: '10.244.0.1' },
        { interface: null, ip: 'fd00:10:244::5', mask: Buffer.from([...Array(8).fill(255), ...Array(8).fill(0)]), gateway: 'fd00:10:244::1' },
      ],
    });
  });

  it('parses the spec body: IPv4-mapped IP unmapped, empty gateway = none', async () => {
    const { ep, got } = await start();
    const r = await send(ep.socketPath, 'POST', '/cmdadd', SPEC_BODY, { 'Content-Type': 'application/json' });
    expect(r.status).toBe(200);
    expect(r.body).toBe('');
    expect(got).toEqual([{
      netns: '/var/run/netns/cni-1', podName: 'app-1', podNamespace: 'ns1', ips: ['10.0.0.2'],
      ipConfigs: [{ interface: 2, ip: '::ffff:10.0.0.2', mask: Buffer.from([255, 255, 255, 0]), gateway: null }],
    }]);
  });

  it('IPs null (no prevResult) → no IPs', async () => {
    const { ep, got } = await start();
    expect((await send(ep.socketPath, 'POST', '/cmdadd', NO_PREV_BODY)).status).toBe(200);
    expect(got).toEqual([{ netns: '/var/run/netns/cni-2', podName: 'p', podNamespace: 'n', ips: [], ipConfigs: [] }]);
  });

  it('keys match case-insensitively like Go encoding/json; unknown keys are ignored; query ignored', async () => {
    const { ep, got } = await start();
    const body = '{"netns":"/n","podName":"a","PODNAMESPACE":"b","ips":[],"Extra":{"x":1}}';
    expect((await send(ep.socketPath, 'POST', '/cmdadd?x=1', body)).status).toBe(200);
    expect(got).toEqual([{ netns: '/n', podName: 'a', podNamespace: 'b', ips: [], ipConfigs: [] }]);
  });
});

describe('socket', () => {
  it('is 0600 right after listen, run dir 0750 at most, no private dir left behind', async () => {
    const { ep } = await start();
    const st = lstatSync(ep.socketPath);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    const runDir = join(ep.socketPath, '..');
    expect(statSync(runDir).mode & 0o027).toBe(0);
    expect(readdirSync(runDir)).toEqual(['pluginevent.sock']);
  });

  it.each(['socket', 'file'])('replaces a stale %s at the path', async (kind) => {
    const runDir = join(tempRoot(), 'run');
    const path = join(runDir, 'pluginevent.sock');
    mkdirSync(runDir);
    if (kind === 'socket') {
      // a dead agent's socket: bound, hard-linked to the path, then its server closed (nobody accepts)
      const stale = createNetServer();
      await new Promise<void>((r) => stale.listen(join(runDir, 'old.sock'), r));
      linkSync(join(runDir, 'old.sock'), path);
      await new Promise<void>((r) => stale.close(() => r()));
      await expect(send(path, 'POST', '/cmdadd', NO_PREV_BODY)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } else {
      writeFileSync(path, 'stale');
    }
    const got: CmdAddRequest[] = [];
    const ep = await startCniEndpoint({ runDir, onCmdAdd: async (q) => { got.push(q); } });
    endpoints.push(ep);
    expect(lstatSync(path).isSocket()).toBe(true);
    expect(lstatSync(path).mode & 0o777).toBe(0o600);
    expect((await send(path, 'POST', '/cmdadd', NO_PREV_BODY)).status).toBe(200);
    expect(got).toHaveLength(1);
  });

  it('close() removes the socket, is idempotent, and leaves a newer socket at the path alone', async () => {
    const { ep } = await start();
    await ep.close();
    expect(existsSync(ep.socketPath)).toBe(false);
    await ep.close();

    const runDir = join(tempRoot(), 'r2');
    const a = await startCniEndpoint({ runDir, onCmdAdd: async () => {} });
    const b = await startCniEndpoint({ runDir, onCmdAdd: async () => {} });  // a newer agent takes the path
    endpoints.push(b);
    await a.close();
    expect(lstatSync(b.socketPath).isSocket()).toBe(true);
    expect((await send(b.socketPath, 'POST', '/cmdadd', NO_PREV_BODY)).status).toBe(200);
  });

  it('rejects bad options with typed errors', async () => {
    await expect(startCniEndpoint({ runDir: '', onCmdAdd: async () => {} })).rejects.toMatchObject({ code: 'ERR_CNI_ENDPOINT_OPTIONS' });
    await expect(startCniEndpoint({ runDir: '/tmp/' + 'x'.repeat(120), onCmdAdd: async () => {} }))
      .rejects.toBeInstanceOf(CniEndpointError);
    const file = join(tempRoot(), 'file');
    writeFileSync(file, '');
    await expect(startCniEndpoint({ runDir: join(file, 'sub'), onCmdAdd: async () => {} }))
      .rejects.toMatchObject({ code: 'ERR_CNI_ENDPOINT_LISTEN', errno: 'ENOTDIR' });
  });
});

describe('bad requests', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['empty body', '', /^empty request body\n$/],
    ['not JSON', '{"Netns":', /^invalid JSON: /],
    ['a JSON array', '[]', /^body must be a JSON object, got array\n$/],
    ['missing PodName', '{"Netns":"/n","PodNamespace":"b"}', /^PodName: required/],
    ['Netns of the wrong type', '{"Netns":5,"PodName":"a","PodNamespace":"b"}', /^Netns: must be a string, got number\n$/],
    ['IPs not an array', '{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":{}}', /^IPs: must be an array or null/],
    ['a bad IP', '{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":[{"Address":{"IP":"10.0.0.256"}}]}', /^IPs\[0\]\.Address\.IP: not an IP address/],
    ['an IP with a zone', '{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":[{"Address":{"IP":"fe80::1%eth0"}}]}', /^IPs\[0\]\.Address\.IP: not an IP address/],
    ['a missing Address', '{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":[{"Interface":0}]}', /^IPs\[0\]\.Address: required/],
    ['a non-base64 mask', '{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":[{"Address":{"IP":"10.0.0.1","Mask":"255.255.255.0"}}]}', /^IPs\[0\]\.Address\.Mask: /],
    ['a fractional Interface', '{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":[{"Interface":1.5,"Address":{"IP":"10.0.0.1"}}]}', /^IPs\[0\]\.Interface: must be an integer/],
    ['a bad Gateway', '{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":[{"Address":{"IP":"10.0.0.1"},"Gateway":"gw"}]}', /^IPs\[0\]\.Gateway: not an IP/],
  ];
  it.each(cases)('%s → 400 text/plain', async (_name, body, msg) => {
    const { ep, got } = await start();
    const r = await send(ep.socketPath, 'POST', '/cmdadd', body);
    expect(r.status).toBe(400);
    expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(r.body).toMatch(msg);
    expect(got).toEqual([]);
  });

  it('parseCmdAddBody throws CmdAddBodyError with the field', () => {
    expect(() => parseCmdAddBody('{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":[{"Address":{"IP":"x"}}]}'))
      .toThrow(expect.objectContaining({ name: 'CmdAddBodyError', code: 'ERR_CNI_EVENT_FIELD', field: 'IPs[0].Address.IP' }));
  });

  it('parseCmdAddBody canonicalises addresses (RFC 5952) and unmaps IPv4-mapped ones', () => {
    const r = parseCmdAddBody('{"Netns":"/n","PodName":"a","PodNamespace":"b","IPs":[{"Address":{"IP":"FD00:10:244:0:0:0:0:5"},"Gateway":"FD00:10:244::1"},{"Address":{"IP":"::FFFF:10.1.2.3"}}]}');
    expect(r.ips).toEqual(['fd00:10:244::5', '10.1.2.3']);
    expect(r.ipConfigs.map((c) => [c.ip, c.gateway])).toEqual([['fd00:10:244::5', 'fd00:10:244::1'], ['::ffff:10.1.2.3', null]]);
  });

  it('POST /v1/cni: the handler gets the raw body; 200 with the stdout and the exit header, 503 when not ready, 404 without a handler', async () => {
    const bodies: string[] = [];
    let reply: { exitCode: number; stdout: string } | 'not-ready' = { exitCode: 1, stdout: '{"code":11}\n' };
    const { ep } = await start({ onCni: async (b) => { bodies.push(b.toString()); return reply; } });
    const r = await send(ep.socketPath, 'POST', '/v1/cni', '{"command":"ADD"}', { 'Content-Type': 'application/json' });
    expect([r.status, r.headers['x-podwire-cni-exit'], r.body]).toEqual([200, '1', '{"code":11}\n']);
    expect(bodies).toEqual(['{"command":"ADD"}']);
    reply = 'not-ready';
    expect((await send(ep.socketPath, 'POST', '/v1/cni', '{}')).status).toBe(503);
    const { ep: bare } = await start();
    expect((await send(bare.socketPath, 'POST', '/v1/cni', '{}')).status).toBe(404);
  });

  it('unknown paths → 404', async () => {
    const { ep, got } = await start();
    for (const p of ['/', '/cmdadd/', '/v1/cni/', '/cmddel']) {
      const r = await send(ep.socketPath, 'POST', p, NO_PREV_BODY);
      expect([p, r.status, r.body]).toEqual([p, 404, '404 page not found\n']);
    }
    expect(got).toEqual([]);
  });

  it('a non-POST on /cmdadd → 405 with Allow: POST', async () => {
    const { ep, got } = await start();
    for (const m of ['GET', 'PUT', 'DELETE']) {
      const r = await send(ep.socketPath, m, '/cmdadd', m === 'GET' ? undefined : NO_PREV_BODY);
      expect([m, r.status, r.headers.allow, r.body]).toEqual([m, 405, 'POST', 'Method Not Allowed\n']);
    }
    expect(got).toEqual([]);
  });

  it('a declared body over the cap → 413 without reading it', async () => {
    const { ep, got } = await start();
    const r = await new Promise<number>((resolve, reject) => {
      const req = request({ socketPath: ep.socketPath, method: 'POST', path: '/cmdadd', headers: { 'Content-Length': String((1 << 20) + 1) } },
        (res) => { res.resume(); resolve(res.statusCode ?? 0); });
      req.on('error', reject);
      req.flushHeaders();  // headers only: the server must answer before any body byte arrives
    });
    expect(r).toBe(413);
    expect(got).toEqual([]);
  });

  it('a chunked body that grows over the cap → 413', async () => {
    const { ep, got } = await start({ maxBodyBytes: 4096 });
    const r = await new Promise<Reply>((resolve) => {
      const req = request({ socketPath: ep.socketPath, method: 'POST', path: '/cmdadd' }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      });
      req.on('error', () => {});  // the server drops the connection after answering
      req.write(Buffer.alloc(3000, 0x20));
      req.write(Buffer.alloc(3000, 0x20));  // never ended: the answer must come from the cap
    });
    expect(r.status).toBe(413);
    expect(r.body).toBe('request body larger than 4096 bytes\n');
    expect(got).toEqual([]);
  });

  it('a body exactly at the cap is accepted', async () => {
    const { ep, got } = await start({ maxBodyBytes: Buffer.byteLength(NO_PREV_BODY) });
    expect((await send(ep.socketPath, 'POST', '/cmdadd', NO_PREV_BODY)).status).toBe(200);
    expect(got).toHaveLength(1);
  });
});

describe('handler outcomes', () => {
  it('a rejecting handler → 500 with its message, like upstream\'s http.Error', async () => {
    const errors: CniEndpointError[] = [];
    const { ep } = await start({
      onCmdAdd: async (q) => { throw new Error(`pod ${q.podNamespace}/${q.podName} is unexpectedly not eligible for ambient enrollment`); },
      onError: (e) => errors.push(e),
    });
    const r = await send(ep.socketPath, 'POST', '/cmdadd', UPSTREAM_BODY);
    expect(r.status).toBe(500);
    expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(r.headers['x-content-type-options']).toBe('nosniff');
    expect(r.body).toBe('pod default/web-0 is unexpectedly not eligible for ambient enrollment\n');
    expect(errors.map((e) => e.code)).toEqual(['ERR_CNI_ENDPOINT_HANDLER']);
  });

  it('a handler that throws synchronously → 500', async () => {
    const { ep } = await start({ onCmdAdd: (() => { throw new Error('boom'); }) as CniEndpointOptions['onCmdAdd'] });
    const r = await send(ep.socketPath, 'POST', '/cmdadd', NO_PREV_BODY);
    expect([r.status, r.body]).toEqual([500, 'boom\n']);
  });

  it('a handler that never settles → 500 after handlerTimeoutMs, its signal aborted', async () => {
    const errors: CniEndpointError[] = [];
    let signal: AbortSignal | undefined;
    const { ep } = await start({
      handlerTimeoutMs: 100,
      onCmdAdd: (_q, ctx) => { signal = ctx.signal; return new Promise<void>(() => {}); },
      onError: (e) => errors.push(e),
    });
    const r = await send(ep.socketPath, 'POST', '/cmdadd', NO_PREV_BODY);
    expect(r.status).toBe(500);
    expect(r.body).toBe('timed out after 100 ms adding pod n/p to the mesh\n');
    expect(signal?.aborted).toBe(true);
    expect(errors.map((e) => e.code)).toEqual(['ERR_CNI_ENDPOINT_TIMEOUT']);
  });

  it('the handler\'s signal aborts when the client goes away', async () => {
    let entered!: () => void;
    const inHandler = new Promise<void>((r) => { entered = r; });
    let aborted!: () => void;
    const sawAbort = new Promise<void>((r) => { aborted = r; });
    const { ep } = await start({
      onCmdAdd: (_q, { signal }) => new Promise<void>((_res, rej) => {
        signal.addEventListener('abort', () => { aborted(); rej(signal.reason); });
        entered();
      }),
    });
    const req = request({ socketPath: ep.socketPath, method: 'POST', path: '/cmdadd' });
    req.on('error', () => {});
    req.end(NO_PREV_BODY);
    await inHandler;
    req.destroy();
    await sawAbort;  // would hang (test timeout) if the disconnect were not noticed
  });

  it('requests are served concurrently', async () => {
    const pending: Array<() => void> = [];
    let bothIn!: () => void;
    const both = new Promise<void>((r) => { bothIn = r; });
    const { ep } = await start({
      onCmdAdd: () => new Promise<void>((r) => { pending.push(r); if (pending.length === 2) bothIn(); }),
    });
    const a = send(ep.socketPath, 'POST', '/cmdadd', NO_PREV_BODY);
    const b = send(ep.socketPath, 'POST', '/cmdadd', SPEC_BODY);
    await both;
    pending.forEach((r) => r());
    expect((await Promise.all([a, b])).map((x) => x.status)).toEqual([200, 200]);
  });
});
