// Container images for the CRI tests and the real node (scripts/kube/), built locally — nothing is pulled. An
// image is an OCI image-layout tarball (oci-layout, index.json annotated with
// `io.containerd.image.name`, one uncompressed layer, config and manifest
// blobs) that `ctr images import` takes. Two ready-made images:
//   pause    a 10-line static C pause (compiled with `cc -static` on first use)
//   busybox  Debian busybox-static's /bin/busybox plus a few applet links
// Built files are cached under ~/.cache/podwire/cri/ (PODWIRE_CRI_CACHE),
// keyed by content, so only a machine's first run compiles anything.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync, openSync, readSync, closeSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, posix } from 'node:path';

export function criCacheDir() {
  return process.env.PODWIRE_CRI_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'podwire', 'cri');
}

function octal(n, width) {
  return n.toString(8).padStart(width - 1, '0') + '\0';
}

function header(e, size) {
  const h = Buffer.alloc(512);
  let name = e.type === 'dir' && !e.name.endsWith('/') ? `${e.name}/` : e.name;
  let prefix = '';
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf('/', name.length - 2);
    prefix = name.slice(0, cut);
    name = name.slice(cut + 1);
    if (cut < 0 || Buffer.byteLength(name) > 100 || Buffer.byteLength(prefix) > 155)
      throw new RangeError(`tar: name too long: ${e.name}`);
  }
  h.write(name, 0, 100, 'utf8');
  h.write(octal(e.mode ?? (e.type === 'file' ? 0o644 : 0o755), 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii'); // uid
  h.write(octal(0, 8), 116, 'ascii'); // gid
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(0, 12), 136, 'ascii'); // mtime: reproducible
  h.write('        ', 148, 'ascii'); // checksum placeholder
  h.write(e.type === 'file' ? '0' : e.type === 'dir' ? '5' : '2', 156, 'ascii');
  if (e.linkname !== undefined)
    h.write(e.linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  h.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const b of h)
    sum += b;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

/** A ustar archive of `entries`, in order, owned by root, mtime 0. */
export function tar(entries) {
  const out = [];
  for (const e of entries) {
    const data = e.type === 'file' ? e.data ?? Buffer.alloc(0) : Buffer.alloc(0);
    out.push(header(e, data.length), data);
    if (data.length % 512)
      out.push(Buffer.alloc(512 - (data.length % 512)));
  }
  out.push(Buffer.alloc(1024));
  return Buffer.concat(out);
}

function sha256(b) {
  return `sha256:${createHash('sha256').update(b).digest('hex')}`;
}

function ociArch() {
  return { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' }[process.arch] ?? process.arch;
}

/** The image's layer: every file and symlink, with their parent directories first. */
function layer(def) {
  const entries = [];
  const dirs = new Set();
  const parents = (p) => {
    const parts = p.split('/').slice(0, -1);
    for (let i = 1; i <= parts.length; i++) {
      const d = parts.slice(0, i).join('/');
      if (d && !dirs.has(d)) {
        dirs.add(d);
        entries.push({ name: d, type: 'dir' });
      }
    }
  };
  for (const f of def.files) {
    const name = posix.normalize(f.dst).replace(/^\/+/, '');
    parents(name);
    const data = f.data ?? readFileSync(f.src);
    entries.push({ name, type: 'file', data, mode: f.mode ?? 0o755 });
  }
  for (const [dst, target] of Object.entries(def.symlinks ?? {})) {
    const name = posix.normalize(dst).replace(/^\/+/, '');
    parents(name);
    entries.push({ name, type: 'symlink', linkname: target, mode: 0o777 });
  }
  return tar(entries);
}

/** The OCI image-layout tarball of `def` (deterministic: the same input gives the same bytes). */
export function buildOciImage(def) {
  const tag = def.ref.slice(def.ref.lastIndexOf(':') + 1);
  if (!def.ref.includes(':') || tag.includes('/'))
    throw new TypeError(`image ref needs a tag: ${def.ref}`);
  const lay = layer(def);
  const layerDigest = sha256(lay);
  const config = Buffer.from(JSON.stringify({
    architecture: ociArch(), os: 'linux', created: '1970-01-01T00:00:00Z',
    config: { Entrypoint: def.entrypoint, ...(def.cmd ? { Cmd: def.cmd } : {}), Env: def.env ?? ['PATH=/bin:/usr/bin:/sbin:/usr/sbin'] },
    rootfs: { type: 'layers', diff_ids: [layerDigest] },
    history: [{ created: '1970-01-01T00:00:00Z', created_by: 'podwire scripts/lib/oci-image.mjs' }],
  }));
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha256(config), size: config.length },
    layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: layerDigest, size: lay.length }],
  }));
  const index = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    manifests: [{
        mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: sha256(manifest), size: manifest.length,
        platform: { architecture: ociArch(), os: 'linux' },
        annotations: { 'io.containerd.image.name': def.ref, 'org.opencontainers.image.ref.name': tag },
      }],
  }));
  const blob = (b) => ({ name: `blobs/sha256/${sha256(b).slice(7)}`, type: 'file', data: b, mode: 0o644 });
  return tar([
    { name: 'oci-layout', type: 'file', data: Buffer.from('{"imageLayoutVersion":"1.0.0"}'), mode: 0o644 },
    { name: 'index.json', type: 'file', data: index, mode: 0o644 },
    { name: 'blobs', type: 'dir' }, { name: 'blobs/sha256', type: 'dir' },
    blob(lay), blob(config), blob(manifest),
  ]);
}

/** Writes `data` to `path` atomically unless it is there already. */
function writeOnce(path, data, mode = 0o644) {
  if (existsSync(path))
    return path;
  mkdirSync(join(path, '..'), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, typeof data === 'function' ? data() : data, { mode });
    renameSync(tmp, path);
  }
  finally {
    rmSync(tmp, { force: true });
  }
  return path;
}

/** Builds `def` into the cache (content-addressed file name) and returns where it is. */
export function imageTarball(def) {
  const bytes = buildOciImage(def);
  const name = def.ref.replace(/[^A-Za-z0-9._-]+/g, '_');
  const tarball = writeOnce(join(criCacheDir(), 'images', `${name}-${sha256(bytes).slice(7, 19)}.tar`), bytes);
  return { ref: def.ref, tarball };
}

// ---- pause ----
export const PAUSE_SOURCE = `#include <signal.h>
#include <unistd.h>
static void bye(int s) { (void)s; _exit(0); }
int main(void) {
 signal(SIGINT, bye);
 signal(SIGTERM, bye);
 for (;;) pause();
}
`;

export const PAUSE_REF = 'localhost/podwire-test/pause:1';

export const BUSYBOX_REF = 'localhost/podwire-test/busybox:1';

/** The static pause binary, compiled once per machine (`cc -static -Os -s`, about 0.2 s). */
export function pauseBinary() {
  let ccVersion = '';
  try {
    ccVersion = execFileSync('cc', ['--version'], { encoding: 'utf8' }).split('\n')[0] ?? '';
  }
  catch (err) {
    throw new Error(`building the pause image needs a C compiler (cc): ${err.message}`);
  }
  const key = createHash('sha256').update(PAUSE_SOURCE).update(ccVersion).update(process.arch).digest('hex').slice(0, 12);
  const out = join(criCacheDir(), 'bin', `pause-${key}`);
  if (existsSync(out))
    return out;
  mkdirSync(join(out, '..'), { recursive: true });
  const src = `${out}.${process.pid}.c`;
  const tmp = `${out}.tmp-${process.pid}`;
  try {
    writeFileSync(src, PAUSE_SOURCE);
    execFileSync('cc', ['-static', '-Os', '-s', '-o', tmp, src], { stdio: ['ignore', 'ignore', 'pipe'] });
    if (!isStaticElf(tmp))
      throw new Error('cc -static produced a dynamically linked pause');
    renameSync(tmp, out);
  }
  catch (err) {
    const stderr = err.stderr?.toString() ?? '';
    throw new Error(`compiling the pause binary failed (is libc6-dev installed?): ${err.message}${stderr ? `\n${stderr}` : ''}`);
  }
  finally {
    rmSync(src, { force: true });
    rmSync(tmp, { force: true });
  }
  return out;
}

/** True for an ELF executable without a PT_INTERP program header (nothing to load at run time). */
export function isStaticElf(path) {
  const fd = openSync(path, 'r');
  try {
    const h = Buffer.alloc(64);
    if (readSync(fd, h, 0, 64, 0) < 64 || h.readUInt32BE(0) !== 0x7f454c46)
      return false;
    if (h[4] !== 2 || h[5] !== 1)
      return false; // ELF64 little-endian only (what this project runs on)
    const phoff = Number(h.readBigUInt64LE(0x20));
    const phentsize = h.readUInt16LE(0x36);
    const phnum = h.readUInt16LE(0x38);
    const ph = Buffer.alloc(phentsize * phnum);
    readSync(fd, ph, 0, ph.length, phoff);
    for (let i = 0; i < phnum; i++)
      if (ph.readUInt32LE(i * phentsize) === 3)
        return false; // PT_INTERP
    return true;
  }
  finally {
    closeSync(fd);
  }
}

export function pauseImage() {
  return imageTarball({ ref: PAUSE_REF, entrypoint: ['/pause'], files: [{ dst: '/pause', src: pauseBinary() }] });
}

export const BUSYBOX_BINARY = '/bin/busybox';

const BUSYBOX_APPLETS = ['sh', 'cat', 'echo', 'hostname', 'httpd', 'ip', 'ls', 'nc', 'ping', 'sleep', 'wget', 'true', 'false', 'ifconfig', 'netstat'];

/** Whether Debian busybox-static's binary is there (a dynamically linked busybox cannot run in an empty image). */
export function busyboxAvailable() {
  return existsSync(BUSYBOX_BINARY) && isStaticElf(BUSYBOX_BINARY);
}

/** busybox with applet links in /bin, and /www/index.html for `httpd -h /www`. Entrypoint: /bin/sh. */
export function busyboxImage() {
  if (!busyboxAvailable())
    throw new Error(`${BUSYBOX_BINARY} is missing or not static (apt-get install busybox-static)`);
  return imageTarball({
    ref: BUSYBOX_REF, entrypoint: ['/bin/sh'],
    files: [{ dst: '/bin/busybox', src: BUSYBOX_BINARY }, { dst: '/www/index.html', data: Buffer.from('podwire-test\n'), mode: 0o644 }],
    symlinks: Object.fromEntries(BUSYBOX_APPLETS.map((a) => [`/bin/${a}`, 'busybox'])),
  });
}
