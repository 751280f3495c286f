// The host's netfilter tools as an image carries them: iptables legacy + nft (both families, save
// and restore, the plain names pointing at the nft variant as Debian's default alternative), nft,
// the xtables modules iptables dlopens, and every shared library of each (ldd's closure, the
// dynamic loader included), at their paths in a merged-/usr image. Shared by podwire's image
// (deploy/image/build.mjs) and the image of upstream's agent the migration test runs
// (bench/lib/istio-image.ts), so both agents run the very same iptables and nft binaries.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, statSync } from 'node:fs';
import { basename, delimiter, dirname, join } from 'node:path';

/** A host tool or library an image needs is missing or unusable; `message` names it. */
export class HostToolsError extends Error {
  constructor(message) {
    super(message);
    this.name = 'HostToolsError';
    this.code = 'ERR_HOST_TOOLS';
  }
}

/** The first executable `tool` on PATH (then /usr/sbin, /sbin: root's tools); undefined when none. */
export function which(tool) {
  for (const d of (process.env.PATH ?? '').split(delimiter).concat(['/usr/sbin', '/sbin'])) {
    if (!d) continue;
    const p = join(d, tool);
    try {
      accessSync(p, constants.X_OK);
      if (statSync(p).isFile()) return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Image path for a host path: the image is merged-/usr (/lib, /lib64, /bin, /sbin are links into /usr). */
export function inImage(p) {
  return /^\/(lib|lib64|bin|sbin)\//.test(p) ? `/usr${p}` : p;
}

/** The links a merged-/usr image has at its root (path → target). */
export const MERGED_USR_LINKS = { '/bin': 'usr/bin', '/sbin': 'usr/sbin', '/lib': 'usr/lib', '/lib64': 'usr/lib64', '/var/run': '../run' };

/** The shared libraries `file` loads (ldd's transitive closure, the dynamic loader included); [] for a static binary. */
export function sharedLibs(file) {
  const r = spawnSync('ldd', [file], { encoding: 'utf8' });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  if (/not a dynamic executable|statically linked/.test(out)) return [];
  if (r.status !== 0) throw new HostToolsError(`ldd ${file} failed: ${out.trim()}`);
  const libs = [];
  for (const line of out.split('\n')) {
    const t = line.trim();
    if (!t || t.startsWith('linux-vdso') || t.startsWith('linux-gate')) continue;
    if (/=> not found/.test(t)) throw new HostToolsError(`${file} needs ${t.split(' ')[0]}, which is not installed`);
    const m = /=>\s+(\/\S+)/.exec(t) ?? /^(\/\S+)\s+\(/.exec(t);
    if (m) libs.push(m[1]);
  }
  return libs;
}

/** The host binaries netfilterTools needs, as `which` finds them (the keys are its `found` names). */
export const NETFILTER_TOOLS = {
  'xtables-legacy-multi': 'xtables-legacy-multi (iptables)', 'xtables-nft-multi': 'xtables-nft-multi (iptables)', nft: 'nft (nftables)',
};

/**
 * What an image needs for iptables and nft: `binaries` (host src → image dst; each needs its
 * sharedLibs too), `links` (image path → target) and `category` per binary for size reports.
 * `found` maps NETFILTER_TOOLS' names to host paths (which() when absent).
 */
export function netfilterTools(found = {}) {
  const path = (t) => found[t] ?? which(t) ?? (() => { throw new HostToolsError(`missing: ${NETFILTER_TOOLS[t]}`); })();
  const binaries = [];
  for (const v of ['legacy', 'nft']) binaries.push({ src: path(`xtables-${v}-multi`), dst: `/usr/sbin/xtables-${v}-multi`, category: 'iptables + nft' });
  binaries.push({ src: path('nft'), dst: '/usr/sbin/nft', category: 'iptables + nft' });
  const links = {};
  for (const fam of ['iptables', 'ip6tables']) {
    for (const tool of ['', '-save', '-restore']) {
      for (const v of ['legacy', 'nft']) links[`/usr/sbin/${fam}-${v}${tool}`] = `xtables-${v}-multi`;
      links[`/usr/sbin/${fam}${tool}`] = 'xtables-nft-multi'; // the plain names: Debian's default alternative
    }
  }
  const libxtables = sharedLibs(path('xtables-nft-multi')).find((l) => basename(l).startsWith('libxtables.so'));
  if (!libxtables) throw new HostToolsError(`${path('xtables-nft-multi')} does not load libxtables: cannot find the xtables modules`);
  const modules = join(dirname(libxtables), 'xtables');
  if (!existsSync(modules)) throw new HostToolsError(`no xtables modules at ${modules} (iptables)`);
  for (const m of readdirSync(modules).filter((f) => f.endsWith('.so')).sort()) {
    binaries.push({ src: join(modules, m), dst: inImage(join(modules, m)), category: 'xtables modules' });
  }
  return { binaries, links, libCategory: 'iptables + nft libraries' };
}

/** `binaries` and every library they load, as image files ({src, dst}), each image path once. */
export function withSharedLibs(binaries) {
  const files = new Map();
  for (const b of binaries) {
    if (!files.has(b.dst)) files.set(b.dst, { src: b.src, dst: b.dst });
    for (const lib of sharedLibs(b.src)) if (!files.has(inImage(lib))) files.set(inImage(lib), { src: lib, dst: inImage(lib) });
  }
  return [...files.values()];
}
