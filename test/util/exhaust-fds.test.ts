// The EMFILE tests' helper (test/helpers/fds.ts) must undo itself whatever the fd table looks
// like: restoring the limit spawns prlimit, which needs free fds of its own.
import { closeSync, openSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { exhaustFds } from '../helpers/fds.js';
import { privileged } from '../helpers/privileged.js';

describe.skipIf(!privileged('prlimit'))('exhaustFds', () => {
  it('makes the next open fail with EMFILE, and its undo restores the limit when the table below the highest fd is full', () => {
    // Pack the table: every slot below the highest fd in use is taken, as in a fresh process.
    const highest = Math.max(...readdirSync('/proc/self/fd').map(Number));
    const packing: number[] = [];
    for (;;) {
      const fd = openSync('/dev/null', 'r');
      if (fd > highest) {
        closeSync(fd);
        break;
      }
      packing.push(fd);
    }
    try {
      const undo = exhaustFds();
      let code: string | undefined;
      try {
        closeSync(openSync('/dev/null', 'r'));
      } catch (err) {
        code = (err as { code?: string }).code;
      }
      undo();
      expect(code).toBe('EMFILE');
      closeSync(openSync('/dev/null', 'r'));
    } finally {
      packing.forEach((fd) => closeSync(fd));
    }
  });
});
