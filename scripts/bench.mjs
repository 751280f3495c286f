#!/usr/bin/env node
// `npm run bench -- NAME [args]`: compiles bench/ and runs bench/NAME.ts.
// Without NAME, lists the benchmarks.
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const names = readdirSync(join(root, 'bench')).filter((f) => f.endsWith('.ts')).map((f) => f.slice(0, -3)).sort();
const [name, ...rest] = process.argv.slice(2);
if (!name || !names.includes(name)) {
  console.log(`usage: npm run bench -- <${names.join('|')}> [args]`);
  process.exit(name ? 2 : 0);
}
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.bench.json')], { stdio: 'inherit' });
const r = spawnSync(process.execPath, ['--expose-gc', join(root, 'dist-bench/bench', `${name}.js`), ...rest], { stdio: 'inherit' });
process.exit(r.status ?? 1);
