// The package as users get it: `npm run prebuild` + `npm pack`, what the tarball holds and what
// it must not, an offline install into a scratch project that compiles nothing (the prebuild
// loads), the package entries, the CLI, the README's API tour run against the installed package
// inside a pwt- netns, and the source-build fallback with its messages. Everything happens in a
// pwt- temp dir, removed afterwards.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Netns } from '../../lib/net/netns/netns.js';
import { freshNetns, ipJson, nsName } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { scratchLockfile } from './lockfile.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TUPLE = `${process.platform}-${process.arch}`;
const ADDON = `prebuilds/${TUPLE}/podwire.glibc.node`;
const CNI = `prebuilds/${TUPLE}/podwire-cni`;

interface RunResult {
  code: number | null;
  out: string;
  err: string;
}

class RunError extends Error {
  override name = 'RunError';
}

function run(argv: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { cwd: opts.cwd, env: opts.env ?? npmEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

/** Fails with the command's output when it did not exit 0. */
async function ok(argv: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<RunResult> {
  const r = await run(argv, opts);
  if (r.code !== 0) throw new RunError(`${argv.join(' ')} exited ${r.code}\n${r.out}\n${r.err}`);
  return r;
}

// The caller's npm configuration (cache, nodedir) stays; an outer --build-from-source must not
// turn the "nothing compiles" install into a compile.
function npmEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  if (!('npm_config_build_from_source' in extra)) delete env.npm_config_build_from_source;
  return env;
}

/** The first ```ts block of README.md's "## API tour" section, read at test time so it cannot drift. */
function readmeTour(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## API tour\n');
  expect(start, 'README.md has a "## API tour" section').toBeGreaterThan(0);
  const end = readme.indexOf('\n## ', start + 1);
  const block = /```(?:ts|js)\n([\s\S]*?)```/.exec(readme.slice(start, end < 0 ? undefined : end));
  expect(block, 'the API tour has a ```ts block').not.toBeNull();
  return block![1]!;
}

// The only adaptations of the tour: its netns gets a pwt- name (test netns are pwt-, swept by
// pid), and a probe before `ns.close();` prints what the tour built, read back with iproute2
// inside its netns, plus which podwire module and addon this process loaded.
const PROBE = `{
  const { execFileSync } = await import('node:child_process');
  const { readFileSync } = await import('node:fs');
  const inTour = async (argv) => {
    const r = await ns.spawn(argv);
    if (r.code !== 0) throw new Error(argv.join(' ') + ': ' + r.stderr);
    return r.stdout;
  };
  console.log('PWT-PROBE ' + JSON.stringify({
    entry: import.meta.resolve('podwire'),
    addons: [...new Set(readFileSync('/proc/self/maps', 'utf8').split('\\n').map((l) => l.split(/\\s+/)[5]).filter((p) => p && p.endsWith('.node')))],
    addr: JSON.parse(await inTour(['ip', '-j', 'addr', 'show', 'dev', 'eth0'])),
    routes: JSON.parse(await inTour(['ip', '-j', 'route', 'show', 'table', '100'])),
    rules: JSON.parse(await inTour(['ip', '-j', 'rule', 'show'])),
    forward: (await inTour(['cat', '/proc/sys/net/ipv4/ip_forward'])).trim(),
    iptablesSave: typeof stdout,
    peer: JSON.parse(execFileSync('ip', ['-j', 'link', 'show', 'veth-demo'], { encoding: 'utf8' })),
  }));
}
`;

function adaptTour(code: string, netnsName: string): string {
  expect(code.match(/'demo-pod'/g)?.length, "the tour names its netns 'demo-pod' (create and remove)").toBe(2);
  const close = /^ns\.close\(\);.*$/m;
  expect(close.test(code), 'the tour closes its netns with `ns.close();`').toBe(true);
  return code.replaceAll("'demo-pod'", `'${netnsName}'`).replace(close, (line) => `${PROBE}${line}`);
}

interface PackFile {
  path: string;
  size: number;
  mode: number;
}

interface PackReport {
  filename: string;
  size: number;
  unpackedSize: number;
  files: PackFile[];
}

// What may be in the tarball, all of it; anything else (tests, bench, fixtures, native tests,
// fuzz targets, source maps, build output, repo tooling) fails the test.
const ALLOWED = [
  /^(package\.json|README\.md|LICENSE|binding\.gyp)$/,
  /^bin\/podwire\.js$/,
  /^dist\/.+\.(js|d\.ts)$/,
  /^docs\/[^/]+\.md$/,
  /^native\/(?!tests\/|fuzz\/).+\.(cc|h)$/,
  new RegExp(`^prebuilds/${TUPLE}/(podwire\\.glibc\\.node|podwire-cni)$`),
  /^scripts\/install-notice\.mjs$/,
];

/** lib/ modules (paths without .ts): each must ship as dist/<m>.js + dist/<m>.d.ts. */
function libModules(dir = join(ROOT, 'lib'), prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => e.isDirectory()
    ? libModules(join(dir, e.name), `${prefix}${e.name}/`)
    : e.name.endsWith('.ts') ? [`${prefix}${e.name.slice(0, -3)}`] : []);
}

describe.skipIf(!privileged('iptables-save', 'make', 'g++', 'python3', 'strip'))('npm pack: the installable package', () => {
  let work = '';
  let project = '';
  let pack: PackReport;
  let installed = '';

  function needInstall(): string {
    if (!installed) throw new RunError('the tarball was not installed (see the install test)');
    return installed;
  }

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), `pwt-pack-${process.pid}-`));
    const t0 = Date.now();
    // The staging copy of the prebuild goes into the pwt- dir too.
    await ok(['npm', 'run', 'prebuild', '--silent'], { cwd: ROOT, env: npmEnv({ TMPDIR: work }), timeoutMs: 300_000 });
    const t1 = Date.now();
    const r = await ok(['npm', 'pack', '--json', '--pack-destination', work], { cwd: ROOT, env: npmEnv({ TMPDIR: work }), timeoutMs: 120_000 });
    // Lifecycle scripts (prepare: tsc) may print before the JSON report.
    const json = r.out.slice(r.out.search(/^\[$/m));
    pack = (JSON.parse(json) as PackReport[])[0]!;
    process.stderr.write(`npm pack: ${pack.filename} ${pack.size} bytes packed, ${pack.unpackedSize} unpacked, ` +
      `${pack.files.length} files; prebuild ${((t1 - t0) / 1000).toFixed(1)} s, pack ${((Date.now() - t1) / 1000).toFixed(1)} s\n`);
  }, 420_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('holds the library, its types, the prebuilds, podwire-cni, the CLI, the docs and nothing else', () => {
    const files = new Map(pack.files.map((f) => [f.path, f]));
    const stray = [...files.keys()].filter((p) => !ALLOWED.some((re) => re.test(p)));
    expect(stray, 'files that do not belong in the package').toEqual([]);
    for (const p of ['package.json', 'README.md', 'LICENSE', 'binding.gyp', 'bin/podwire.js', ADDON, CNI,
      'native/addon.cc', 'native/stub.cc', 'native/cni-shim/main.cc', 'scripts/install-notice.mjs']) {
      expect(files.has(p), p).toBe(true);
    }
    for (const p of [ADDON, CNI, 'bin/podwire.js']) expect(files.get(p)!.mode & 0o111, `${p} is executable`).not.toBe(0);
    // Every module of lib/ compiled, with its declarations; every doc.
    for (const m of libModules()) {
      expect(files.has(`dist/${m}.js`), `dist/${m}.js`).toBe(true);
      expect(files.has(`dist/${m}.d.ts`), `dist/${m}.d.ts`).toBe(true);
    }
    for (const d of readdirSync(join(ROOT, 'docs'))) expect(files.has(`docs/${d}`), `docs/${d}`).toBe(true);
    // Every target package.json names is in the tarball.
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      exports: Record<string, string | { types: string; default: string }>; bin: Record<string, string>; main: string; types: string;
    };
    const targets = [pkg.main, pkg.types, ...Object.values(pkg.bin)];
    for (const [entry, t] of Object.entries(pkg.exports)) {
      if (typeof t === 'string') targets.push(t);
      else {
        expect(t.types, `exports["${entry}"] has types`).toMatch(/\.d\.ts$/);
        targets.push(t.types, t.default);
      }
    }
    for (const t of targets) expect(files.has(t.replace(/^\.\//, '')), t).toBe(true);
    expect(Object.keys(pkg.exports).sort()).toEqual(['.', './agent', './kube', './package.json', './testing']);
  });

  it('installs offline from the tarball into a scratch project without compiling anything', async () => {
    project = join(work, 'project');
    mkdirSync(project);
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const repoLock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as Parameters<typeof scratchLockfile>[0];
    writeFileSync(join(project, 'package.json'), `${JSON.stringify({ name: 'pwt-scratch', version: '1.0.0', private: true, type: 'module' }, null, 2)}\n`);
    writeFileSync(join(project, 'package-lock.json'), `${JSON.stringify(scratchLockfile(repoLock, pkg.dependencies, 'pwt-scratch'), null, 2)}\n`);
    const t0 = Date.now();
    const r = await ok(['npm', 'install', '--offline', '--no-audit', '--no-fund', '--foreground-scripts', join(work, pack.filename)],
      { cwd: project, timeoutMs: 180_000 });
    process.stderr.write(`npm install (offline, from the tarball): ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    const dir = join(project, 'node_modules/podwire');
    const log = r.out + r.err;
    expect(log).toContain('node-gyp-build');                  // the install script ran ...
    expect(log).not.toMatch(/gyp info|podwire: .*from source/); // ... and found the prebuild: no compile
    expect(existsSync(join(dir, 'build')), 'no build/ in the installed package').toBe(false);
    expect(statSync(join(dir, CNI)).mode & 0o777).toBe(0o755);
    // Runtime dependencies only.
    for (const dev of ['typescript', 'vitest', 'prebuildify']) expect(existsSync(join(project, 'node_modules', dev)), dev).toBe(false);
    const resolved = await ok([process.execPath, '-p', "require('node-gyp-build').resolve('node_modules/podwire')"], { cwd: project, timeoutMs: 30_000 });
    expect(resolved.out.trim()).toBe(join(dir, ADDON));
    installed = dir;
  }, 240_000);

  it('exports ".", "./kube", "./agent", "./testing" and "./package.json", and nothing deeper', async () => {
    needInstall();
    const script = `
      import * as root from 'podwire';
      import * as kube from 'podwire/kube';
      import * as agent from 'podwire/agent';
      import * as testing from 'podwire/testing';
      import { createRequire } from 'node:module';
      const require = createRequire(import.meta.url);
      let deep = 'loaded';
      try { await import('podwire/dist/native.js'); } catch (e) { deep = e.code; }
      console.log(JSON.stringify({ root: typeof root.Netns, kube: typeof kube.KubeClient, agent: typeof agent.Agent, testing: typeof testing.ZtunnelPeer,
        version: require('podwire/package.json').version, deep }));`;
    const r = await ok([process.execPath, '--input-type=module', '-e', script], { cwd: project, timeoutMs: 30_000 });
    expect(JSON.parse(r.out)).toEqual({ root: 'function', kube: 'function', agent: 'function', testing: 'function', version: '0.1.0', deep: 'ERR_PACKAGE_PATH_NOT_EXPORTED' });
  });

  it('npx podwire --help works from the project, and the CNI plugin default is the shipped podwire-cni', async () => {
    const dir = needInstall();
    const help = await ok(['npx', '--offline', 'podwire', '--help'], { cwd: project, timeoutMs: 30_000 });
    expect(help.out).toContain('Usage: podwire <command>');
    for (const c of ['agent', 'demo', 'inspect', 'install', 'rules']) expect(help.out).toMatch(new RegExp(`^  ${c} `, 'm'));
    const agentHelp = await ok(['npx', '--offline', 'podwire', 'agent', '--help'], { cwd: project, timeoutMs: 30_000 });
    expect(agentHelp.out).toMatch(new RegExp(`CNI_PLUGIN_BINARY[^\\n]*\\n[^\\n]*\\n\\s+default: ${join(dir, CNI).replaceAll('.', '\\.')}\\n`));
    const version = await ok([join(dir, CNI)], { cwd: project, env: { CNI_COMMAND: 'VERSION', PATH: process.env.PATH }, timeoutMs: 10_000 });
    expect((JSON.parse(version.out) as { supportedVersions: string[] }).supportedVersions).toContain('1.0.0');
  });

  it("runs the README's API tour against the installed package inside a pwt- netns", async () => {
    const dir = needInstall();
    const outer = await freshNetns();       // the tour's "host": its veth peer lands here, not on the host
    const tourNs = nsName();
    const file = join(project, 'tour.mjs');
    writeFileSync(file, adaptTour(readmeTour(), tourNs));
    try {
      const r = await outer.spawn([process.execPath, file], { cwd: project, timeoutMs: 30_000 });
      expect(r.code, r.stderr).toBe(0);
      const line = r.stdout.split('\n').find((l) => l.startsWith('PWT-PROBE '));
      expect(line, r.stdout).toBeDefined();
      const probe = JSON.parse(line!.slice('PWT-PROBE '.length)) as Record<string, unknown>;
      expect(probe.entry).toBe(pathToFileURL(join(dir, 'dist/index.js')).href);
      expect(probe.addons).toEqual([join(dir, ADDON)]);
      expect(probe.addr).toMatchObject([{ ifname: 'eth0', addr_info: expect.arrayContaining([expect.objectContaining({ family: 'inet', local: '10.244.0.5', prefixlen: 24 })]) }]);
      expect(probe.routes).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'local', dst: 'default', dev: 'lo' })]));
      expect(probe.rules).toEqual(expect.arrayContaining([expect.objectContaining({ priority: 32764, fwmark: '0x111', fwmask: '0xfff', table: '100' })]));
      expect(probe.forward).toBe('1');
      expect(probe.iptablesSave).toBe('string');
      expect(probe.peer).toMatchObject([{ ifname: 'veth-demo' }]);
      // The tour removed its netns; with it goes the veth pair (the kernel frees a netns asynchronously).
      expect(existsSync(`/run/netns/${tourNs}`)).toBe(false);
      const links = () => ipJson<Array<{ ifname: string }>>(outer.name, 'link').map((l) => l.ifname);
      for (let i = 0; i < 100 && links().length > 1; i++) await new Promise((res) => setTimeout(res, 50));
      expect(links()).toEqual(['lo']);
    } finally {
      await Netns.remove(tourNs).catch(() => undefined);  // a failed tour may have left it
    }
  });

  it('type-checks the API tour and the kube/agent entries against the installed .d.ts files', async () => {
    needInstall();
    writeFileSync(join(project, 'tour-types.ts'), readmeTour());
    writeFileSync(join(project, 'entries.ts'), [
      "import { KubeClient, loadCredentials } from 'podwire/kube';",
      "import { Agent, parseAgentConfig } from 'podwire/agent';",
      "import type { NetError } from 'podwire';",
      'export type Entries = [typeof KubeClient, typeof loadCredentials, typeof Agent, typeof parseAgentConfig, NetError];',
      '',
    ].join('\n'));
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'ESNext.Disposable'],
        types: ['node'], strict: true, noEmit: true, skipLibCheck: false },
      files: ['tour-types.ts', 'entries.ts'],
    }));
    const r = await run([process.execPath, join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: project, timeoutMs: 120_000 });
    // skipLibCheck is off so podwire's own declarations are checked; errors in other packages'
    // declarations (client-node's need @types/ws, which it does not depend on) are theirs.
    const errors = r.out.split('\n').filter((l) => /^\S.*\(\d+,\d+\): error TS/.test(l));
    expect(r.code === 0 || errors.length > 0, `tsc exited ${r.code}: ${r.out}${r.err}`).toBe(true);
    expect(errors.filter((l) => !l.startsWith('node_modules/') || l.startsWith('node_modules/podwire/'))).toEqual([]);
  }, 150_000);

  it('without a usable addon, says where it looked and how to build one', async () => {
    const bare = join(project, 'node_modules/podwire-bare');  // the installed package minus its prebuilds
    cpSync(needInstall(), bare, { recursive: true });
    rmSync(join(bare, 'prebuilds'), { recursive: true });
    const r = await run([process.execPath, '--input-type=module', '-e',
      `const { Netns } = await import(${JSON.stringify(pathToFileURL(join(bare, 'dist/index.js')).href)}); Netns.current();`],
    { cwd: project, timeoutMs: 30_000 });
    expect(r.code).not.toBe(0);
    expect(r.err).toContain('podwire: could not find its native addon');
    expect(r.err).toContain(`${join(bare, 'prebuilds', TUPLE)} (missing)`);
    expect(r.err).toContain('npm rebuild podwire --foreground-scripts');
    rmSync(bare, { recursive: true });
  });

  it('falls back to a source build: stops naming a missing compiler, else builds the addon and podwire-cni', async () => {
    const dir = needInstall();
    // The Node headers: what the repository's npm uses (bootstrap.sh's nodedir), not a download.
    const nodedir = process.env.npm_config_nodedir
      ?? (await ok(['npm', 'config', 'get', 'nodedir'], { cwd: ROOT, timeoutMs: 30_000 })).out.trim();
    const fromSource = { npm_config_build_from_source: 'true', npm_config_nodedir: nodedir };
    const rebuild = ['npm', 'rebuild', 'podwire', '--foreground-scripts'];

    const missing = await run(rebuild, { cwd: project, env: npmEnv({ ...fromSource, CXX: 'pwt-no-such-compiler' }), timeoutMs: 60_000 });
    expect(missing.code).not.toBe(0);
    expect(missing.out + missing.err).toContain('podwire: --build-from-source was asked for; building the native addon and podwire-cni from source');
    expect(missing.out + missing.err).toContain('podwire: cannot build from source, missing: pwt-no-such-compiler');
    expect(existsSync(join(dir, 'build'))).toBe(false);

    const t0 = Date.now();
    await ok(rebuild, { cwd: project, env: npmEnv(fromSource), timeoutMs: 300_000 });
    process.stderr.write(`source-build fallback (npm rebuild podwire): ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    const resolved = await ok([process.execPath, '-p', "require('node-gyp-build').resolve('node_modules/podwire')"], { cwd: project, timeoutMs: 30_000 });
    expect(resolved.out.trim()).toBe(join(dir, 'build/Release/podwire.node'));
    const agentHelp = await ok(['npx', '--offline', 'podwire', 'agent', '--help'], { cwd: project, timeoutMs: 30_000 });
    expect(agentHelp.out).toContain(`default: ${join(dir, 'build/Release/podwire-cni')}\n`);
    const loads = await ok([process.execPath, '--input-type=module', '-e',
      "import { Netns } from 'podwire'; const ns = Netns.current(); console.log(ns.id.ino > 0); ns.close();"], { cwd: project, timeoutMs: 30_000 });
    expect(loads.out.trim()).toBe('true');
  }, 360_000);
});
