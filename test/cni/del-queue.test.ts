// The DEL-queue drain removes files as root: it must act only inside the real queue dir and only
// on regular files. Real directories, links and FIFOs in a temp dir.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEL_QUEUE_DIR, DelQueueError, drainDelQueue, isDelRecordName, type DelRecord } from '../../lib/cni/del-queue.js';

const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });

function tmp(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

const rec = (id: string): DelRecord => ({ containerId: id, netns: '', ifname: 'eth0', podNamespace: 'n', podName: `p-${id}`, podUid: `u-${id}`, time: '' });

/** A run dir with a real 0700 queue dir. */
function runWithQueue(): { run: string; q: string } {
  const run = tmp('pwt-delq-');
  const q = join(run, DEL_QUEUE_DIR);
  mkdirSync(q, { mode: 0o700 });
  return { run, q };
}

async function drainError(run: string): Promise<DelQueueError> {
  const seen: string[] = [];
  const err = await drainDelQueue(run, async (r) => { seen.push(r.containerId); }).then(() => undefined, (e: unknown) => e);
  expect(seen).toEqual([]);
  expect(err).toBeInstanceOf(DelQueueError);
  return err as DelQueueError;
}

describe('DEL queue drain', () => {
  it('refuses a queue dir that is a symlink: the target directory keeps every file', async () => {
    const run = tmp('pwt-delq-');
    const elsewhere = tmp('pwt-delq-target-');
    writeFileSync(join(elsewhere, 'package.json'), '{"name":"x"}');
    writeFileSync(join(elsewhere, 'config.json'), 'not a record');
    writeFileSync(join(elsewhere, '1-a.json'), JSON.stringify(rec('a')));
    symlinkSync(elsewhere, join(run, DEL_QUEUE_DIR));

    const err = await drainError(run);
    expect(err.code).toBe('ERR_DEL_QUEUE_SYMLINK');
    expect(err.path).toBe(join(run, DEL_QUEUE_DIR));
    expect(readdirSync(elsewhere).sort()).toEqual(['1-a.json', 'config.json', 'package.json']);
    expect(readFileSync(join(elsewhere, 'package.json'), 'utf8')).toBe('{"name":"x"}');
  });

  it('refuses a queue path that is a file, one writable by others, and one owned by another user', async () => {
    const run = tmp('pwt-delq-');
    const q = join(run, DEL_QUEUE_DIR);
    writeFileSync(q, 'x');
    expect((await drainError(run)).code).toBe('ERR_DEL_QUEUE_NOT_DIR');
    rmSync(q);

    mkdirSync(q);
    writeFileSync(join(q, '1-a.json'), JSON.stringify(rec('a')));
    chmodSync(q, 0o777);
    expect((await drainError(run)).code).toBe('ERR_DEL_QUEUE_UNSAFE');
    chmodSync(q, 0o700);
    chownSync(q, 65534, 65534);
    expect((await drainError(run)).code).toBe('ERR_DEL_QUEUE_UNSAFE');
    expect(readdirSync(q)).toEqual(['1-a.json']);
  });

  it('skips a directory and a symlink named *.json and still handles the records after them', async () => {
    const { run, q } = runWithQueue();
    const outside = tmp('pwt-delq-outside-');
    writeFileSync(join(outside, 'victim.json'), JSON.stringify(rec('victim')));
    mkdirSync(join(q, '1000-x.json'));
    writeFileSync(join(q, '1000-x.json', 'inner'), 'kept');
    symlinkSync(join(outside, 'victim.json'), join(q, '1001-y.json'));
    writeFileSync(join(q, '1002-a.json'), JSON.stringify(rec('a')));
    writeFileSync(join(q, '1003-b.json'), JSON.stringify(rec('b')));

    const seen: string[] = [];
    const r = await drainDelQueue(run, async (x) => { seen.push(x.containerId); });
    expect(seen).toEqual(['a', 'b']);  // the link's target is never read
    expect(r).toEqual({ records: 2, handled: 2, malformed: [], skipped: ['1000-x.json', '1001-y.json'], failed: [] });
    expect(readdirSync(q).sort()).toEqual(['1000-x.json', '1001-y.json']);
    expect(lstatSync(join(q, '1001-y.json')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(q, '1000-x.json', 'inner'), 'utf8')).toBe('kept');
    expect(existsSync(join(outside, 'victim.json'))).toBe(true);
  });

  it('a FIFO named *.json neither blocks the drain nor is removed', async () => {
    const { run, q } = runWithQueue();
    execFileSync('mkfifo', [join(q, '1-z.json')]);
    writeFileSync(join(q, '2-a.json'), JSON.stringify(rec('a')));
    const seen: string[] = [];
    // Opened at all, it is opened O_NONBLOCK: a blocking read would hang this thread (the test would time out).
    const r = await drainDelQueue(run, async (x) => { seen.push(x.containerId); });
    expect(lstatSync(join(q, '1-z.json')).isFIFO()).toBe(true);
    expect(seen).toEqual(['a']);
    expect(r.skipped).toEqual(['1-z.json']);
  });

  it('removes a malformed regular file, keeps a regular file of another owner, ignores hidden temp files', async () => {
    const { run, q } = runWithQueue();
    writeFileSync(join(q, '1-bad.json'), '{"containerId": 5}');
    writeFileSync(join(q, '2-big.json'), `{"containerId":"c","x":"${'a'.repeat(70 * 1024)}"}`);
    writeFileSync(join(q, '3-other.json'), JSON.stringify(rec('other')));
    chownSync(join(q, '3-other.json'), 65534, 65534);
    writeFileSync(join(q, '.4-a.json'), JSON.stringify(rec('hidden')));  // the shim's temp names start with '.'
    const seen: string[] = [];
    const r = await drainDelQueue(run, async (x) => { seen.push(x.containerId); });
    expect(seen).toEqual([]);
    expect(r).toEqual({ records: 0, handled: 0, malformed: ['1-bad.json', '2-big.json'], skipped: ['3-other.json'], failed: [] });
    expect(readdirSync(q).sort()).toEqual(['.4-a.json', '3-other.json']);
  });

  it('names records as the shim does', () => {
    expect(isDelRecordName('1-a.json')).toBe(true);
    expect(isDelRecordName('.json')).toBe(false);
    expect(isDelRecordName('.1-a.json')).toBe(false);
    expect(isDelRecordName('1-a.json.1.0.tmp')).toBe(false);
  });
});
