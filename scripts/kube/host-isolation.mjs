// What keeps a test runtime (containerd, or a whole kubelet node) off the host: the host paths
// it would write hidden behind private mounts in its own mount namespace, and the cgroup
// hierarchies its pods go under. Shared by test/helpers/containerd.ts and scripts/kube/node.mjs.
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmdirSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Nearest existing ancestor of a path that does not exist (the path itself when it exists). */
function existingAncestor(p) {
  let cur = p;
  while (!existsSync(cur)) cur = dirname(cur);
  return cur;
}

/**
 * The mount steps that make every entry of `paths` an empty private dir: `tmpfs` for those that
 * exist, `privatize` (parent → set of child names made fresh) for those that do not. Paths are
 * resolved through the host's symlinks (/var/run → /run).
 */
export function hidingPlan(paths) {
  const resolved = paths.map((p) => {
    const anc = existingAncestor(p);
    return join(realpathSync(anc), p.slice(anc.length));
  });
  const privatize = new Map();
  const tmpfs = [];
  for (const p of resolved) {
    if (existsSync(p)) continue;
    const anc = existingAncestor(p);
    const child = p.slice(anc.length + 1).split('/')[0];
    if (!privatize.has(anc)) privatize.set(anc, new Set());
    privatize.get(anc).add(child);
  }
  for (const p of resolved) {
    if (!existsSync(p)) continue;
    const parent = dirname(p);
    if (privatize.has(parent)) privatize.get(parent).add(p.slice(parent.length + 1));
    else if (![...privatize.keys()].some((a) => p.startsWith(`${a}/`)) && !tmpfs.some((t) => p.startsWith(`${t}/`))) tmpfs.push(p);
  }
  return { tmpfs, privatize };
}

/** A shell word. */
export function shq(s) {
  return `'${String(s).replace(/'/g, `'\\''`)}'`;
}

/**
 * Shell lines (for a script running in a fresh private mount namespace) that hide `paths` as
 * hidingPlan says. `stageDir` is an empty dir of the caller's for the staging mounts.
 */
export function hidingScript(paths, stageDir, label = 'pwt') {
  const { tmpfs, privatize: plan } = hidingPlan(paths);
  const privatize = [...plan].sort(([a], [b]) => a.length - b.length); // outer dirs first
  const lines = [];
  let n = 0;
  for (const [parent, fresh] of privatize) {
    // A private tmpfs in place of `parent` that carries every host entry (bind mounts, symlinks
    // copied) except `fresh`, which are new empty dirs: the host's `parent` is never written.
    const stage = join(stageDir, String(++n));
    lines.push(
      `stage=${shq(stage)}; parent=${shq(parent)}`,
      'mkdir -p "$stage"',
      `mount -t tmpfs -o mode=0755 ${shq(label)} "$stage"`,
      'chmod --reference="$parent" "$stage"',
      'for e in "$parent"/* "$parent"/.[!.]* "$parent"/..?*; do',
      '  [ -e "$e" ] || [ -L "$e" ] || continue',
      '  n=${e##*/}',
      `  case "$n" in ${[...fresh].map(shq).join('|')}) continue ;; esac`,
      '  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "$stage/$n"',
      '  elif [ -d "$e" ]; then mkdir "$stage/$n"; mount --rbind "$e" "$stage/$n"',
      '  else : >"$stage/$n"; mount --bind "$e" "$stage/$n"; fi',
      'done',
      ...[...fresh].map((f) => `mkdir -m 0755 "$stage"/${shq(f)}`),
      'mount --move "$stage" "$parent"',
    );
  }
  for (const p of tmpfs) lines.push(`mount -t tmpfs -o mode=0755 ${shq(label)} ${shq(p)}`);
  return lines;
}

/**
 * `path` as seen from a process whose root is `root` (e.g. `/proc/<pid>/root`), resolved
 * the way that process would: an absolute symlink on the way (Debian's `/var/run → /run`)
 * restarts from `root`, never from ours. The result is openable from the host.
 */
export function resolveUnder(root, path) {
  const todo = path.split('/').filter(Boolean);
  const done = [];
  for (let links = 0; todo.length;) {
    const c = todo.shift();
    if (c === '.') continue;
    if (c === '..') {
      done.pop();
      continue;
    }
    const here = join(root, ...done, c);
    let target;
    try {
      target = lstatSync(here).isSymbolicLink() ? readlinkSync(here) : undefined;
    } catch {
      target = undefined; // missing: keep the rest as given
    }
    if (target === undefined) {
      done.push(c);
      continue;
    }
    if (++links > 40) throw new Error(`too many symlinks resolving ${path} under ${root}`);
    if (target.startsWith('/')) done.length = 0;
    todo.unshift(...target.split('/').filter(Boolean));
  }
  return join(root, ...done);
}

/** Cgroup hierarchies mounted on this machine (v1 controllers, the named systemd one, v2). */
export function cgroupMounts() {
  const out = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const parts = line.split(' ');
    const sep = parts.indexOf('-');
    if (sep < 0) continue;
    const fstype = parts[sep + 1];
    if (fstype === 'cgroup' || fstype === 'cgroup2') out.push(parts[4].replace(/\\040/g, ' '));
  }
  return out;
}

/** rmdir a cgroup tree depth-first (cgroup dirs only hold kernel files: rmdir is the way). */
export function removeCgroupTree(path) {
  let entries = [];
  try {
    entries = readdirSync(path, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
  } catch (err) {
    if (err.code === 'ENOENT') return;
    throw err;
  }
  for (const e of entries) removeCgroupTree(join(path, e));
  try {
    rmdirSync(path);
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
}
