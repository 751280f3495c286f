// What a demo run leaves on the machine when it dies without tearing down
// (kill -9, power loss, --keep): network namespaces under /run/netns (each a
// bind mount of nsfs), its run directory in the temp dir (ZDS socket and the
// owner marker) and, with --cni, the host-local IPAM directory. Everything a
// run makes carries its prefix; nothing else is ever touched.
//
// Liveness: a run writes `podwire-demo.json` (pid and the kernel's start time
// of that pid) into its run directory before it creates anything, and removes
// the directory last. A prefix whose marker names a live process is in use and
// is skipped; so is a name that embeds the pid of a live process
// (`pwdemo-<pid>-…`, the test suites' `pwt-<pid>-…`) unless a dead run's marker
// claims it.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Netns, NETNS_RUN_DIR } from '../net/netns/netns.js';
import { writeFileAtomicSync } from '../util/atomic-write.js';

/** The prefix of every default demo run (`pwdemo-<pid>-`), and `podwire cleanup`'s default. */
export const DEMO_PREFIX_FAMILY = 'pwdemo-';
export const MARKER_FILE = 'podwire-demo.json';
export const IPAM_SUFFIX = 'cni-ipam';
const PREFIX_RE = /^[a-z0-9][a-z0-9-]{1,30}$/;

/** A prefix safe to match names with: lowercase letters, digits and -, 2..31 characters. */
export function isSafePrefix(prefix: string): boolean {
  return PREFIX_RE.test(prefix);
}

export const defaultDemoPrefix = (pid = process.pid) => `${DEMO_PREFIX_FAMILY}${pid}-`;

/** The host-local IPAM directory of a run with this prefix. */
export const ipamDir = (prefix: string, dir = tmpdir()) => join(dir, `${prefix}${IPAM_SUFFIX}`);

interface Marker {
  tool: 'podwire demo';
  pid: number;
  /** /proc/<pid>/stat field 22: tells a live run from a reused pid. */
  startTime: string | undefined;
  prefix: string;
}

function procStartTime(pid: number): { state: string; startTime: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, startTime: fields[19]! };
  } catch {
    return undefined;
  }
}

/** Whether `pid` is a running process (and, given a start time, the same one). */
export function processAlive(pid: number, startTime?: string): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const p = procStartTime(pid);
  if (p === undefined || p.state === 'Z' || p.state === 'X') return false;
  return startTime === undefined || p.startTime === startTime;
}

/** Creates a run's directory in the temp dir (`<prefix>XXXXXX`) with its owner marker in it. */
export function createRunDir(prefix: string, dir = tmpdir()): string {
  const runDir = mkdtempSync(join(dir, prefix));
  const marker: Marker = { tool: 'podwire demo', pid: process.pid, startTime: procStartTime(process.pid)?.startTime, prefix };
  // Atomic: a concurrent `podwire cleanup` never reads half a marker (and takes the run for unmarked).
  writeFileAtomicSync(join(runDir, MARKER_FILE), `${JSON.stringify(marker)}\n`, { mode: 0o644, mkdir: false });
  return runDir;
}

function readMarker(path: string): Marker | undefined {
  try {
    const m = JSON.parse(readFileSync(path, 'utf8')) as Partial<Marker>;
    if (m.tool !== 'podwire demo' || typeof m.pid !== 'number' || typeof m.prefix !== 'string') return undefined;
    return { tool: m.tool, pid: m.pid, startTime: typeof m.startTime === 'string' ? m.startTime : undefined, prefix: m.prefix };
  } catch {
    return undefined;
  }
}

/** Listening unix sockets by path (this netns's /proc/net/unix). */
function boundUnixPaths(): Set<string> {
  try {
    return new Set(readFileSync('/proc/net/unix', 'utf8').split('\n').slice(1)
      .map((l) => l.trim().split(/\s+/)[7]).filter((p): p is string => p !== undefined && p.startsWith('/')));
  } catch {
    return new Set();
  }
}

const isDir = (p: string) => {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
};

const list = (dir: string) => {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
};

export interface Leftovers {
  prefix: string;
  /** netns names under the netns dir to remove. */
  netns: string[];
  /** Absolute paths of directories to remove (IPAM dirs, then run dirs). */
  dirs: string[];
  /** Runs with the prefix that are still going: their things are left alone. */
  live: Array<{ pid: number; prefix: string }>;
  /** Things with the prefix left alone, and why. */
  skipped: Array<{ what: string; why: string }>;
}

export interface LeftoverOptions {
  netnsDir?: string;
  tmpDir?: string;
}

/** Finds what runs with `prefix` left behind (nothing is changed). */
export function findLeftovers(prefix: string, opts: LeftoverOptions = {}): Leftovers {
  if (!isSafePrefix(prefix)) throw new RangeError(`unsafe prefix ${JSON.stringify(prefix)} (want ${PREFIX_RE.source})`);
  const netnsDir = opts.netnsDir ?? NETNS_RUN_DIR;
  const tmp = opts.tmpDir ?? tmpdir();
  const out: Leftovers = { prefix, netns: [], dirs: [], live: [], skipped: [] };
  const runs: Array<{ prefix: string; pid: number; live: boolean }> = [];
  const runDirs: string[] = [];
  const ipamDirs: string[] = [];
  const sockets = boundUnixPaths();
  // Every run's marker counts, not only those whose directory carries the prefix: a live run
  // with a shorter prefix (pwt-1-) still owns the names this prefix (pwt-1-node) matches.
  for (const name of list(tmp)) {
    const path = join(tmp, name);
    if (!isDir(path)) continue;
    const marker = readMarker(join(path, MARKER_FILE));
    if (marker) {
      const live = processAlive(marker.pid, marker.startTime);
      runs.push({ prefix: marker.prefix, pid: marker.pid, live });
      if (live) out.live.push({ pid: marker.pid, prefix: marker.prefix });
      else {
        // Its directory goes only when the whole run is in scope.
        if (name.startsWith(prefix) && marker.prefix.startsWith(prefix)) runDirs.push(path);
      }
      continue;
    }
    if (!name.startsWith(prefix)) continue;
    if (name.endsWith(IPAM_SUFFIX)) {
      ipamDirs.push(path);
    } else if (/^pwdemo-[A-Za-z0-9]{6}$/.test(name) && list(path).every((f) => f === 'ztunnel.sock')) {
      // An earlier version's run dir (no marker): only its ZDS socket, and nobody listening on it.
      if (sockets.has(join(path, 'ztunnel.sock'))) out.skipped.push({ what: path, why: 'its ZDS socket is in use' });
      else runDirs.push(path);
    }
  }
  // The longest matching run prefix decides: a live run's things stay, a dead run's go.
  const owner = (name: string) => {
    let best: (typeof runs)[number] | undefined;
    for (const r of runs) if (name.startsWith(r.prefix) && (!best || r.prefix.length > best.prefix.length || (r.prefix.length === best.prefix.length && r.live))) best = r;
    return best;
  };
  const decide = (name: string, what: string): boolean => {
    const o = owner(name);
    if (o?.live) {
      out.skipped.push({ what, why: `demo pid ${o.pid} is still running` });
      return false;
    }
    if (o) return true;
    const pid = /^[a-z]+(?:-[a-z]+)*-(\d+)/.exec(name)?.[1];  // as test/helpers/global-setup.ts reads pwt- names
    if (pid !== undefined && processAlive(Number(pid))) {
      out.skipped.push({ what, why: `its name carries the pid of running process ${pid}` });
      return false;
    }
    return true;
  };
  for (const name of Netns.list({ dir: netnsDir }).filter((n) => n.startsWith(prefix))) if (decide(name, `netns ${name}`)) out.netns.push(name);
  for (const path of ipamDirs) if (decide(path.slice(tmp.length + 1), path)) out.dirs.push(path);
  out.dirs.push(...runDirs);
  return out;
}

export interface CleanupResult {
  removed: string[];
  failed: Array<{ what: string; error: Error & { code?: string } }>;
}

/** Removes what findLeftovers found: namespaces (unmount + unlink, as `ip netns del`), then directories. */
export async function removeLeftovers(l: Leftovers, opts: LeftoverOptions = {}): Promise<CleanupResult> {
  const r: CleanupResult = { removed: [], failed: [] };
  const netnsDir = opts.netnsDir ?? NETNS_RUN_DIR;
  for (const name of l.netns) {
    try {
      await Netns.remove(name, { dir: netnsDir });
      r.removed.push(`netns ${name}`);
    } catch (err) {
      if ((err as { code?: string }).code === 'ENOENT') continue;  // gone meanwhile
      r.failed.push({ what: `netns ${name}`, error: err as Error });
    }
  }
  for (const dir of l.dirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
      r.removed.push(`dir ${dir}`);
    } catch (err) {
      r.failed.push({ what: `dir ${dir}`, error: err as Error });
    }
  }
  return r;
}

/** The netns names and IPAM dir a run with exactly this prefix would create that already exist. */
export function collisions(prefix: string, opts: LeftoverOptions = {}): string[] {
  const names = Netns.list({ dir: opts.netnsDir }).filter((n) => n.startsWith(prefix) && /^(?:node|ext|pod-\d+)$/.test(n.slice(prefix.length)));
  const ipam = ipamDir(prefix, opts.tmpDir);
  return [...names.map((n) => `netns ${n}`), ...(isDir(ipam) ? [`dir ${ipam}`] : [])];
}
