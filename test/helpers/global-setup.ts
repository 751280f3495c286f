// Sweeps pwt- namespaces left by an earlier crashed run (before) and by this
// run (after). Only names with the test prefix are ever touched.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';

function sweep(): void {
  let names: string[] = [];
  try {
    names = readdirSync('/run/netns').filter((n) => n.startsWith('pwt-'));
  } catch {
    return;
  }
  for (const name of names) {
    try {
      execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
    } catch {
      // already gone
    }
  }
}

export function setup(): void {
  sweep();
}

export function teardown(): void {
  sweep();
}
