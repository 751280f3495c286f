// Sweeps pwt- namespaces left by crashed runs, before and after the suite.
// Names carry the creating process's pid (pwt-<pid>-<n>, pwt-bench-<pid>...):
// a namespace whose process is still alive belongs to a concurrent run or
// benchmark and is left alone. Only names with the test prefix are touched.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { sweepContainerdLeftovers } from './containerd.js';
import { processAlive } from '../../lib/demo/leftovers.js';
import { sweepNodeLeftovers } from '../../scripts/kube/node.mjs';
import { tmpdir } from 'node:os';


/** The netns of the cluster `npm run cluster:up` leaves running (scripts/kube/cluster-up.mjs). */
const CLUSTER_UP_PREFIX = 'pwt-up-';

function sweep(): void {
  let names: string[] = [];
  try {
    names = readdirSync('/run/netns').filter((n) => n.startsWith('pwt-'));
  } catch {
    return;
  }
  for (const name of names) {
    if (name.startsWith(CLUSTER_UP_PREFIX)) continue; // `npm run cluster:up`'s: cluster:down removes them
    const pid = /^pwt-(?:[a-z]+-)*(\d+)/.exec(name)?.[1];
    if (pid !== undefined && processAlive(Number(pid))) continue;
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
  sweepNodeLeftovers(tmpdir()); // cgroups and dirs of killed real-node runs (test/e2e)
}

export function teardown(): void {
  sweep();
  sweepContainerdLeftovers();
  sweepNodeLeftovers(tmpdir());
}
