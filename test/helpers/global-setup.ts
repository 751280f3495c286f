// Sweeps pwt- namespaces left by crashed runs, before and after the suite.
// Names carry the creating process's pid (pwt-<pid>-<n>, pwt-bench-<pid>...):
// a namespace whose process is still alive belongs to a concurrent run or
// benchmark and is left alone. Only names with the test prefix are touched.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { sweepContainerdLeftovers } from './containerd.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: string }).code === 'EPERM';
  }
}

function sweep(): void {
  let names: string[] = [];
  try {
    names = readdirSync('/run/netns').filter((n) => n.startsWith('pwt-'));
  } catch {
    return;
  }
  for (const name of names) {
    const pid = /^pwt-(?:[a-z]+-)*(\d+)/.exec(name)?.[1];
    if (pid !== undefined && alive(Number(pid))) continue;
    try {
      execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
}

export function setup(): void {
  sweep();
  sweepContainerdLeftovers(); // temp dirs and cgroups of killed CRI test runs
}

export function teardown(): void {
  sweep();
  sweepContainerdLeftovers();
}
