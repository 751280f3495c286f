// Unix SOCK_SEQPACKET / SOCK_STREAM sockets with SCM_RIGHTS, against the real
// kernel: record boundaries, fd passing (real netns fds), truncation,
// back-pressure, deadlines, stale socket files and fd hygiene.
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync, openSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connect, listen, socketPair, type UnixConnection } from '../../../lib/net/sock/seqpacket.js';
import { Netns } from '../../../lib/net/netns/netns.js';
import { NetError } from '../../../lib/net/errors.js';
import { native } from '../../../lib/net/binding.js';

const openFds = () => readdirSync('/proc/self/fd').length;
let dir: string;
let fdsBefore: number;
const cleanup: Array<{ close(): void }> = [];

// The first native socket of the process makes libuv create its (lasting)
// async eventfd; make it before any test counts fds.
beforeAll(() => {
  for (const c of socketPair()) c.close();
});
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'pw-seqpacket-'));
  fdsBefore = openFds();
});
afterEach(() => {
  for (const c of cleanup.splice(0)) c.close();
  rmSync(dir, { recursive: true, force: true });
  expect(openFds()).toBe(fdsBefore);  // every test closes every fd it made
});

function pair(type: 'seqpacket' | 'stream' = 'seqpacket'): [UnixConnection, UnixConnection] {
  const p = socketPair(type);
  cleanup.push(...p);
  return p;
}

describe('seqpacket sockets', () => {
  it('keeps record boundaries in both directions', async () => {
    const [a, b] = pair();
    await a.send(Buffer.from([0x08, 0x01]));
    await a.send(Buffer.from('second'));
    expect((await b.recv())!.data).toEqual(Buffer.from([0x08, 0x01]));
    expect((await b.recv())!.data.toString()).toBe('second');
    await b.send(Buffer.from([0x0a, 0x00]));
    expect((await a.recv())!.data).toEqual(Buffer.from([0x0a, 0x00]));
  });

  it('passes a real netns fd that names the same namespace', async () => {
    const [a, b] = pair();
    const ns = Netns.current();
    await a.send(Buffer.from('add'), [ns]);
    const m = (await b.recv({ maxFds: 1 }))!;
    expect(m.fds).toHaveLength(1);
    const fd = m.fds[0]!;
    expect(fd.fd).not.toBe(ns.fd);
    expect(native().nsStat(fd.fd)).toEqual(ns.id);
    fd.close();
    expect(fd.closed).toBe(true);
    expect(() => fd.fd).toThrow(NetError);
    ns.close();
  });

  it('listens on a path with a mode, reports peer credentials, unlinks on close', async () => {
    const path = join(dir, 'z.sock');
    const l = listen(path, { mode: 0o600 });
    expect(statSync(path).isSocket()).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const accepted = l.accept();
    const c = await connect(path);
    const s = await accepted;
    expect(s.peerCredentials()).toEqual({ pid: process.pid, uid: process.getuid!(), gid: process.getgid!() });
    await c.send(Buffer.from('hi'));
    expect((await s.recv())!.data.toString()).toBe('hi');
    c.close();
    expect(await s.recv()).toBeNull();  // EOF
    expect(s.ended).toBe(true);
    s.close();
    l.close();
    expect(() => statSync(path)).toThrow();
  });

  it('works on abstract names', async () => {
    const name = `@pw-seqpacket-${process.pid}-${Date.now()}`;
    const l = listen(name);
    cleanup.push(l);
    const [c, s] = await Promise.all([connect(name), l.accept()]);
    cleanup.push(c, s);
    await s.send(Buffer.from('x'));
    expect((await c.recv())!.data.toString()).toBe('x');
  });

  it('replaces a stale socket file but never a live listener or a regular file', async () => {
    const path = join(dir, 'live.sock');
    const live = listen(path);
    cleanup.push(live);
    expect(() => listen(path)).toThrow(expect.objectContaining({ code: 'EADDRINUSE', op: 'bind' }));
    // What a crashed agent leaves: the socket file without a listener.
    const stalePath = join(dir, 'stale.sock');
    native().unixListen(stalePath, 5, -1, 1).close();
    expect(statSync(stalePath).isSocket()).toBe(true);
    await expect(connect(stalePath)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    const replaced = listen(stalePath);
    cleanup.push(replaced);
    const [c, s] = await Promise.all([connect(stalePath), replaced.accept()]);
    c.close();
    s.close();
    const file = join(dir, 'plain');
    writeFileSync(file, 'keep me');
    expect(() => listen(file)).toThrow(expect.objectContaining({ code: 'EADDRINUSE', op: 'bind' }));
    expect(statSync(file).isFile()).toBe(true);
  });

  it('reports truncated records and too many fds as errors without leaking fds', async () => {
    const [a, b] = pair();
    await a.send(Buffer.alloc(2000, 1));
    await expect(b.recv({ maxBytes: 1024 })).rejects.toMatchObject({ code: 'ERR_MSG_TRUNC', errno: 90, size: 2000 });
    const n1 = openSync('/dev/null', 'r'), n2 = openSync('/dev/null', 'r'), n3 = openSync('/dev/null', 'r');
    const before = openFds();
    await a.send(Buffer.from([0x0a, 0x00]), [n1, n2, n3]);
    await expect(b.recv({ maxFds: 1 })).rejects.toMatchObject({ code: 'ERR_MSG_CTRUNC' });
    expect(openFds()).toBe(before);  // the fds that did arrive were closed
    for (const fd of [n1, n2, n3]) closeSync(fd);
    // The socket is still usable.
    await a.send(Buffer.from('ok'));
    expect((await b.recv())!.data.toString()).toBe('ok');
  });

  it('respects back-pressure: sends wait for room, in order, and sent fds survive an early close', async () => {
    const [a, b] = pair();
    const sends: Promise<void>[] = [];
    let i = 0;
    while (a.pendingSends === 0 && i < 100_000) sends.push(a.send(Buffer.alloc(4096, i++ % 256)));
    expect(a.pendingSends).toBe(1);
    // Queue one with an fd, then close our copy right away.
    const fd = openSync('/dev/null', 'r');
    const withFd = a.send(Buffer.from('fd'), [fd]);
    closeSync(fd);
    let got = 0;
    let fdMsg;
    for (;;) {
      const m = (await b.recv({ maxBytes: 8192 }))!;
      if (m.data.toString() === 'fd') {
        fdMsg = m;
        break;
      }
      expect(m.data[0]).toBe(got % 256);
      got++;
    }
    await Promise.all(sends);
    await withFd;
    expect(got).toBe(i);
    expect(fdMsg.fds).toHaveLength(1);
    expect(statSync(`/proc/self/fd/${fdMsg.fds[0]!.fd}`).isCharacterDevice()).toBe(true);
    fdMsg.fds[0]!.close();
  });

  it('times out sends and receives, and close() rejects what waits', async () => {
    const [a, b] = pair();
    await expect(b.recv({ timeoutMs: 20 })).rejects.toMatchObject({ code: 'ETIMEDOUT', op: 'recvmsg' });
    while (a.pendingSends === 0) void a.send(Buffer.alloc(8192)).catch(() => {});
    await expect(a.send(Buffer.from('late'), [], { timeoutMs: 20 })).rejects.toMatchObject({ code: 'ETIMEDOUT', op: 'sendmsg' });
    const waiting = a.recv();
    a.close();
    await expect(waiting).rejects.toMatchObject({ code: 'ERR_SOCKET_CLOSED' });
    await expect(a.send(Buffer.from('x'))).rejects.toMatchObject({ code: 'ERR_SOCKET_CLOSED' });
  });

  it('refuses timeouts a timer cannot honour (>= 2^31 ms, fractions, negatives) instead of firing after 1 ms', async () => {
    const [a, b] = pair();
    for (const bad of [2 ** 31, 2 ** 32 + 5, 1.5, -1, Number.NaN, Infinity]) {
      expect(() => b.recv({ timeoutMs: bad })).toThrow(RangeError);
      expect(() => a.send(Buffer.from('x'), [], { timeoutMs: bad })).toThrow(RangeError);
      await expect(connect(join(dir, 'none.sock'), { timeoutMs: bad })).rejects.toThrow(RangeError);
    }
    expect(() => b.recv({ timeoutMs: '5' as never })).toThrow(RangeError);
    // Nothing was queued by the refused calls.
    await a.send(Buffer.from('ok'));
    expect((await b.recv({ timeoutMs: 0 }))!.data.toString()).toBe('ok');
    // The largest honoured value really waits (Node would turn 2^31 into 1 ms).
    const waiting = b.recv({ timeoutMs: 2 ** 31 - 1 });
    const outcome = await Promise.race([waiting.then(() => 'settled', () => 'settled'), new Promise((r) => setTimeout(() => r('waiting'), 100))]);
    expect(outcome).toBe('waiting');
    b.close();
    await expect(waiting).rejects.toMatchObject({ code: 'ERR_SOCKET_CLOSED' });
  });

  it('reports a dead peer as EPIPE', async () => {
    const [a, b] = pair();
    b.close();
    await expect(a.send(Buffer.from('x'))).rejects.toMatchObject({ code: 'EPIPE', op: 'sendmsg' });
  });

  it('iterates records until EOF', async () => {
    const [a, b] = pair();
    for (const s of ['1', '2', '3']) await a.send(Buffer.from(s));
    a.close();
    const seen: string[] = [];
    for await (const m of b) seen.push(m.data.toString());
    expect(seen).toEqual(['1', '2', '3']);
  });

  it('accepts many connections through the async iterator', async () => {
    const path = join(dir, 'many.sock');
    const l = listen(path, { backlog: 4 });
    cleanup.push(l);
    const clients = await Promise.all([1, 2, 3].map(() => connect(path)));
    cleanup.push(...clients);
    let n = 0;
    for await (const s of l) {
      cleanup.push(s);
      if (++n === 3) break;
    }
    expect(n).toBe(3);
  });

  it('rejects bad input before any syscall', () => {
    const [a] = pair();
    expect(() => listen('')).toThrow(TypeError);
    expect(() => listen('/x', { type: 'dgram' as never })).toThrow(TypeError);
    expect(() => listen('/' + 'x'.repeat(200))).toThrow(RangeError);
    expect(() => listen(join(dir, 'm.sock'), { mode: 0o17777 })).toThrow(RangeError);
    expect(() => a.send('text' as never)).toThrow(TypeError);
    expect(() => a.send(Buffer.from('x'), [-1])).toThrow(TypeError);
    expect(() => a.recv({ maxBytes: 0 })).toThrow(RangeError);
    expect(() => a.recv({ timeoutMs: -1 })).toThrow(RangeError);
  });

  it('fails fast on a missing path or a refused abstract name', async () => {
    await expect(connect(join(dir, 'none.sock'))).rejects.toMatchObject({ code: 'ENOENT', op: 'connect' });
    await expect(connect(`@pw-nobody-${process.pid}`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});

describe('stream sockets', () => {
  it('delivers a large buffer whole through partial writes, fds with the first byte', async () => {
    const [a, b] = pair('stream');
    const big = Buffer.alloc(3 << 20);
    for (let i = 0; i < big.length; i++) big[i] = i % 251;
    const ns = Netns.current();
    const sent = a.send(big, [ns]);
    const chunks: Buffer[] = [];
    let total = 0;
    let fds = 0;
    while (total < big.length) {
      const m = (await b.recv({ maxBytes: 1 << 16 }))!;
      fds += m.fds.length;
      for (const f of m.fds) f.close();
      chunks.push(m.data);
      total += m.data.length;
    }
    await sent;
    ns.close();
    expect(fds).toBe(1);
    expect(Buffer.concat(chunks).equals(big)).toBe(true);
  });
});
