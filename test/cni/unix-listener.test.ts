// The one socket setup of the agent's run-dir sockets (pluginevent.sock,
// log.sock): bound in a private dir and renamed into place at 0600, a
// stale socket or file replaced, the private dir gone, the run dir created
// 0750, typed errors, and unlink only of our own socket.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { listenUnix, UnixListenerError } from '../../lib/cni/unix-listener.js';

const dirs: string[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => (s.listening ? s.close(() => r()) : r()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function temp(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-unixl-'));
  dirs.push(d);
  return d;
}

function server(): Server {
  const s = createServer((c) => c.end('hi'));
  servers.push(s);
  return s;
}

describe('listenUnix', () => {
  it('creates the run dir 0750 and the socket 0600, and leaves no private dir', async () => {
    const run = join(temp(), 'run', 'istio-cni');
    mkdirSync(join(run, '..'), { recursive: true });
    mkdirSync(run, { mode: 0o750 });
    const l = await listenUnix(server(), run, 'x.sock');
    expect(l.path).toBe(join(run, 'x.sock'));
    const st = lstatSync(l.path);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(readdirSync(run)).toEqual(['x.sock']);
    // A run dir it has to create is 0750 (minus the umask).
    const fresh = join(temp(), 'a', 'b');
    await listenUnix(server(), fresh, 'y.sock');
    expect(statSync(fresh).mode & 0o027).toBe(0);
  });

  it('replaces a stale file at the path; unlinkIfOurs removes its own socket and leaves a newer one alone', async () => {
    const run = temp();
    writeFileSync(join(run, 's.sock'), 'stale');
    const a = await listenUnix(server(), run, 's.sock');
    expect(lstatSync(a.path).isSocket()).toBe(true);
    await a.unlinkIfOurs();
    expect(existsSync(a.path)).toBe(false);
    await a.unlinkIfOurs();  // already gone: no error

    const b = await listenUnix(server(), run, 's.sock');
    writeFileSync(join(run, 'other'), '');
    renameSync(join(run, 'other'), b.path);  // a newer agent took the path
    await b.unlinkIfOurs();
    expect(existsSync(b.path)).toBe(true);
  });

  it('fails with typed errors naming the stage, and closes the server when listen did not complete', async () => {
    const file = join(temp(), 'file');
    writeFileSync(file, '');
    const e1 = await listenUnix(server(), join(file, 'sub'), 'z.sock').catch((e: unknown) => e);
    expect(e1).toBeInstanceOf(UnixListenerError);
    expect(e1).toMatchObject({ code: 'ERR_UNIX_LISTEN', stage: 'run-dir', errno: 'ENOTDIR' });
    // The final path is a directory: rename() cannot replace it.
    const run = temp();
    mkdirSync(join(run, 'd.sock', 'inside'), { recursive: true });
    const s = server();
    const e2 = await listenUnix(s, run, 'd.sock').catch((e: unknown) => e);
    expect(e2).toMatchObject({ code: 'ERR_UNIX_LISTEN', stage: 'listen' });
    expect(s.listening).toBe(false);
    expect(readdirSync(run)).toEqual(['d.sock']);
  });
});
