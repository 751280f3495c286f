#!/usr/bin/env node
// `npm run cluster:down`: removes what `npm run cluster:up` started — every node's processes,
// cgroups and netns, the control plane, the ztunnel-sims, the fabric netns and the state dir.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from './build.mjs';
import { removeCluster } from './cluster.mjs';

const dir = join(cacheDir(), 'cluster');
const file = join(dir, 'cluster.json');
try {
  if (!existsSync(file)) {
    // A start that failed half-way removed what it made; only its dir may be left.
    rmSync(dir, { recursive: true, force: true });
    console.log('cluster:down: nothing is up');
    process.exit(0);
  }
  await removeCluster(JSON.parse(readFileSync(file, 'utf8')));
  console.log('cluster:down: removed');
} catch (err) {
  console.error(`cluster:down: ${err.message}`);
  process.exit(1);
}
