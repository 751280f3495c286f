// Every input a command reads is capped (lib/cli/read-input.ts): /dev/zero
// and an endless pipe end with exit 2 after MAX_INPUT_BYTES, read
// incrementally, never buffered whole. The CLI runs as a child with its data
// segment capped at 1 GiB, so a regression dies of ENOMEM within a second
// instead of taking the machine's memory (it does not exit 2 either way).
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { InputTooLargeError, MAX_INPUT_BYTES, readInput } from '../../lib/cli/read-input.js';
import { spawnCli } from '../helpers/cli.js';

const NONE = `pwt-${process.pid}-input-none`;  // never created: nothing is applied anywhere
const GiB = 1024 ** 3;
const CHUNK = Buffer.alloc(64 * 1024, 'a');

/** Writes CHUNKs to the child's stdin until `max` bytes or the child stops reading; returns the bytes accepted. */
async function feed(stdin: NodeJS.WritableStream, max: number): Promise<number> {
  let written = 0;
  let broken = false;
  stdin.on('error', () => { broken = true; });  // EPIPE once the child has let go
  while (!broken && written < max) {
    const ok = stdin.write(CHUNK);
    written += CHUNK.length;
    if (!ok) {
      await new Promise<void>((resolve) => {
        const done = () => {
          stdin.off('drain', done);
          stdin.off('close', done);
          resolve();
        };
        stdin.on('drain', done);
        stdin.on('close', done);  // follows an EPIPE error
      });
    }
  }
  stdin.end();
  return written;
}

describe('readInput', () => {
  it('stops pulling from an endless stream at the cap and throws InputTooLargeError', async () => {
    let pulled = 0;
    const endless = Readable.from((function* () {
      for (;;) {
        pulled += CHUNK.length;
        yield CHUNK;
      }
    })());
    const err = await readInput('-', { what: 'test input', stdin: endless }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputTooLargeError);
    expect(err).toMatchObject({ code: 'ERR_INPUT_TOO_LARGE' });
    expect(pulled).toBeGreaterThan(MAX_INPUT_BYTES);
    expect(pulled).toBeLessThan(MAX_INPUT_BYTES + 32 * CHUNK.length);  // a few chunks of read-ahead, not more
  });

  it('reads /dev/zero up to a small cap, and whole inputs at the cap', async () => {
    await expect(readInput('/dev/zero', { what: 'x', limit: 1000 })).rejects.toBeInstanceOf(InputTooLargeError);
    const exact = Readable.from([Buffer.from('é'.repeat(500))]);  // 1000 bytes
    expect(await readInput('-', { what: 'x', limit: 1000, stdin: exact })).toBe('é'.repeat(500));
    await expect(readInput('/nonexistent/pwt-file', { what: 'x' })).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('commands stop reading at the cap and exit 2', () => {
  it.each([
    [['nft', 'apply', '--netns', NONE, '/dev/zero']],
    [['ipset', 'add', 'pwtset', '--file', '/dev/zero', '--netns', NONE]],
    [['ipset', 'del', 'pwtset', '--file', '/dev/zero', '--netns', NONE]],
  ])('podwire %j', async (argv) => {
    const r = await spawnCli(argv, { timeoutMs: 30_000, dataLimitBytes: GiB }).done;
    expect(r.code, r.err.slice(0, 500)).toBe(2);
    expect(r.err).toContain('16 MiB');
    expect(r.err).not.toContain('Usage:');  // an input error, not a usage mistake: no usage text
  }, 40_000);

  it.each([
    [['nft', 'apply', '--netns', NONE, '-']],
    [['ipset', 'add', 'pwtset', '--file', '-', '--netns', NONE]],
  ])('podwire %j with an endless generator on stdin', async (argv) => {
    const p = spawnCli(argv, { timeoutMs: 30_000, dataLimitBytes: GiB, stdin: 'pipe' });
    const max = 4 * MAX_INPUT_BYTES;
    const [written, r] = await Promise.all([feed(p.child.stdin!, max), p.done]);
    expect(r.code, r.err.slice(0, 500)).toBe(2);
    expect(r.err).toContain('16 MiB');
    expect(r.err).not.toContain('Usage:');  // an input error, not a usage mistake: no usage text
    // It let go of stdin right after the cap: the generator was cut off long before it ran out.
    expect(written).toBeLessThan(MAX_INPUT_BYTES + 8 * 1024 * 1024);
  }, 40_000);

  it('reads an input under the cap whole (then fails on the missing netns, exit 1)', async () => {
    const p = spawnCli(['nft', 'apply', '--netns', NONE, '-'], { timeoutMs: 30_000, stdin: 'pipe' });
    p.child.stdin!.end('add table inet pwt\n');
    const r = await p.done;
    expect(r.code, r.err).toBe(1);
    expect(r.err).toContain('ENOENT');
  }, 40_000);
});
