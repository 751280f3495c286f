#!/usr/bin/env node
// `npm test`: builds what is stale (TypeScript, the addon), runs vitest and
// the native tests under ctest, and ends with one plain line
// `N passed, N failed` counted from the runners' own reports.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);

function newest(dir, exts) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p, exts));
    else if (exts.some((x) => e.name.endsWith(x))) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: opts.capture ? ['inherit', 'pipe', 'inherit'] : 'inherit', encoding: 'utf8' });
  if (opts.capture) process.stdout.write(r.stdout ?? '');
  return r;
}

// 1. The addon, when a native source or binding.gyp is newer than the build.
const addon = join(root, 'build/Release/podwire.node');
const nativeTime = Math.max(newest(join(root, 'native'), ['.cc', '.h']), statSync(join(root, 'binding.gyp')).mtimeMs);
if (!existsSync(addon) || statSync(addon).mtimeMs < nativeTime) {
  console.log('> building the native addon');
  if (run('npm', ['run', 'build:native', '--silent']).status !== 0) process.exit(1);
}
// 2. TypeScript (incremental; tests of worker threads load dist/).
console.log('> building TypeScript');
if (run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json']).status !== 0) process.exit(1);

// 3. vitest (its JSON report gives the counts).
const resultsFile = join(root, '.vitest-results.json');
if (existsSync(resultsFile)) writeFileSync(resultsFile, '{}');
const vitest = run(process.execPath, [join(root, 'node_modules/vitest/vitest.mjs'), 'run', ...process.argv.slice(2)]);
let passed = 0;
let failed = 0;
try {
  const rep = JSON.parse(readFileSync(resultsFile, 'utf8'));
  passed += rep.numPassedTests ?? 0;
  failed += (rep.numFailedTests ?? 0) + (rep.numTotalTestSuites === undefined ? 1 : 0);
  // A file that failed to load (e.g. a missing prerequisite in CI) has no tests: count it.
  for (const f of rep.testResults ?? []) if (f.status === 'failed' && (f.assertionResults ?? []).length === 0) failed++;
} catch {
  failed++;
}
if (vitest.status !== 0 && failed === 0) failed++;

// 4. ctest (each native test binary prints `N passed, N failed`).
const ctest = run('bash', [join(root, 'scripts/ctest.sh')], { capture: true });
const counts = [...(ctest.stdout ?? '').matchAll(/^\d+: (\d+) passed, (\d+) failed$/gm)];
for (const m of counts) {
  passed += Number(m[1]);
  failed += Number(m[2]);
}
if (ctest.status !== 0 && !counts.some((m) => Number(m[2]) > 0)) failed++;

// 5. The nf_tables encoder/decoder fuzz target, for a bounded time (clang + libFuzzer + ASan).
const fuzzSeconds = process.env.PODWIRE_FUZZ_SECONDS ?? '20';
if (fuzzSeconds !== '0') {
  const hasClang = spawnSync('sh', ['-c', 'command -v clang++'], { stdio: 'ignore' }).status === 0;
  if (!hasClang) {
    console.log('> fuzz: clang++ not found' + (process.env.CI === 'true' ? ' (CI: counted as a failure)' : ' (skipped)'));
    if (process.env.CI === 'true') failed++;
  } else {
    console.log(`> fuzzing the nft encoder/decoder for ${fuzzSeconds}s`);
    const fuzz = run('bash', [join(root, 'scripts/fuzz.sh'), fuzzSeconds]);
    if (fuzz.status === 0) passed++;
    else failed++;
  }
}

const line = `${passed} passed, ${failed} failed`;
writeFileSync(join(root, '.test-summary'), `${line}\n`);
console.log(line);
process.exit(failed === 0 ? 0 : 1);
