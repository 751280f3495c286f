#!/usr/bin/env node
// Coverage-less mutation fuzzing of the TypeScript decoders that read bytes
// from outside: the ipset list/type reply decoder (what the kernel sends) and
// the ZDS codec (what ztunnel sends). The harness is test/fuzz/ (compiled here
// with tsc into <fuzz dir>/js); the codecs come from the built dist/ (npm test
// runs tsc first). One worker per target, one after the other:
//   node scripts/fuzz-js.mjs [SECONDS=10] [TARGET...]   (ipset-decode, zds-decode)
//   node scripts/fuzz-js.mjs --replay TARGET FILE...     (re-run saved inputs)
// Env: PODWIRE_FUZZ_DIR (default build-native/fuzz; findings in <dir>/artifacts-js/),
// PODWIRE_FUZZ_SEED (default: time-based, printed), PODWIRE_FUZZ_HANG_MS (default 5000).
// Prints `fuzz-result js:<target> ok|failed <detail>` per target (scripts/test.mjs counts them).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

// The built codec modules, relative to the repo root: the first path that exists is used.
// (lib/net is being reorganised: lib/net/ipset-codec.ts -> lib/net/ipset/codec.ts.)
const MODULES = {
  nlCodec: ['dist/net/nl/codec.js'],
  ipsetCodec: ['dist/net/ipset/codec.js', 'dist/net/ipset-codec.js'],
  zdsCodec: ['dist/zds/codec.js'],
  zdsErrors: ['dist/zds/errors.js'],
};
const FIXTURES = 'test/fixtures/ipset';

const out = resolve(root, process.env.PODWIRE_FUZZ_DIR ?? 'build-native/fuzz');
const artifactsDir = join(out, 'artifacts-js');
const jsDir = join(out, 'js');
const hangMs = Number(process.env.PODWIRE_FUZZ_HANG_MS ?? 5000);
const ALL = ['ipset-decode', 'zds-decode'];

let args = process.argv.slice(2);
let replay;
if (args[0] === '--replay') {
  replay = { target: args[1], files: args.slice(2).map((f) => resolve(f)) };
  args = [];
}
const seconds = args.length && /^\d+(\.\d+)?$/.test(args[0]) ? Number(args.shift()) : Number(process.env.PODWIRE_FUZZ_JS_SECONDS ?? 10);
const targets = replay ? [replay.target] : args.length ? args : ALL;

function fail(msg) {
  console.error(`fuzz-js: ${msg}`);
  for (const t of targets) console.log(`fuzz-result js:${t} failed (${msg})`);
  process.exit(1);
}

const modulePaths = {};
for (const [k, candidates] of Object.entries(MODULES)) {
  const p = candidates.map((c) => join(root, c)).find((c) => existsSync(c));
  if (!p) fail(`none of ${candidates.join(', ')} exists (run tsc first; update MODULES in scripts/fuzz-js.mjs if lib moved)`);
  modulePaths[k] = p;
}

// Compile the harness.
mkdirSync(jsDir, { recursive: true });
const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'test/fuzz/tsconfig.json'), '--outDir', jsDir], { stdio: 'inherit' });
if (tsc.status !== 0) fail('tsc failed on test/fuzz/');

const baseSeed = Number(process.env.PODWIRE_FUZZ_SEED ?? (Date.now() % 0x7fffffff));
let failedAny = false;
for (const [i, target] of targets.entries()) {
  const seed = (baseSeed + i * 7919) >>> 0;
  const shared = new SharedArrayBuffer(8 + 64 * 1024);
  const ctl = new Int32Array(shared, 0, 2);
  const worker = new Worker(join(jsDir, 'worker.js'), {
    workerData: {
      target, modulePaths, fixturesDir: join(root, FIXTURES), seconds, seed, artifactsDir,
      slowMs: Math.min(1000, hangMs), maxFindings: 5, shared, replay: replay?.files,
    },
    resourceLimits: { maxOldGenerationSizeMb: 1024 },
  });
  const result = await new Promise((resolveResult) => {
    let last = -1;
    let since = Date.now();
    const deadline = Date.now() + seconds * 1000 + 60_000;
    const timer = setInterval(async () => {
      const n = Atomics.load(ctl, 0);
      if (n !== last) {
        last = n;
        since = Date.now();
      }
      if (Date.now() - since > hangMs || Date.now() > deadline) {
        clearInterval(timer);
        const len = Atomics.load(ctl, 1);
        const data = Buffer.from(new Uint8Array(shared, 8, len));
        const { saveArtifact } = await import(pathToFileURL(join(jsDir, 'artifacts.js')).href);
        const file = saveArtifact(artifactsDir, target, 'hang', data, `hang: no progress for ${hangMs} ms on input #${n}\ninput (${len} bytes): ${data.toString('hex')}\n`);
        await worker.terminate();
        resolveResult({ hang: { file, hex: data.toString('hex') }, execs: n });
      }
    }, 100);
    worker.on('message', (m) => {
      clearInterval(timer);
      resolveResult(m);
    });
    worker.on('error', (e) => {
      clearInterval(timer);
      resolveResult({ fatal: e?.stack ?? String(e) });
    });
  });
  worker.terminate();
  if (result.fatal) {
    console.error(result.fatal);
    console.log(`fuzz-result js:${target} failed (the worker died: ${String(result.fatal).split('\n')[0]})`);
    failedAny = true;
  } else if (result.hang) {
    console.log(`fuzz-result js:${target} failed (hang after ${result.execs} inputs; input saved as ${result.hang.file}; other findings of this run, if any, are beside it)`);
    failedAny = true;
  } else if (result.findings.length) {
    for (const f of result.findings) {
      console.log(`  ${target}: ${f.kind}: ${f.message}\n    input: ${f.hex.slice(0, 200)}${f.hex.length > 200 ? '…' : ''}\n    saved: ${f.file}`);
      if (f.stack) console.log(f.stack.split('\n').slice(0, 6).map((l) => `    ${l}`).join('\n'));
    }
    console.log(`fuzz-result js:${target} failed (${result.findings.length} finding(s) in ${result.execs} execs, seed ${seed}; inputs in ${artifactsDir})`);
    failedAny = true;
  } else {
    console.log(`fuzz-result js:${target} ok (${result.execs} execs in ${replay ? 'replay' : `${seconds}s`}, ${result.signatures} outcome signatures, corpus ${result.corpus}, slowest input ${result.slowestMs.toFixed(1)} ms, seed ${seed})`);
  }
}
process.exit(failedAny ? 1 : 0);
