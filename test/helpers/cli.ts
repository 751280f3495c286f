// Runs `podwire ARGV` in-process and captures what it writes; spawnCli runs it
// as a child process.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { vi } from 'vitest';
import { main } from '../../lib/cli/main.js';

export async function runCli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => ((out += String(c)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => ((err += String(c)), true));
  try {
    return { code: await main(argv), out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

export interface SpawnedCli {
  child: ChildProcess;
  /** Resolves when the child exits: its code (null when killed), signal and output. */
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }>;
}

/**
 * Runs `podwire ARGV` in a child process straight from the sources
 * (test/cli/ts-loader.mjs), for what in-process runs cannot show: stdin from a
 * pipe, kill -9, a process that would hang or grow without bound. `timeoutMs`
 * kills it (SIGKILL; code null). `dataLimitBytes` caps its heap/data segment
 * (RLIMIT_DATA, through sh's ulimit -d) so a runaway read dies quickly instead
 * of eating the machine's memory.
 */
export function spawnCli(argv: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; dataLimitBytes?: number; stdin?: 'pipe' | 'ignore' } = {}): SpawnedCli {
  const loader = fileURLToPath(new URL('../cli/ts-loader.mjs', import.meta.url));
  const node = [process.execPath, loader, ...argv];
  const cmd = opts.dataLimitBytes === undefined ? node
    : ['sh', '-c', `ulimit -d ${Math.ceil(opts.dataLimitBytes / 1024)} && exec "$@"`, 'sh', ...node];
  const child = spawn(cmd[0]!, cmd.slice(1), {
    env: { ...process.env, ...opts.env }, stdio: [opts.stdin ?? 'ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => { out += d; });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => { err += d; });
  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({ code, signal, out, err });
    });
  });
  return { child, done };
}

/**
 * `podwire agent` as a child process with `env` (KUBECONFIG included); `cleanup` receives
 * what kills it (SIGKILL unless it already exited) and waits for it, to run with the test's other cleanups.
 */
export function spawnAgent(env: Record<string, string>, cleanup: (fn: () => Promise<unknown>) => void): SpawnedCli {
  const a = spawnCli(['agent'], { env, timeoutMs: 120_000 });
  cleanup(async () => {
    if (a.child.exitCode === null && a.child.signalCode === null) a.child.kill('SIGKILL');
    await a.done;
  });
  return a;
}
