// Istio-style fake ztunnel client (a raw seqpacket socket: hello, read one
// request with its fds, ack) and small helpers for the ZDS tests.
import { mkdtempSync, openSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, afterEach, beforeAll, beforeEach } from 'vitest';
import { connect, socketPair, type UnixConnection } from '../../lib/net/sock/seqpacket.js';
import { decodeRequest, encodeHello, encodeResponse, type WorkloadRequest } from '../../lib/zds/codec.js';

export const openFds = (): number => readdirSync('/proc/self/fd').length;

export function tempSocketPath(): { path: string; dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'pw-zds-'));
  return { dir, path: join(dir, 'ztunnel.sock'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

export const devNull = (): number => openSync('/dev/null', 'r');

export const info = (name: string) => ({ name, namespace: 'default', serviceAccount: 'sa' });

export interface Received {
  req: WorkloadRequest;
  fds: number;
}

/** A fake ztunnel as Istio's tests write it: hello, readRequest, sendAck. */
export class FakeZtunnel {
  constructor(readonly conn: UnixConnection) {}

  static async connect(path: string, hello = true): Promise<FakeZtunnel> {
    const c = new FakeZtunnel(await connect(path));
    if (hello) await c.conn.send(encodeHello());
    return c;
  }

  /** Reads one request (1 s deadline, 1024 B, room for fds); received fds are counted and closed. */
  async read(timeoutMs = 1000): Promise<Received> {
    const m = await this.conn.recv({ maxBytes: 1024, maxFds: 4, timeoutMs });
    if (!m) throw new Error('EOF');
    const fds = m.fds.length;
    for (const f of m.fds) f.close();
    return { req: decodeRequest(m.data), fds };
  }

  ack(error = ''): Promise<void> {
    return this.conn.send(encodeResponse(error));
  }

  /** Reads and acks until snapshot_sent; returns what came. */
  async snapshot(): Promise<Received[]> {
    const got: Received[] = [];
    for (;;) {
      const r = await this.read();
      got.push(r);
      await this.ack();
      if (r.req.type === 'snapshot_sent') return got;
    }
  }

  close(): void {
    this.conn.close();
  }
}

export const until = async (pred: () => boolean, timeoutMs = 3000): Promise<void> => {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
};

/** True when the other side closed the connection (EOF, or a reset because our data was unread). */
export async function hungUp(c: FakeZtunnel, timeoutMs = 1000): Promise<boolean> {
  try {
    return (await c.conn.recv({ timeoutMs })) === null;
  } catch (err) {
    return (err as { code?: string }).code === 'ECONNRESET';
  }
}

/**
 * Registers the hooks a ZDS test file runs under: a fresh socket path per test, cleanups run in
 * reverse after it, and no fd left open by the test (libuv's lasting eventfd made first).
 * `ctx.sock` is the current test's socket path.
 */
export function zdsTestLifecycle(): { readonly sock: ReturnType<typeof tempSocketPath>; cleanups: Array<() => unknown> } {
  const ctx = { sock: undefined as unknown as ReturnType<typeof tempSocketPath>, cleanups: [] as Array<() => unknown> };
  let fdsBefore = 0;
  beforeAll(() => {
    for (const c of socketPair()) c.close();
  });
  beforeEach(() => {
    fdsBefore = openFds();
    ctx.sock = tempSocketPath();
  });
  afterEach(async () => {
    for (const fn of ctx.cleanups.splice(0).reverse()) await fn();
    ctx.sock.remove();
    expect(openFds()).toBe(fdsBefore);  // nothing leaked: silent sockets, dups, netns
  });
  return ctx;
}
