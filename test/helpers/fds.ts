// Running this test process out of file descriptors, deterministically and touching nothing else
// (vitest runs each test file in a forked process of its own).
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

/**
 * Lowers this process's soft RLIMIT_NOFILE just above the highest fd in use and fills every
 * free slot below it, so the next open fails with EMFILE. Returns the undo.
 */
export function exhaustFds(): () => void {
  const highest = Math.max(...readdirSync('/proc/self/fd').map(Number));
  const line = readFileSync('/proc/self/limits', 'utf8').split('\n').find((l) => l.startsWith('Max open files'))!;
  const [soft, hard] = line.trim().split(/\s+/).slice(3, 5);
  // No pipes, and a wide margin: restoring the limit spawns prlimit again, and spawnSync itself
  // needs about a dozen fds (its own loop, signal pipe, exec-error pipe); closing the fillers
  // must free at least that many, however few slots the fd table had below `highest`.
  const setSoft = (n: string) =>
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${n}:${hard}`], { stdio: 'ignore' });
  setSoft(String(highest + 64));
  const fillers: number[] = [];
  try {
    for (;;) fillers.push(openSync('/dev/null', 'r'));
  } catch (err) {
    if ((err as { code?: string }).code !== 'EMFILE') {
      fillers.forEach((f) => closeSync(f));
      setSoft(soft!);
      throw err;
    }
  }
  return () => {
    fillers.forEach((f) => closeSync(f));
    setSoft(soft!);
  };
}
