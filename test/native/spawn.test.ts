// Raw-binding tests of native spawn: the child leads its own process group
// (timeout and teardown kill the group), the call ends once the child has
// exited even if a grandchild holds stdout, env teardown wakes waiting
// spawns at once, and timeouts are validated.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { native } from '../../lib/net/binding.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SH = '/bin/sh';
const ENV = ['PATH=/usr/sbin:/usr/bin:/sbin:/bin'];

// Alive = exists and is not a zombie (a killed orphan waits for its reaper).
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

function pgidOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

async function waitDead(pid: number, ms = 2000): Promise<boolean> {
  const end = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

async function readPids(file: string, ms = 5000): Promise<number[]> {
  const end = Date.now() + ms;
  for (;;) {
    if (existsSync(file)) {
      const text = readFileSync(file, 'utf8');
      if (text.endsWith('\n')) return text.trim().split(/\s+/).map(Number);
    }
    if (Date.now() > end) throw new Error(`${file} never written`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const dirs: string[] = [];
const leftovers: number[] = [];
afterEach(() => {
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-spawn-'));
  dirs.push(d);
  return d;
}

function runWorker(code: string, data: unknown): Worker {
  return new Worker(
    `(async () => {
      const { parentPort, workerData } = await import('node:worker_threads');
      const { createRequire } = await import('node:module');
      const b = createRequire(workerData.root + '/package.json')('node-gyp-build')(workerData.root);
      ${code}
    })();`,
    { eval: true, workerData: data },
  );
}

describe.skipIf(!privileged())('native spawn', () => {
  it('a timeout kills the whole process group, grandchildren included', async () => {
    const ns = await freshNetns();
    const pidFile = join(tmp(), 'pids');
    const t0 = Date.now();
    const r = await native().spawn(ns.fd, [SH, '-c', `sleep 30 & echo $! > ${pidFile}; exec sleep 30`], ENV, null, null, 200);
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(r.timedOut).toBe(true);
    const [grandchild] = await readPids(pidFile);
    leftovers.push(grandchild!);
    expect(await waitDead(grandchild!)).toBe(true);
  });

  it('enforces the timeout on a child that closed its pipes and hangs', async () => {
    const ns = await freshNetns();
    const t0 = Date.now();
    // With every pipe closed, the loop used to stop polling and block in waitpid.
    const r = await native().spawn(ns.fd, [SH, '-c', 'exec </dev/null >/dev/null 2>&1; exec sleep 30'], ENV, null, null, 200);
    expect(Date.now() - t0).toBeLessThan(1500);
    expect(r.timedOut).toBe(true);
    expect(r.signal).toBe(9);
  });

  it('resolves once the child exits even if a grandchild still holds stdout', async () => {
    const ns = await freshNetns();
    const pidFile = join(tmp(), 'pids');
    const t0 = Date.now();
    const r = await native().spawn(ns.fd, [SH, '-c', `(sleep 5) & echo $! > ${pidFile}; echo hi`], ENV, null, null, 0);
    const took = Date.now() - t0;
    const [sub] = await readPids(pidFile);
    // The grandchild shares the child's group (pgid = child pid): kill it all in cleanup.
    const pgid = pgidOf(sub!);
    leftovers.push(sub!);
    expect(pgid).not.toBe(pgidOf(process.pid));  // its own group, never ours
    leftovers.push(-pgid);
    expect(took).toBeLessThan(2000);
    expect(r.code).toBe(0);
    expect(r.timedOut).toBe(false);
    expect(r.stdout.toString()).toBe('hi\n');
    expect(alive(sub!)).toBe(true);  // not killed: only a timeout or teardown kills the group
  });

  it('keeps output the child wrote just before it exited', async () => {
    const r = await native().spawn(-1, [SH, '-c', 'head -c 200000 /dev/zero; echo done >&2'], ENV, null, null, 10_000);
    expect(r.stdout.length).toBe(200000);
    expect(r.stderr.toString()).toBe('done\n');
  });

  it('rejects timeouts that are not integers in [0, 2^31-1] with RangeError', async () => {
    for (const t of [1.5, -1, 2 ** 31, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => native().spawn(-1, ['/bin/true'], ENV, null, null, t), String(t)).toThrow(RangeError);
    }
    const r = await native().spawn(-1, ['/bin/true'], ENV, null, null, 2 ** 31 - 1);
    expect(r.code).toBe(0);
  });

  it('rejects nft set and element timeouts that are negative or not integers with RangeError', () => {
    const set = { op: 'newset', family: 1, table: 't', name: 's', keyType: 7, keyLen: 4 };
    for (const t of [-1, 1.5, Number.NaN]) {
      expect(() => native().nftEncode([{ ...set, timeoutMs: t } as never]), String(t)).toThrow(RangeError);
      expect(() => native().nftEncode([{ op: 'newelem', family: 1, table: 't', set: 's', elems: [{ key: Buffer.alloc(4), timeoutMs: t }] } as never]), String(t)).toThrow(RangeError);
    }
  });

  it('worker.terminate() does not wait for a spawn whose grandchild holds its pipes, and kills the group', async () => {
    const ns = await freshNetns();
    const pidFile = join(tmp(), 'pids');
    const w = runWorker(`
      b.spawn(workerData.fd, ['/bin/sh', '-c', 'sleep 8 & echo $$ $! > ' + workerData.pidFile + '; wait'], workerData.env, null, null, 0);
      parentPort.postMessage('started');`, { root, fd: ns.fd, pidFile, env: ENV });
    await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
    const [sh, sleep] = await readPids(pidFile);
    leftovers.push(sh!, sleep!);
    const t0 = Date.now();
    await w.terminate();
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(await waitDead(sh!)).toBe(true);
    expect(await waitDead(sleep!)).toBe(true);
  });

  it('worker.terminate() returns at once even when a grandchild left the group', async () => {
    const ns = await freshNetns();
    const pidFile = join(tmp(), 'pids');
    const w = runWorker(`
      b.spawn(workerData.fd, ['/bin/sh', '-c', 'setsid sleep 30 & echo $$ $! > ' + workerData.pidFile + '; wait'], workerData.env, null, null, 0);
      parentPort.postMessage('started');`, { root, fd: ns.fd, pidFile, env: ENV });
    await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject); });
    const [sh, daemon] = await readPids(pidFile);
    leftovers.push(sh!, daemon!);  // setsid: out of reach of the group kill; cleaned up here
    const t0 = Date.now();
    await w.terminate();
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(await waitDead(sh!)).toBe(true);
  });
});
