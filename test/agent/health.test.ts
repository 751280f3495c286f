// The health server (/healthz, /readyz) and the readiness conditions; servers on 127.0.0.1:0.
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { expectGetHeadOnly, httpGet } from '../helpers/http.js';
import { MonitorServerError, READINESS_CONDITIONS, Readiness, startHealthServer, type RunningServer } from '../../lib/agent/health.js';

const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function health(readiness?: Readiness) {
  const s = await startHealthServer({ port: 0, host: '127.0.0.1', ...(readiness ? { readiness } : {}) });
  servers.push(s);
  return s;
}

const get = httpGet;

describe('Readiness', () => {
  it('is ready only with every condition, and lists the unmet ones in order', () => {
    const r = new Readiness();
    expect(r.ready).toBe(false);
    expect(r.unmet()).toEqual(['installed', 'informersSynced', 'snapshotReconciled', 'nodeUntainted']);
    r.set('snapshotReconciled');
    r.set('installed');
    r.set('nodeUntainted');
    expect(r.unmet()).toEqual(['informersSynced']);
    expect(r.ready).toBe(false);
    r.set('informersSynced');
    expect(r.ready).toBe(true);
    r.clear('installed');
    expect(r.has('installed')).toBe(false);
    expect(r.unmet()).toEqual(['installed']);
    r.set('installed', true);
    r.set('informersSynced', false);
    expect(r.unmet()).toEqual(['informersSynced']);
  });

  it('refuses unknown conditions', () => {
    expect(() => new Readiness().set('watchReady' as never)).toThrow(TypeError);
  });
});

describe('health server', () => {
  it('/readyz is 503 until the last condition is set, and 503 again when one is cleared', async () => {
    const s = await health();
    let r = await get(s, '/readyz');
    expect(r.status).toBe(503);
    expect(r.body).toBe('not ready: installed, informersSynced, snapshotReconciled, nodeUntainted\n');

    const order = [...READINESS_CONDITIONS];
    for (const [i, c] of order.entries()) {
      expect((await get(s, '/readyz')).status).toBe(503);
      s.readiness.set(c);
      r = await get(s, '/readyz');
      if (i < order.length - 1) {
        expect(r.status).toBe(503);
        expect(r.body).toBe(`not ready: ${order.slice(i + 1).join(', ')}\n`);
      }
    }
    expect(r.status).toBe(200);
    expect(r.body).toBe('ready\n');

    s.readiness.clear('informersSynced');
    r = await get(s, '/readyz');
    expect(r.status).toBe(503);
    expect(r.body).toBe('not ready: informersSynced\n');
    s.readiness.set('informersSynced');
    expect((await get(s, '/readyz')).status).toBe(200);
  });

  it('serves a Readiness it is given', async () => {
    const readiness = new Readiness();
    for (const c of READINESS_CONDITIONS) readiness.set(c);
    const s = await health(readiness);
    expect(s.readiness).toBe(readiness);
    expect((await get(s, '/readyz')).status).toBe(200);
  });

  it('/healthz is 200 whether ready or not; query strings are ignored', async () => {
    const s = await health();
    const r = await get(s, '/healthz');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(r.headers['cache-control']).toBe('no-store');
    expect((await get(s, '/healthz?verbose=1')).status).toBe(200);
    expect((await get(s, '/readyz?x')).status).toBe(503);
  });

  it('404 for other paths', async () => {
    const s = await health();
    for (const p of ['/', '/ready', '/readyz/', '/healthz/x', '/metrics', '/HEALTHZ', '/__proto__', '/constructor']) {
      expect((await get(s, p)).status, p).toBe(404);
    }
  });

  it('405 with Allow for methods other than GET/HEAD; HEAD has no body', async () => {
    const s = await health();
    await expectGetHeadOnly(s, '/healthz', 200);
    await expectGetHeadOnly(s, '/readyz', 503);
  });

  it('answers without reading a request body, and closes that connection', async () => {
    const s = await health();
    // Headers promise a 1 GB body that never comes: the answer must not wait for it.
    const sock = connect(s.port, s.host);
    const reply = await new Promise<string>((resolve, reject) => {
      let data = '';
      sock.setEncoding('utf8');
      sock.on('data', (d: string) => (data += d));
      sock.on('end', () => resolve(data));
      sock.on('error', reject);
      sock.write('POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\nabc');
    });
    sock.destroy();
    expect(reply).toMatch(/^HTTP\/1\.1 405 /);
    expect(reply).toMatch(/\r\nConnection: close\r\n/i);
  });

  it('close() is graceful and idempotent, with an idle keep-alive connection open', async () => {
    const s = await health();
    const sock = connect(s.port, s.host);
    const closed = new Promise<void>((resolve) => sock.on('close', () => resolve()));
    await new Promise<void>((resolve) => {
      sock.once('data', () => resolve());
      sock.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    });
    const a = s.close();
    expect(s.close()).toBe(a);
    await a;
    await closed;  // the idle keep-alive connection was closed by the server
    await expect(get(s, '/healthz')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('typed errors: bad options, port in use', async () => {
    await expect(startHealthServer({ port: 70000, host: '127.0.0.1' })).rejects.toMatchObject({ code: 'ERR_MONITOR_OPTIONS', server: 'health' });
    await expect(startHealthServer({ port: 1.5 })).rejects.toBeInstanceOf(MonitorServerError);
    await expect(startHealthServer({ port: 0, host: '' })).rejects.toMatchObject({ code: 'ERR_MONITOR_OPTIONS' });
    const s = await health();
    const err = await startHealthServer({ port: s.port, host: '127.0.0.1' }).then(
      (extra) => { servers.push(extra); throw new Error('second listen on the same port succeeded'); },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(MonitorServerError);
    expect(err).toMatchObject({ name: 'MonitorServerError', code: 'ERR_MONITOR_LISTEN', errno: 'EADDRINUSE', server: 'health' });
  });
});

describe('health server under a connection flood', () => {
  // Open `n` connections; `partial` of them send half a request line and then stall (slowloris).
  function flood(port: number, host: string, n: number, partial: boolean) {
    let closed = 0;
    const socks = Array.from({ length: n }, () => {
      const c = connect(port, host);
      c.on('error', () => {});
      c.on('close', () => { closed++; });
      if (partial) c.write('GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      return c;
    });
    return { socks, closed: () => closed, destroy: () => socks.forEach((c) => c.destroy()) };
  }

  async function until(cond: () => boolean, what: string): Promise<void> {
    for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 20));
    expect(cond(), what).toBe(true);
  }

  it('closes stalled and silent connections at the header deadline, however many trickle in', async () => {
    const s = await startHealthServer({ port: 0, host: '127.0.0.1', guard: { headerDeadlineMs: 200, idleMs: 60_000, maxConnections: 1000 } });
    servers.push(s);
    const slow = flood(s.port, s.host, 30, true);
    const silent = flood(s.port, s.host, 30, false);
    try {
      // Node 20's own headersTimeout never closes these; the guard must close every one of them.
      await until(() => slow.closed() === 30 && silent.closed() === 30, 'every stalled connection closed by the server');
      expect((await get(s, '/healthz')).status).toBe(200);
    } finally {
      slow.destroy();
      silent.destroy();
    }
  });

  it('caps open connections: past the cap new ones are closed, and /healthz answers once the flood is gone', async () => {
    const s = await startHealthServer({ port: 0, host: '127.0.0.1', guard: { maxConnections: 8, headerDeadlineMs: 60_000, idleMs: 60_000 } });
    servers.push(s);
    const f = flood(s.port, s.host, 20, false);
    try {
      await until(() => f.closed() === 12, '12 connections over the cap of 8 closed');
      await new Promise((r) => setTimeout(r, 100));
      expect(f.closed()).toBe(12);  // the 8 within the cap stay (their deadline is a minute)
    } finally {
      f.destroy();
    }
    await until(() => s.server.listening, 'listening');
    for (let i = 0; i < 50; i++) {
      const r = await get(s, '/healthz').catch(() => undefined);
      if (r?.status === 200) return;
      await new Promise((res) => setTimeout(res, 20));
    }
    expect.fail('/healthz did not answer after the flood was gone');
  });

  it('refuses bad guard options with a typed error', async () => {
    await expect(startHealthServer({ port: 0, host: '127.0.0.1', guard: { maxConnections: 0 } })).rejects.toMatchObject({ code: 'ERR_MONITOR_OPTIONS' });
  });
});
