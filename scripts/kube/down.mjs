#!/usr/bin/env node
// `npm run kube:down`: stops what `npm run kube:up` started and removes its dir.
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from './build.mjs';

const dir = join(cacheDir(), 'run');
const file = join(dir, 'state.json');
if (!existsSync(file)) {
  console.log('kube:down: nothing is up');
  process.exit(0);
}
const { pids } = JSON.parse(readFileSync(file, 'utf8'));
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
for (const pid of [pids.apiserver, pids.etcd].filter(Boolean)) {
  if (!alive(pid)) continue;
  process.kill(pid, 'SIGTERM');
  const end = Date.now() + 5000;
  while (alive(pid) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  if (alive(pid)) process.kill(pid, 'SIGKILL');
}
rmSync(dir, { recursive: true, force: true });
console.log('kube:down: stopped');
