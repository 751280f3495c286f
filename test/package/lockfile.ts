// A lockfile for a scratch project that depends on podwire's runtime dependencies, cut from the
// repository's package-lock.json. An offline `npm install <tarball>` cannot resolve a version
// range (the cache npm ci fills holds tarballs by integrity, not the registry's version lists);
// with the locked versions already in the project's lockfile it only has to place them.

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  dev?: boolean;
  devOptional?: boolean;
  [key: string]: unknown;
}

export class LockfileError extends Error {
  override name = 'LockfileError';
}

/** The lockfile `packages` key that `name` resolves to from `from` (node's upward lookup). */
function resolveKey(packages: Record<string, LockEntry>, from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const key = `${dir ? `${dir}/` : ''}node_modules/${name}`;
    if (packages[key]) return key;
    if (!dir) return undefined;
    const i = dir.lastIndexOf('/node_modules/');
    dir = i < 0 ? '' : dir.slice(0, i);
  }
}

/**
 * The lockfile (v3) of a project named `project` whose tree holds exactly the transitive closure of
 * `dependencies` as the repository locked it, at the same paths (so every lookup resolves as it
 * does in the repository). The root declares nothing: `npm install <tarball>` adds podwire.
 */
export function scratchLockfile(repoLock: { packages: Record<string, LockEntry> }, dependencies: Record<string, string>,
  project: string): object {
  const packages = repoLock.packages;
  const kept = new Map<string, LockEntry>();
  const queue: Array<[string, string, boolean]> = Object.keys(dependencies).map((n) => ['', n, false]);
  while (queue.length) {
    const [from, name, optional] = queue.shift()!;
    const key = resolveKey(packages, from, name);
    if (!key) {
      if (optional) continue;  // an optional dependency the repository did not install (other OS/CPU)
      throw new LockfileError(`package-lock.json has no ${name} (needed from ${from || 'the root'}): run npm install`);
    }
    if (kept.has(key)) continue;
    // Runtime dependencies here, whatever they were in the repository.
    const { dev: _dev, devOptional: _devOptional, ...entry } = packages[key]!;
    kept.set(key, entry);
    for (const d of Object.keys(entry.dependencies ?? {})) queue.push([key, d, false]);
    for (const d of Object.keys(entry.optionalDependencies ?? {})) queue.push([key, d, true]);
    // npm installs peers too; optional ones only when something else brings them.
    for (const d of Object.keys(entry.peerDependencies ?? {})) {
      if (!entry.peerDependenciesMeta?.[d]?.optional) queue.push([key, d, false]);
    }
  }
  const tree: Record<string, object> = { '': { name: project, version: '1.0.0' } };
  for (const key of [...kept.keys()].sort()) tree[key] = kept.get(key)!;
  return { name: project, version: '1.0.0', lockfileVersion: 3, requires: true, packages: tree };
}
