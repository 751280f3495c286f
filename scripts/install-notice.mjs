#!/usr/bin/env node
// Run by the package's install script (`node-gyp-build "node scripts/install-notice.mjs"`) only
// when no shipped prebuild loads here (or --build-from-source): says why a compile follows and
// what it needs, and stops at once, naming what is missing, instead of node-gyp failing deep in
// its own output.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const here = `${process.platform}-${process.arch}`;
let shipped = [];
try {
  shipped = readdirSync(join(root, 'prebuilds'));
} catch {
  // a git checkout: no prebuilds
}

const fromSource = process.env.npm_config_build_from_source === 'true';
const why = fromSource ? '--build-from-source was asked for'
  : shipped.includes(here) ? `the prebuild in prebuilds/${here} does not load on this system (another libc or Node ABI?)`
  : `no prebuild for ${here}${shipped.length ? ` (this package has: ${shipped.join(', ')})` : ''}`;
const linux = process.platform === 'linux';
console.error(`podwire: ${why}; building the native addon${linux ? ' and podwire-cni' : ' (a stub: podwire runs on Linux only)'} from source with node-gyp.`);

if (linux) {
  const has = (cmd) => spawnSync('sh', ['-c', 'command -v "$1"', 'sh', cmd], { stdio: 'ignore' }).status === 0;
  const python = process.env.npm_config_python || process.env.PYTHON || 'python3';
  const cxx = process.env.CXX || 'g++';
  const missing = [python, 'make', cxx].filter((c) => !has(c));
  if (missing.length) {
    console.error(`podwire: cannot build from source, missing: ${missing.join(', ')} (needs python3, make and a C++20 compiler; Debian: apt-get install python3 make g++)`);
    process.exit(1);
  }
  const nodedir = process.env.npm_config_nodedir;
  const prefix = dirname(dirname(process.execPath));
  if (!nodedir && existsSync(join(prefix, 'include/node/node_api.h'))) {
    console.error(`podwire: node-gyp may try to download the Node headers; offline, point it at the local ones: npm config set nodedir ${prefix}`);
  }
}
