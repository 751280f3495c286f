#!/usr/bin/env node
// `npm run image` (node deploy/image/build.mjs): the DaemonSet's container image, FROM scratch,
// built with buildah (vfs storage, no daemon) into an OCI archive. See deploy/image/README.md.
//
// Steps: check every tool and input first (naming what is missing); stage a rootfs in a temp dir
// `$TMPDIR/pwt-image-<pid>-XXXXXX` (this Node, stripped, and its ldd closure; iptables
// legacy + nft, nft, the xtables modules and their libraries; the podwire package with production
// node_modules from the local npm cache); then, in a private mount namespace, `buildah from
// scratch` + `copy` + `config` + `commit` to `oci-archive:`, with buildah's storage in the temp
// dir. The temp dir goes at the end, on failure too.
//
// Why the mount namespace: buildah's image copy (containers/image) keeps a blob-info cache at
// /var/lib/containers/cache whenever it runs as root, whatever --root says. A tmpfs over /var/lib
// seen only by buildah keeps that (and anything else it might write there) off the host.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync, copyFileSync, cpSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync,
  readlinkSync, realpathSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleCli } from '../../scripts/lib/bundle.mjs';
import { NODE_FLAG, RUNTIME_ENV } from './runtime.mjs';
import { newest } from '../../scripts/lib/newest.mjs';
import { HostToolsError, inImage, netfilterTools, sharedLibs, which } from '../../scripts/lib/netfilter-tools.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SELF = fileURLToPath(import.meta.url);
/** Shared with the upstream agent's image (its iptables + nft); part of the inputs key like SELF. */
const NETFILTER_TOOLS_MODULE = fileURLToPath(new URL('../../scripts/lib/netfilter-tools.mjs', import.meta.url));
/** The entrypoint's bundler; part of the inputs key too. */
const BUNDLE_MODULE = fileURLToPath(new URL('../../scripts/lib/bundle.mjs', import.meta.url));
/** The image's environment and node flag; part of the inputs key too. */
const RUNTIME_MODULE = fileURLToPath(new URL('./runtime.mjs', import.meta.url));
const PKG = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const VERSION = PKG.version;

/** Where the package lives in the image: lib/install's CNI_PLUGIN_BINARY default resolves to APP/build/Release/podwire-cni. */
const APP = '/opt/podwire';
const IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

class BuildError extends Error {
  constructor(msg, code = 1) {
    super(msg);
    this.code = code;
  }
}
const fail = (msg) => {
  throw new BuildError(msg);
};
const usageError = (msg) => {
  throw new BuildError(msg, 2); // the CLI's convention: usage errors exit 2
};
const log = (msg) => process.stderr.write(`image: ${msg}\n`);

// ---- arguments ----

function usage() {
  return `Usage: node deploy/image/build.mjs [--out FILE] [--tag REF] [--reuse]

Builds the podwire DaemonSet image (FROM scratch) with buildah into an OCI archive.
  --out FILE   the archive (default build/image/podwire-${VERSION}.oci.tar)
  --tag REF    the image name in the archive (default localhost/podwire:${VERSION})
  --reuse      do nothing when FILE exists and was built from the same inputs (FILE.inputs)
Needs root, buildah, util-linux (unshare, mount), binutils (strip), libc-bin (ldd), npm with the
dependencies in its cache (npm ci ran once), iptables, nftables, ca-certificates, and the built
package (npm run compile: dist/, build/Release/podwire.node, build/Release/podwire-cni).`;
}

function parseArgs(argv) {
  const o = { out: join(ROOT, 'build', 'image', `podwire-${VERSION}.oci.tar`), tag: `localhost/podwire:${VERSION}`, reuse: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [k, inline] = a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') usageError(`${k} needs a value`);
      return v;
    };
    if (k === '--out') o.out = resolveArg(value());
    else if (k === '--tag') o.tag = value();
    else if (k === '--reuse') o.reuse = true;
    else if (k === '--help' || k === '-h') {
      process.stdout.write(`${usage()}\n`);
      process.exit(0);
    } else usageError(`unknown argument ${JSON.stringify(a)}\n\n${usage()}`);
  }
  if (!/^[a-z0-9]+([._-][a-z0-9]+)*(\.[a-z0-9-]+)*(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(o.tag)) {
    usageError(`--tag ${JSON.stringify(o.tag)} is not a full image reference with a tag (e.g. localhost/podwire:${VERSION})`);
  }
  return o;
}

function resolveArg(p) {
  return p.startsWith('/') ? p : join(process.cwd(), p);
}

// ---- prerequisites ----

/** Every tool and input, checked before anything is built; one error naming all that is missing. */
function preflight() {
  const missing = [];
  if (process.platform !== 'linux') fail('the image is built on Linux only');
  if (process.getuid?.() !== 0) fail('building the image needs root (buildah\'s vfs storage and a private mount namespace for it)');
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 20) fail(`the image carries the Node that runs this script, and podwire needs Node >= 20 (this is ${process.version})`);
  const tools = {
    buildah: 'buildah (apt-get install buildah)', unshare: 'unshare (util-linux)', mount: 'mount (mount)',
    ldd: 'ldd (libc-bin)', strip: 'strip (binutils)', npm: 'npm', env: 'env (coreutils)',
    'xtables-legacy-multi': 'xtables-legacy-multi (iptables)', 'xtables-nft-multi': 'xtables-nft-multi (iptables)', nft: 'nft (nftables)',
  };
  const found = {};
  for (const [t, what] of Object.entries(tools)) {
    found[t] = which(t);
    if (!found[t]) missing.push(what);
  }
  if (!existsSync(CA_BUNDLE)) missing.push(`${CA_BUNDLE} (ca-certificates)`);
  const inputs = ['package.json', 'package-lock.json', 'LICENSE', 'bin/podwire.js', 'dist/cli/main.js', 'dist/cli/version.js', 'build/Release/podwire.node', 'build/Release/podwire-cni'];
  const absent = inputs.filter((f) => !existsSync(join(ROOT, f)));
  if (absent.length) missing.push(`${absent.join(', ')} in ${ROOT} (npm run compile builds them)`);
  if (missing.length) fail(`missing: ${missing.join('; ')}`);
  // An image of stale code is worse than none: the same checks as scripts/test.mjs's rebuild.
  const nativeTime = Math.max(newest(join(ROOT, 'native'), ['.cc', '.h']), statSync(join(ROOT, 'binding.gyp')).mtimeMs);
  for (const f of ['build/Release/podwire.node', 'build/Release/podwire-cni']) {
    if (statSync(join(ROOT, f)).mtimeMs < nativeTime) fail(`${f} is older than native/ (npm run build:native)`);
  }
  const tsbuildinfo = join(ROOT, 'dist/.tsbuildinfo');
  if (existsSync(tsbuildinfo) && statSync(tsbuildinfo).mtimeMs < newest(join(ROOT, 'lib'), ['.ts'])) fail('dist/ is older than lib/ (npm run build:ts)');
  return { ...found, node: realpathSync(process.execPath) };
}


// ---- staging ----

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...opts });
  if (r.error) fail(`${cmd} ${args.join(' ')}: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} ${args.join(' ')} exited ${r.status ?? r.signal}:\n${(r.stderr || r.stdout || '').trim()}`);
  return r.stdout;
}

class Rootfs {
  constructor(dir) {
    this.dir = dir;
    this.files = new Map(); // image path → host source
    this.bytes = new Map(); // category → bytes
  }

  path(p) {
    return join(this.dir, p);
  }

  count(category, bytes) {
    this.bytes.set(category, (this.bytes.get(category) ?? 0) + bytes);
  }

  mkdir(p, mode = 0o755) {
    mkdirSync(this.path(p), { recursive: true, mode });
    chmodSync(this.path(p), mode);
  }

  /** A host file's content (symlinks followed) at `dst`, with its mode. */
  copy(src, dst, category) {
    if (this.files.has(dst)) return;
    const real = realpathSync(src);
    mkdirSync(dirname(this.path(dst)), { recursive: true });
    copyFileSync(real, this.path(dst));
    chmodSync(this.path(dst), statSync(real).mode & 0o7777);
    this.files.set(dst, real);
    this.count(category, statSync(real).size);
  }

  write(dst, data, mode = 0o644) {
    mkdirSync(dirname(this.path(dst)), { recursive: true });
    writeFileSync(this.path(dst), data, { mode });
    chmodSync(this.path(dst), mode);
    this.count('etc', Buffer.byteLength(data));
  }

  link(dst, target) {
    mkdirSync(dirname(this.path(dst)), { recursive: true });
    symlinkSync(target, this.path(dst));
  }

  /** `bin` at `dst` and every shared library it loads (at their image paths). */
  binary(bin, dst, category, libCategory = 'shared libraries') {
    this.copy(bin, dst, category);
    for (const lib of sharedLibs(bin)) this.copy(lib, inImage(lib), libCategory);
  }
}

function findFiles(dir, match) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return findFiles(p, match);
    return e.isFile() && match(e.name) ? [p] : [];
  });
}

function dirBytes(p) {
  let n = 0;
  for (const e of readdirSync(p, { withFileTypes: true })) {
    const q = join(p, e.name);
    if (e.isDirectory()) n += dirBytes(q);
    else if (e.isFile()) n += statSync(q).size;
  }
  return n;
}

/** What node never reads at run time: type declarations, source maps, @types packages, Markdown docs (licenses stay); see also FOREIGN_PREBUILD. */
function prunable(name, isDir) {
  if (isDir) return name === '@types';
  if (/\.d\.[cm]?ts$/.test(name) || /\.map$/.test(name)) return true;
  return /\.md$/i.test(name) && !/^(licen[cs]e|copying|notice)/i.test(name);
}

/** Native prebuilds for other platforms (node-gyp-build and Bare's loader only ever pick `<platform>-<arch>`). */
const FOREIGN_PREBUILD = (name) => !name.startsWith(`${process.platform}-${process.arch}`);

function prune(dir) {
  let removed = 0;
  const inPrebuilds = basename(dir) === 'prebuilds';
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (prunable(e.name, e.isDirectory()) || (inPrebuilds && e.isDirectory() && FOREIGN_PREBUILD(e.name))) {
      removed += e.isDirectory() ? dirBytes(p) : lstatSync(p).size;
      rmSync(p, { recursive: true, force: true });
    } else if (e.isDirectory()) removed += prune(p);
  }
  return removed;
}

/** Production node_modules, installed from the lockfile out of npm's cache (no network, no install scripts). */
function productionModules(work) {
  const stage = join(work, 'npm');
  mkdirSync(stage);
  for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(ROOT, f), join(stage, f));
  try {
    run('npm', ['ci', '--omit=dev', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd: stage, env: { ...process.env, npm_config_update_notifier: 'false' },
    });
  } catch (err) {
    fail(`${err.message}\n(production node_modules are installed offline from npm's cache: run npm ci once, or npm run bootstrap, to fill it)`);
  }
  return join(stage, 'node_modules');
}

async function stage(rootfs, work, found) {
  const r = rootfs;
  // Merged /usr, as Debian's.
  for (const d of ['usr/bin', 'usr/sbin', 'usr/lib', 'usr/lib64', 'usr/local/bin', 'etc', 'run', 'var', 'opt']) r.mkdir(`/${d}`);
  for (const d of ['bin', 'sbin', 'lib', 'lib64']) r.link(`/${d}`, `usr/${d}`);
  r.link('/var/run', '../run');
  r.mkdir('/tmp', 0o1777);
  r.mkdir('/root', 0o700);

  // Node, stripped of its symbol table and debug info (about 12 MB; addons link against .dynsym, which stays).
  const nodeStripped = join(work, 'node');
  run('strip', ['--strip-all', '-o', nodeStripped, found.node]);
  r.binary(nodeStripped, '/usr/bin/node', 'node');
  // env: bin/podwire.js's `#!/usr/bin/env node`.
  r.binary(found.env, '/usr/bin/env', 'env');

  // iptables (legacy and nft, both families, save/restore), nft, and the xtables modules they dlopen.
  const netfilter = netfilterTools(found);
  for (const b of netfilter.binaries) r.binary(b.src, b.dst, b.category, netfilter.libCategory);
  for (const [dst, target] of Object.entries(netfilter.links)) r.link(dst, target);

  // The podwire package.
  for (const f of ['package.json', 'LICENSE']) r.copy(join(ROOT, f), `${APP}/${f}`, 'podwire dist + bin');
  for (const d of ['bin', 'dist']) {
    cpSync(join(ROOT, d), r.path(`${APP}/${d}`), { recursive: true, filter: (src) => !NOT_COPIED.test(src) });
    r.count('podwire dist + bin', dirBytes(r.path(`${APP}/${d}`)));
  }
  r.copy(join(ROOT, 'build/Release/podwire.node'), `${APP}/build/Release/podwire.node`, 'podwire.node + podwire-cni');
  for (const lib of sharedLibs(join(ROOT, 'build/Release/podwire.node'))) r.copy(lib, inImage(lib), 'shared libraries');
  r.copy(join(ROOT, 'build/Release/podwire-cni'), `${APP}/build/Release/podwire-cni`, 'podwire.node + podwire-cni');
  const nm = productionModules(work);
  const pruned = prune(nm);
  renameSync(nm, r.path(`${APP}/node_modules`));
  // Native addons among the dependencies (none today) need their libraries too.
  for (const addon of findFiles(r.path(`${APP}/node_modules`), (n) => n.endsWith('.node'))) {
    for (const lib of sharedLibs(addon)) r.copy(lib, inImage(lib), 'shared libraries');
  }
  r.count('node_modules', dirBytes(r.path(`${APP}/node_modules`)));
  log(`node_modules: production dependencies, ${mb(pruned)} of .d.ts/.map/@types/docs/foreign prebuilds pruned`);
  // The entrypoint: the CLI as one module (scripts/lib/bundle.mjs), built from this dist/; bin/ and
  // dist/ stay for anyone importing the library in the image.
  const bundle = `${APP}/dist/bundle/podwire.mjs`;
  r.count('podwire bundle', await bundleCli({ entry: join(ROOT, 'bin/podwire.js'), outfile: r.path(bundle), interpreter: `/usr/bin/node ${NODE_FLAG}` }));
  chmodSync(r.path(bundle), 0o755);
  r.link('/usr/local/bin/podwire', bundle);
  r.link('/usr/local/bin/podwire-cni', `${APP}/build/Release/podwire-cni`);

  // /etc: root and nobody, name lookups from files then DNS, CA certificates, protocol/service names when the host has them.
  r.write('/etc/passwd', 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n');
  r.write('/etc/group', 'root:x:0:\nnogroup:x:65534:\n');
  r.write('/etc/nsswitch.conf', 'passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n');
  r.copy(CA_BUNDLE, CA_BUNDLE, 'etc');
  for (const f of ['/etc/protocols', '/etc/services']) if (existsSync(f)) r.copy(f, f, 'etc');
}

function mb(n) {
  return `${(n / 1e6).toFixed(1)} MB`;
}

// ---- inputs key (--reuse) ----

/** What of bin/ and dist/ the image leaves out (node never reads it). */
const NOT_COPIED = /(\.map|\.d\.ts|\.tsbuildinfo)$/;

function hashTree(h, p) {
  if (NOT_COPIED.test(p)) return;
  const st = lstatSync(p);
  if (st.isDirectory()) {
    for (const e of readdirSync(p).sort()) hashTree(h, join(p, e));
  } else if (st.isSymbolicLink()) {
    h.update(`L ${relative(ROOT, p)} ${readlinkSync(p)}\n`);
  } else {
    h.update(`F ${relative(ROOT, p)} ${st.mode & 0o777}\n`).update(readFileSync(p));
  }
}

/** A digest of what goes into the image: the project's files by content, the host's binaries and libraries by path, size and mtime. */
function inputsKey(found, tag) {
  const h = createHash('sha256');
  h.update(`${tag}\n`).update(readFileSync(SELF)).update(readFileSync(NETFILTER_TOOLS_MODULE)).update(readFileSync(BUNDLE_MODULE)).update(readFileSync(RUNTIME_MODULE));
  for (const f of ['package.json', 'package-lock.json', 'LICENSE', 'bin', 'dist', 'build/Release/podwire.node', 'build/Release/podwire-cni']) hashTree(h, join(ROOT, f));
  const host = [found.node, found.env, found.nft, found['xtables-legacy-multi'], found['xtables-nft-multi'], CA_BUNDLE];
  const libs = host.flatMap((b) => (b === CA_BUNDLE ? [] : sharedLibs(b)));
  for (const f of [...host, ...libs, '/etc/protocols', '/etc/services']) {
    const st = existsSync(f) ? statSync(f) : undefined;
    h.update(`H ${f} ${st?.size} ${st?.mtimeMs}\n`);
  }
  const libxtables = libs.find((l) => basename(l).startsWith('libxtables.so'));
  if (libxtables) {
    const modules = join(dirname(libxtables), 'xtables');
    for (const m of existsSync(modules) ? readdirSync(modules).sort() : []) {
      const st = statSync(join(modules, m));
      h.update(`X ${m} ${st.size} ${st.mtimeMs}\n`);
    }
  }
  return h.digest('hex');
}

// ---- buildah (in the private mount namespace) ----

/** Runs as `unshare --mount` child: hides /var/lib behind a tmpfs, then buildah from scratch → copy → config → commit. */
function buildahStage(work, tag, archive) {
  run('mount', ['-t', 'tmpfs', '-o', 'mode=0755,size=64m', 'pwt-image', '/var/lib']);
  const env = { ...process.env, TMPDIR: join(work, 'tmp') };
  const b = (...args) => run('buildah', ['--root', join(work, 'storage'), '--runroot', join(work, 'runroot'), '--storage-driver', 'vfs', ...args], { env }).trim();
  const ctr = b('from', '--isolation', 'chroot', '--name', `pwt-image-${process.pid}`, 'scratch');
  b('copy', ctr, `${join(work, 'rootfs')}/`, '/');
  const created = process.env.SOURCE_DATE_EPOCH;
  b('config',
    '--entrypoint', JSON.stringify(['/usr/local/bin/podwire']), '--cmd', 'agent',
    '--env', `PATH=${IMAGE_PATH}`, ...RUNTIME_ENV.flatMap((e) => ['--env', e]), '--created-by', 'podwire deploy/image/build.mjs', '--workingdir', '/', '--user', '0:0', '--os', 'linux', '--arch', ociArch(),
    '--label', 'org.opencontainers.image.title=podwire',
    '--label', `org.opencontainers.image.version=${VERSION}`,
    '--label', `org.opencontainers.image.description=podwire node agent (Istio CNI compatible): podwire agent, podwire-cni at ${APP}/build/Release/podwire-cni`,
    '--label', `org.opencontainers.image.licenses=${PKG.license}`,
    ctr);
  b('commit', '--format', 'oci', '--rm', ...(created ? ['--timestamp', created] : []), ctr, `oci-archive:${archive}:${tag}`);
}

/** Temp dirs of builds that were killed (SIGKILL: no chance to clean up), recognised by their dead pid. */
function sweepStale() {
  for (const e of readdirSync(tmpdir())) {
    const pid = Number(/^pwt-image-(\d+)-/.exec(e)?.[1]);
    if (!pid || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (err) {
      if (err.code === 'ESRCH') rmSync(join(tmpdir(), e), { recursive: true, force: true });
    }
  }
}

function ociArch() {
  return { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' }[process.arch] ?? process.arch;
}

/** Sizes from the archive itself: the archive, the layers as stored, and their uncompressed size. */
function archiveSizes(archive) {
  const names = run('tar', ['-tf', archive]).split('\n').filter(Boolean);
  const read = (name) => execFileSync('tar', ['-xOf', archive, name], { maxBuffer: 16 << 20 });
  const index = JSON.parse(read('index.json').toString());
  const blob = (d) => `blobs/sha256/${d.digest.slice('sha256:'.length)}`;
  const manifest = JSON.parse(read(names.find((n) => n.replace(/^\.\//, '') === blob(index.manifests[0])) ?? blob(index.manifests[0])).toString());
  const layers = manifest.layers.reduce((n, l) => n + l.size, 0);
  const compressed = manifest.layers.some((l) => /gzip|zstd/.test(l.mediaType));
  return { archive: statSync(archive).size, layers, compressed, manifest };
}

async function main(argv) {
  if (argv[0] === '--buildah-stage') {
    buildahStage(argv[1], argv[2], argv[3]);
    return;
  }
  const opts = parseArgs(argv);
  const found = preflight();
  const key = inputsKey(found, opts.tag);
  const keyFile = `${opts.out}.inputs`;
  if (opts.reuse && existsSync(opts.out) && existsSync(keyFile) && readFileSync(keyFile, 'utf8').trim() === key) {
    log(`${relative(process.cwd(), opts.out) || opts.out} is up to date (inputs ${key.slice(0, 12)})`);
    process.stdout.write(`${opts.out}\n`);
    return;
  }
  sweepStale();
  const t0 = performance.now();
  const work = mkdtempSync(join(tmpdir(), `pwt-image-${process.pid}-`));
  const cleanup = () => rmSync(work, { recursive: true, force: true });
  const onSignal = (sig) => {
    cleanup();
    process.kill(process.pid, sig);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    for (const d of ['rootfs', 'tmp', 'storage', 'runroot']) mkdirSync(join(work, d), { mode: 0o700 });
    chmodSync(join(work, 'rootfs'), 0o755);
    const rootfs = new Rootfs(join(work, 'rootfs'));
    await stage(rootfs, work, found);
    const tStage = performance.now();
    const archive = join(work, 'image.oci.tar');
    // buildah's transport syntax is oci-archive:PATH:REF, so PATH cannot hold a colon.
    if (archive.includes(':')) fail(`TMPDIR ${tmpdir()} contains ':', which buildah's oci-archive:PATH:REF cannot take`);
    // unshare runs this script again inside the new mount namespace (no shell in between).
    run('unshare', ['--mount', '--propagation', 'private', '--', process.execPath, SELF, '--buildah-stage', work, opts.tag, archive], { stdio: ['ignore', 'pipe', 'pipe'] });
    mkdirSync(dirname(opts.out), { recursive: true });
    const tmpOut = `${opts.out}.tmp-${process.pid}`;
    try {
      copyFileSync(archive, tmpOut);
      renameSync(tmpOut, opts.out);
    } finally {
      rmSync(tmpOut, { force: true });
    }
    writeFileSync(keyFile, `${key}\n`);
    const s = archiveSizes(opts.out);
    const rows = [...rootfs.bytes].sort((a, b) => b[1] - a[1]).map(([k, v]) => `  ${mb(v).padStart(9)}  ${k}`);
    log(`built ${opts.tag} in ${((performance.now() - t0) / 1000).toFixed(1)} s (staging ${((tStage - t0) / 1000).toFixed(1)} s)`);
    log(`${opts.out}: ${mb(s.archive)} archive, ${mb(s.layers)} ${s.compressed ? 'compressed' : 'uncompressed'} layer; contents:\n${rows.join('\n')}`);
    process.stdout.write(`${opts.out}\n`);
  } finally {
    cleanup();
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof BuildError) {
    log(err.message);
    process.exit(err.code);
  }
  if (err instanceof HostToolsError) {
    log(err.message);
    process.exit(1);
  }
  throw err;
});
