#!/usr/bin/env node
// `npm run prebuild`: the addon prebuild (prebuildify --napi --strip --tag-libc) and the static
// podwire-cni plugin into prebuilds/<platform>-<arch>/, what `npm pack` ships.
// The build runs in a staging copy of binding.gyp + native/ so the checkout's build/ (which
// tests and other work use) is never cleaned; the staging copy holds exactly the native sources
// the package carries, so a successful prebuild also proves the package's source-build fallback.
// `--if-stale` (the prepack hook) builds only when the prebuilds are missing or older than
// binding.gyp or a native source.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tuple = `${process.platform}-${process.arch}`;
const outDir = join(root, 'prebuilds', tuple);
// Native sources the package does not ship (and the source build does not need).
const NOT_SHIPPED = new Set(['tests', 'fuzz']);

class PrebuildError extends Error {
  constructor(message, options) {
    super(`prebuild: ${message}`, options);
    this.name = 'PrebuildError';
  }
}

function newest(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (dir === join(root, 'native') && NOT_SHIPPED.has(e.name)) continue;
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

function fresh() {
  if (!existsSync(outDir)) return false;
  const files = readdirSync(outDir);
  const addon = files.find((f) => f.endsWith('.node'));
  const wanted = [addon, ...(process.platform === 'linux' ? ['podwire-cni'] : [])];
  if (!addon || wanted.some((f) => !files.includes(f))) return false;
  const built = Math.min(...wanted.map((f) => statSync(join(outDir, f)).mtimeMs));
  return built >= Math.max(newest(join(root, 'native')), statSync(join(root, 'binding.gyp')).mtimeMs);
}

// node-gyp must use local headers (bootstrap.sh's rule): npm's nodedir, else <node prefix>.
function nodedirEnv() {
  if (process.env.npm_config_nodedir) return {};
  const prefix = dirname(dirname(process.execPath));
  if (existsSync(join(prefix, 'include/node/node_api.h'))) return { npm_config_nodedir: prefix };
  throw new PrebuildError(`no Node headers at ${prefix}/include/node and npm has no nodedir (run npm run bootstrap)`);
}

// prebuildify execs `node-gyp` from PATH: npm run puts its bundled one there; directly run, use
// the one npm names in npm_config_node_gyp, else fail with the fix.
function nodeGyp() {
  const onPath = spawnSync('sh', ['-c', 'command -v node-gyp'], { encoding: 'utf8' });
  if (onPath.status === 0) return [];
  if (process.env.npm_config_node_gyp) return ['--node-gyp', process.env.npm_config_node_gyp];
  throw new PrebuildError('node-gyp is not on PATH: run this as `npm run prebuild`');
}

function build() {
  const stage = mkdtempSync(join(process.env.TMPDIR ?? tmpdir(), 'podwire-prebuild-'));
  try {
    copyFileSync(join(root, 'package.json'), join(stage, 'package.json'));
    copyFileSync(join(root, 'binding.gyp'), join(stage, 'binding.gyp'));
    cpSync(join(root, 'native'), join(stage, 'native'), {
      recursive: true,
      filter: (src) => !NOT_SHIPPED.has(src.slice(join(root, 'native').length + 1).split('/')[0]),
    });
    // binding.gyp resolves node-addon-api with `node -p require(...)` from the staging dir.
    symlinkSync(join(root, 'node_modules'), join(stage, 'node_modules'), 'dir');
    const r = spawnSync(process.execPath, [
      join(root, 'node_modules/prebuildify/bin.js'), '--napi', '--strip', '--tag-libc',
      '--cwd', stage, '--out', stage, '--cache', join(stage, '.cache'), ...nodeGyp(),
    ], { stdio: ['ignore', 2, 2], env: { ...process.env, ...nodedirEnv() } });  // stdout belongs to npm pack --json (prepack)
    if (r.error) throw new PrebuildError(`cannot run prebuildify: ${r.error.message}`, { cause: r.error });
    if (r.status !== 0) throw new PrebuildError(`prebuildify exited with ${r.status ?? r.signal}`);
    const built = join(stage, 'prebuilds', tuple);
    if (process.platform === 'linux') {
      // Same directory as the addon: lib/install's default CNI_PLUGIN_BINARY looks there.
      const cni = join(built, 'podwire-cni');
      copyFileSync(join(stage, 'build/Release/podwire-cni'), cni);
      const s = spawnSync('strip', ['--strip-all', cni], { stdio: ['ignore', 2, 2] });
      if (s.status !== 0) throw new PrebuildError(`strip podwire-cni failed (${s.error?.message ?? s.status})`);
      chmodSync(cni, 0o755);
    }
    rmSync(outDir, { recursive: true, force: true });
    mkdirSync(dirname(outDir), { recursive: true });
    cpSync(built, outDir, { recursive: true });
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

try {
  if (process.argv.includes('--if-stale') && fresh()) {
    console.error(`prebuild: prebuilds/${tuple} is up to date`);
  } else {
    build();
    console.error(`prebuild: ${readdirSync(outDir).map((f) => `prebuilds/${tuple}/${f}`).join(', ')}`);
  }
} catch (err) {
  console.error(err instanceof PrebuildError ? err.message : err);
  process.exit(1);
}
