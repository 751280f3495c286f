// The agent's unix sockets under a flood (issue 23, "Unbounded connections"): pluginevent.sock
// and log.sock close silent, half-sent and slow-body connections on their own deadlines (Node
// 20's headersTimeout never does), close connections over their cap at accept, and refuse
// bodies past the shared in-flight budget (503) so concurrent large bodies cannot pile up in
// memory; afterwards the budget is back at 0 and a normal request is served. Real unix sockets
// in a temp run dir; the accounting is asserted, not RSS.
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CNI_PATH, SHIM_REQUEST_MAX_BYTES, startCniEndpoint, type CniEndpoint, type CniEndpointOptions } from '../../lib/cni/endpoint.js';
import { startLogSink, type LogSink, type LogSinkOptions } from '../../lib/cni/log-sink.js';
import { createLogging } from '../../lib/util/log.js';

let dirs: string[] = [];
let closers: Array<() => Promise<void>> = [];
let sockets: Socket[] = [];

afterEach(async () => {
  for (const s of sockets) s.destroy();
  await Promise.all(closers.map((c) => c()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
  closers = [];
  sockets = [];
});

function runDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-epguard-'));
  dirs.push(d);
  return join(d, 'run');
}

const REPLY = { exitCode: 0, stdout: '{"cniVersion":"1.0.0"}' };

async function endpoint(opts: Partial<CniEndpointOptions> = {}): Promise<CniEndpoint> {
  const ep = await startCniEndpoint({ runDir: runDir(), onCmdAdd: async () => {}, onCni: async () => REPLY, ...opts });
  closers.push(() => ep.close());
  return ep;
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 20));
  expect(cond(), what).toBe(true);
}

/** A raw connection: what the server sent, and whether it closed. */
function open(path: string, bytes?: string | Buffer) {
  const c = connect(path);
  sockets.push(c);
  const st = { closed: false, data: '' };
  c.on('error', () => {});
  c.on('data', (d: Buffer) => { st.data += d.toString('latin1'); });
  c.on('close', () => { st.closed = true; });
  if (bytes !== undefined) c.write(bytes);
  return { c, st };
}

/** Opens n connections: silent ones, or ones that send half a request head and stall (slowloris). */
function flood(path: string, n: number, partial: boolean) {
  const conns = Array.from({ length: n }, () => open(path, partial ? 'POST /v1/cni HTTP/1.1\r\nHost: x\r\nX-Slow: ' : undefined));
  return { closed: () => conns.filter((x) => x.st.closed).length, destroy: () => conns.forEach((x) => x.c.destroy()) };
}

function post(socketPath: string, path: string, body: string | Buffer): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method: 'POST', path, headers: { Host: 'podwire' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const head = (path: string, len: number) => `POST ${path} HTTP/1.1\r\nHost: podwire\r\nContent-Length: ${len}\r\nConnection: close\r\n\r\n`;
const statusOf = (text: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);

describe('pluginevent.sock under a flood', () => {
  it('closes silent, half-sent and slow-body connections on its own deadlines; a CNI request is served meanwhile', async () => {
    const ep = await endpoint({ guard: { headerDeadlineMs: 200, idleMs: 60_000, maxConnections: 1000 }, bodyDeadlineMs: 300 });
    const silent = flood(ep.socketPath, 30, false);
    const slow = flood(ep.socketPath, 30, true);
    const bodies = Array.from({ length: 10 }, () => open(ep.socketPath, `${head(CNI_PATH, 100)}{"command":`));
    // Node 20's own headersTimeout/requestTimeout never close these within the bound; the server must.
    await until(() => silent.closed() === 30 && slow.closed() === 30 && bodies.every((b) => b.st.closed), 'every stalled connection closed by the server');
    expect(bodies.map((b) => statusOf(b.st.data))).toEqual(Array(10).fill(408));
    expect(ep.bodyBytesInFlight).toBe(0);
    const r = await post(ep.socketPath, CNI_PATH, '{"command":"ADD","env":{},"config":"{}"}');
    expect(r).toEqual({ status: 200, body: REPLY.stdout });
  });

  it('closes connections over its cap at accept, and serves a CNI request once the flood is gone', async () => {
    const ep = await endpoint({ guard: { maxConnections: 8, headerDeadlineMs: 60_000, idleMs: 60_000 } });
    const f = flood(ep.socketPath, 20, false);
    await until(() => f.closed() === 12, '12 connections over the cap of 8 closed');
    f.destroy();
    let served: { status: number } | undefined;
    for (let i = 0; i < 50 && served?.status !== 200; i++) {
      served = await post(ep.socketPath, CNI_PATH, '{}').catch(() => undefined);
      if (served?.status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    expect(served?.status).toBe(200);
  });

  it('refuses a body that would take the bodies in flight past the budget (503, closed), and gives every byte back', async () => {
    const ep = await endpoint({ maxBodyBytes: 48 << 10, bodyBudgetBytes: 64 << 10 });
    const body = Buffer.alloc(40 << 10, 0x20);
    // A holds 30 KiB of its 40 KiB body...
    const a = open(ep.socketPath, Buffer.concat([Buffer.from(head(CNI_PATH, body.length)), body.subarray(0, 30 << 10)]));
    await until(() => ep.bodyBytesInFlight === 30 << 10, 'A charged 30 KiB');
    // ...so B's 40 KiB do not fit: refused without waiting for A.
    const b = open(ep.socketPath, Buffer.concat([Buffer.from(head(CNI_PATH, body.length)), body]));
    await until(() => b.st.closed, 'B answered and closed');
    expect(statusOf(b.st.data)).toBe(503);
    expect(b.st.data).toContain('node agent busy');
    expect(ep.bodyBytesInFlight).toBe(30 << 10);
    // A completes and is served; then nothing stays charged.
    a.c.write(body.subarray(30 << 10));
    await until(() => a.st.closed, 'A answered');
    expect(statusOf(a.st.data)).toBe(200);
    expect(ep.bodyBytesInFlight).toBe(0);
  });

  it('concurrent large bodies: what handlers hold never exceeds the budget, the rest get 503, and the accounting returns to 0', async () => {
    let inHandler = 0;
    let maxHeld = 0;
    let open_!: () => void;
    const gate = new Promise<void>((r) => { open_ = r; });
    const ep = await endpoint({
      maxBodyBytes: 48 << 10, bodyBudgetBytes: 64 << 10,
      onCni: async (b) => {
        inHandler++;
        maxHeld = Math.max(maxHeld, ep.bodyBytesInFlight);
        expect(b.length).toBe(40 << 10);
        await gate;  // held: its bytes stay charged until it answers
        return REPLY;
      },
    });
    const body = Buffer.alloc(40 << 10, 0x20);
    const conns = Array.from({ length: 10 }, () => open(ep.socketPath, Buffer.concat([Buffer.from(head(CNI_PATH, body.length)), body])));
    const refused = () => conns.filter((x) => x.st.closed && statusOf(x.st.data) === 503).length;
    await until(() => refused() + inHandler === 10, 'every request refused or in its handler');
    expect(inHandler).toBeLessThanOrEqual(1);  // 2 × 40 KiB > 64 KiB
    expect(refused()).toBeGreaterThanOrEqual(9);
    expect(maxHeld).toBeLessThanOrEqual(64 << 10);
    open_();
    await until(() => conns.every((x) => x.st.closed), 'all answered');
    expect(conns.map((x) => statusOf(x.st.data)).filter((s) => s !== 503)).toEqual(Array(inHandler).fill(200));
    expect(ep.bodyBytesInFlight).toBe(0);
  });

  it('a declared body over the cap is 413 at once; the largest request the shim can send fits the agent cap', async () => {
    const ep = await endpoint({ maxBodyBytes: SHIM_REQUEST_MAX_BYTES, bodyBudgetBytes: SHIM_REQUEST_MAX_BYTES, onCni: async (b) => ({ exitCode: 0, stdout: String(b.length) }) });
    // 1 MiB of valid JSON that escapes worst (every byte a backslash inside a string or a newline), plus env.
    const json = `{"cniVersion":"1.0.0","name":"${'\\\\'.repeat(((1 << 20) - 64) / 2)}"}`;
    const stdin = json.padEnd(1 << 20, '\n');
    JSON.parse(stdin);
    expect(Buffer.byteLength(stdin)).toBe(1 << 20);
    const env = Object.fromEntries(['CNI_COMMAND', 'CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_ARGS', 'CNI_PATH'].map((k) => [k, 'x'.repeat(64 << 10)]));
    const worst = JSON.stringify({ command: 'ADD', env, config: stdin });
    expect(Buffer.byteLength(worst)).toBeGreaterThan(2 << 20);
    const r = await post(ep.socketPath, CNI_PATH, worst);
    expect(r).toEqual({ status: 200, body: String(Buffer.byteLength(worst)) });
    const over = open(ep.socketPath, head(CNI_PATH, SHIM_REQUEST_MAX_BYTES + 1));
    await until(() => over.st.closed, 'answered and closed without a body sent');
    expect(statusOf(over.st.data)).toBe(413);
    expect(ep.bodyBytesInFlight).toBe(0);
  });

  it('refuses bad bound options with a typed error', async () => {
    await expect(endpoint({ guard: { maxConnections: 0 } })).rejects.toMatchObject({ code: 'ERR_CNI_ENDPOINT_OPTIONS' });
    await expect(endpoint({ maxBodyBytes: 2048, bodyBudgetBytes: 1024 })).rejects.toMatchObject({ code: 'ERR_CNI_ENDPOINT_OPTIONS' });
    await expect(endpoint({ bodyDeadlineMs: -1 })).rejects.toMatchObject({ code: 'ERR_CNI_ENDPOINT_OPTIONS' });
  });
});

describe('log.sock under a flood', () => {
  async function sink(opts: LogSinkOptions = {}) {
    const lines: string[] = [];
    const log = createLogging({ levels: { default: 'info' }, json: true, sink: { write: (l: string) => lines.push(l) } }).scope('cni-plugin');
    const s: LogSink = await startLogSink(runDir(), log, opts);
    closers.push(() => s.close());
    return { s, lines };
  }
  const batch = (msg: string) => JSON.stringify([JSON.stringify({ level: 'info', time: '2026-12-01T10:00:00Z', msg })]);

  it('closes silent, half-sent and slow-body connections; a log batch is replayed meanwhile', async () => {
    const { s, lines } = await sink({ guard: { headerDeadlineMs: 200, idleMs: 60_000, maxConnections: 1000 }, bodyDeadlineMs: 300 });
    const silent = flood(s.socketPath, 20, false);
    const slow = flood(s.socketPath, 20, true);
    const bodies = Array.from({ length: 5 }, () => open(s.socketPath, `${head('/log', 100)}["`));
    await until(() => silent.closed() === 20 && slow.closed() === 20 && bodies.every((b) => b.st.closed), 'every stalled connection closed by the server');
    expect(bodies.map((b) => statusOf(b.st.data))).toEqual(Array(5).fill(408));
    expect((await post(s.socketPath, '/log', batch('after the flood'))).status).toBe(200);
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(['after the flood']);
    expect(s.bodyBytesInFlight).toBe(0);
  });

  it('closes connections over its cap at accept', async () => {
    const { s } = await sink({ guard: { maxConnections: 4, headerDeadlineMs: 60_000, idleMs: 60_000 } });
    const f = flood(s.socketPath, 10, false);
    await until(() => f.closed() === 6, '6 connections over the cap of 4 closed');
    f.destroy();
  });

  it('answers a body over its cap (413) or past the budget (503) and closes, without reading it all; nothing stays charged', async () => {
    const { s, lines } = await sink({ maxBodyBytes: 48 << 10, bodyBudgetBytes: 64 << 10 });
    const big = open(s.socketPath, head('/log', 10 << 20));  // declared 10 MiB, never sent
    await until(() => big.st.closed, 'answered and closed');
    expect(statusOf(big.st.data)).toBe(413);
    const a = open(s.socketPath, Buffer.concat([Buffer.from(head('/log', 40 << 10)), Buffer.alloc(30 << 10, 0x20)]));
    await until(() => s.bodyBytesInFlight === 30 << 10, 'A charged 30 KiB');
    const b = open(s.socketPath, Buffer.concat([Buffer.from(head('/log', 40 << 10)), Buffer.alloc(40 << 10, 0x20)]));
    await until(() => b.st.closed, 'B answered and closed');
    expect(statusOf(b.st.data)).toBe(503);
    a.c.write(Buffer.alloc(10 << 10, 0x20));
    await until(() => a.st.closed, 'A answered');
    expect(statusOf(a.st.data)).toBe(200);
    expect(s.bodyBytesInFlight).toBe(0);
    expect(lines).toEqual([]);  // whitespace is no batch
  });
});
