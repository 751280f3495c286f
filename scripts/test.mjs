#!/usr/bin/env node
// `npm test`: builds what is stale (TypeScript, the addon), runs vitest and
// the native tests under ctest, and ends with one plain line
// `N passed, N failed` counted from the runners' own reports.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newest } from './lib/newest.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);


// Mount points (from /proc/self/mountinfo) whose path contains `pwt-`: what the
// tests make (netns files, ctest's run dirs). A phase that adds one and leaves it is a leak.
function pwtMounts() {
  try {
    return new Set(readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
      .map((l) => l.split(' ')[4]?.replace(/\\040/g, ' '))
      .filter((m) => m && m.includes('pwt-')));
  } catch {
    return new Set();
  }
}
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}
// Counts a failure (and prints the mount points) when `phase` left pwt- mounts behind.
// Names carrying the pid of a live process other than ours (pwt-<pid>-<n>) belong to a
// concurrent run on the same machine and are not ours to report.
function checkMounts(phase, before) {
  const leaked = [...pwtMounts()].filter((m) => !before.has(m)).filter((m) => {
    const pid = Number(/pwt-(?:[a-z]+-)*(\d+)(?:-|$)/.exec(m)?.[1]);
    return !(pid && pid !== process.pid && alive(pid));
  });
  if (leaked.length) {
    console.log(`> ${phase} left ${leaked.length} mount(s) behind:\n${leaked.map((m) => `    ${m}`).join('\n')}`);
    return 1;
  }
  return 0;
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: opts.capture ? ['inherit', 'pipe', 'inherit'] : 'inherit', encoding: 'utf8' });
  if (opts.capture) process.stdout.write(r.stdout ?? '');
  return r;
}

// 1. The addon and podwire-cni (Linux), when a native source or binding.gyp is newer than the build.
const built = [join(root, 'build/Release/podwire.node')];
if (process.platform === 'linux') built.push(join(root, 'build/Release/podwire-cni'));
const nativeTime = Math.max(newest(join(root, 'native'), ['.cc', '.h']), statSync(join(root, 'binding.gyp')).mtimeMs);
if (built.some((f) => !existsSync(f) || statSync(f).mtimeMs < nativeTime)) {
  console.log('> building the native addon');
  if (run('npm', ['run', 'build:native', '--silent']).status !== 0) process.exit(1);
}
// 2. TypeScript (incremental; tests of worker threads load dist/).
console.log('> building TypeScript');
if (run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json']).status !== 0) process.exit(1);

// 3. The test control plane's binaries (kube-apiserver, etcd), the real node's (kubelet,
// kube-controller-manager, kube-scheduler, kubectl: test/e2e) and helm for the chart tests,
// built from their Go modules on a machine's first run and cached (scripts/kube/build.mjs);
// vitest's global setup starts the control plane, test/e2e its own cluster. A failed build is
// a failure, never a skip.
console.log('> kube-apiserver, etcd, kubelet, controller-manager, scheduler, kubectl and helm for the tests (cached after the first build)');
if (run(process.execPath, [join(root, 'scripts/kube/build.mjs')], { capture: true }).status !== 0) {
  console.log('> kube: building the control plane failed');
  process.env.PODWIRE_KUBE_BUILD_FAILED = '1';
}

// 4. vitest (its JSON report gives the counts).
const resultsFile = join(root, '.vitest-results.json');
if (existsSync(resultsFile)) writeFileSync(resultsFile, '{}');
let mountsBefore = pwtMounts();
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
failed += checkMounts('vitest', mountsBefore);

// 5. ctest (each native test binary prints `N passed, N failed`).
mountsBefore = pwtMounts();
const ctest = run('bash', [join(root, 'scripts/ctest.sh')], { capture: true });
const counts = [...(ctest.stdout ?? '').matchAll(/^\d+: (\d+) passed, (\d+) failed$/gm)];
for (const m of counts) {
  passed += Number(m[1]);
  failed += Number(m[2]);
}
if (ctest.status !== 0 && !counts.some((m) => Number(m[2]) > 0)) failed++;

failed += checkMounts('ctest', mountsBefore);

// 6. Fuzzing, for a bounded time; every target counts as one test. Native libFuzzer targets
// (scripts/fuzz.sh: nft codec, netlink framing, podwire-cni's response parser and config JSON
// reader; clang + compiler-rt, ASan/UBSan), side by side,
// PODWIRE_FUZZ_SECONDS each (default 15); then the JS decoder fuzzers (scripts/fuzz-js.mjs:
// ipset, ZDS), PODWIRE_FUZZ_JS_SECONDS each (default: PODWIRE_FUZZ_SECONDS, else 10).
// PODWIRE_FUZZ_SECONDS=0 skips all. A missing toolchain is a skip, a failure with CI=true.
const fuzzSeconds = process.env.PODWIRE_FUZZ_SECONDS ?? '15';
const fuzzJsSeconds = process.env.PODWIRE_FUZZ_JS_SECONDS ?? process.env.PODWIRE_FUZZ_SECONDS ?? '10';
function countFuzz(r, expected) {
  const results = [...(r.stdout ?? '').matchAll(/^fuzz-result (\S+) (ok|failed|skipped)\b/gm)];
  for (const m of results) {
    if (m[2] === 'ok') passed++;
    else if (m[2] === 'failed' || process.env.CI === 'true') failed++;
  }
  if (results.length < expected || (r.status !== 0 && !results.some((m) => m[2] !== 'ok'))) failed++;
}
if (fuzzSeconds !== '0') {
  console.log(`> fuzzing the native targets for ${fuzzSeconds}s each${process.env.CI === 'true' ? ' (CI: a missing clang/libFuzzer fails)' : ''}`);
  countFuzz(run('bash', [join(root, 'scripts/fuzz.sh'), fuzzSeconds], { capture: true }), 4);
  console.log(`> fuzzing the JS decoders for ${fuzzJsSeconds}s each`);
  countFuzz(run(process.execPath, [join(root, 'scripts/fuzz-js.mjs'), fuzzJsSeconds], { capture: true }), 2);
}

const line = `${passed} passed, ${failed} failed`;
writeFileSync(join(root, '.test-summary'), `${line}\n`);
console.log(line);
process.exit(failed === 0 ? 0 : 1);
