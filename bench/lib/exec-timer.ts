// A tiny C timer for exec'ing a program N times (posix_spawn + waitpid, CLOCK_MONOTONIC
// around each), so the figure is the program's cost plus the kernel's fork/exec, without
// Node's child_process overhead. Built with `cc` into a temp dir on first use.
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const SOURCE = String.raw`#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
extern char **environ;
/* exec-timer N STDIN_FILE PROG [ARGS...]: environment passed through; prints one line of µs per run. */
int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: exec-timer N STDIN_FILE PROG [ARGS...]\n"); return 2; }
  int n = atoi(argv[1]);
  for (int i = 0; i < n; i++) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, argv[2], O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[3], &fa, NULL, argv + 3, environ);
    if (rc != 0) { fprintf(stderr, "posix_spawn %s: %s\n", argv[3], strerror(rc)); return 1; }
    int st = 0;
    waitpid(pid, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    posix_spawn_file_actions_destroy(&fa);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) { fprintf(stderr, "run %d: %s exited with status %d\n", i, argv[3], st); return 1; }
    printf("%.3f\n", (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3);
  }
  return 0;
}
`;

export class ExecTimer {
  private constructor(private readonly dir: string, readonly path: string) {}

  static build(): ExecTimer {
    const dir = mkdtempSync(join(tmpdir(), 'pwt-exec-timer-'));
    writeFileSync(join(dir, 'exec-timer.c'), SOURCE);
    const path = join(dir, 'exec-timer');
    execFileSync('cc', ['-O2', '-o', path, join(dir, 'exec-timer.c')], { stdio: 'inherit' });
    return new ExecTimer(dir, path);
  }

  /**
   * Runs `argv` n times with `stdin` as its standard input and `env` as its environment; µs per run.
   * Asynchronous, so an agent in this process can answer the plugin meanwhile.
   */
  async run(n: number, argv: string[], stdin: string, env: Record<string, string>): Promise<number[]> {
    const input = join(this.dir, `stdin-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(input, stdin);
    try {
      const { stdout: out } = await promisify(execFile)(this.path, [String(n), input, ...argv], { env, encoding: 'utf8', maxBuffer: 16 << 20 });
      return out.trim().split('\n').map(Number);
    } finally {
      rmSync(input, { force: true });
    }
  }

  dispose(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
