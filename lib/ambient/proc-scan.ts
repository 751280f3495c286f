// Finding a running pod's network namespace by scanning a proc root (spec §5.10, note 9), the way
// Istio's `podcgroupns_linux.go` does: walk the numeric `<pid>` dirs, read `<pid>/cgroup`, pull the
// pod UID out of the cgroup paths with the SPIRE regexes, skip processes in the host netns, and
// identify each candidate netns by the (dev, ino) of the nsfs inode behind `<pid>/ns/net`.
//
// Pure Node fs, synchronous, bounded (a cap on pids read and on bytes read per cgroup file).
// A pid that vanishes or cannot be read mid-scan (ENOENT, ESRCH, EACCES, …) is skipped, never an
// error. Nothing here opens or enters a netns: the caller opens `path` and should re-check that
// the fd's inode still equals `ino` (the process may have exited between scan and open).
//
// Not here: upstream's ownership check (enter the netns, require one of the pod's IPs) needs the
// native addon; pass `verify` to plug it in. Without it, a netns visited by a process of another
// pod is attributed by starttime (the sandbox's own processes started first), see `scanPodNetns`.
import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Identity of a network namespace: the nsfs inode and its device. */
export interface NetnsId {
  dev: number;
  ino: number;
}

/** One pod's netns as found by the scan. */
export interface PodNetns extends NetnsId {
  /** `<procRoot>/<pid>/ns/net` of the chosen process. */
  path: string;
  pid: number;
  /** Field 22 of `<pid>/stat` (clock ticks since boot); `Infinity` when unreadable. */
  startTime: number;
}

export type ProcScanConflict =
  /** Processes of one pod sit in different netns (sandbox re-created, or a visitor): one is chosen. */
  | { kind: 'multiple-netns'; uid: string; chosen: PodNetns; candidates: PodNetns[] }
  /** Processes of several pods sit in one netns: it is given to `owner`, the others lose it. */
  | { kind: 'shared-netns'; dev: number; ino: number; owner: string; others: Array<{ uid: string; pid: number }> };

export interface ProcScanResult {
  /** Keyed by the UID exactly as the caller passed it. */
  found: Map<string, PodNetns>;
  /** Requested UIDs without a netns, in the order given. */
  missing: string[];
  conflicts: ProcScanConflict[];
  /** Numeric pid dirs examined. */
  scanned: number;
  /** Pid dirs skipped because they vanished or could not be read. */
  skipped: number;
  /** True when `maxPids` stopped the walk before every pid dir was read. */
  truncated: boolean;
}

export interface ProcScanOptions {
  /** Default `/host/proc` (the agent's hostPath mount of the node's /proc). */
  procRoot?: string;
  /** The host netns; default: the identity of `<procRoot>/1/ns/net`. */
  hostNetns?: NetnsId;
  /** At most this many pid dirs are read (lowest pids first). Default 65536. */
  maxPids?: number;
  /** At most this many bytes of each `<pid>/cgroup` are read. Default 64 KiB. */
  maxCgroupBytes?: number;
  /** Optional acceptance check per candidate (upstream: the netns holds one of the pod's IPs). */
  verify?: (uid: string, candidate: PodNetns) => boolean;
}

export const DEFAULT_PROC_ROOT = '/host/proc';
export const DEFAULT_MAX_PIDS = 65536;
export const DEFAULT_MAX_CGROUP_BYTES = 64 * 1024;

// RE2's ASCII classes, spelled for JS: [[:punct:]], [[:^punct:]], [[:xdigit:]].
const P = '!-\\/:-@\\[-`{-~';
const PUNCT = `[${P}]`;
const NOPUNCT = `[^${P}]`;
const X = '[0-9A-Fa-f]';
// SPIRE's kube pods regex, as upstream uses it (§5.10 step 3).
const KUBE_PODS_RE = new RegExp(
  `${PUNCT}pod(${X}{8}${PUNCT}?${X}{4}${PUNCT}?${X}{4}${PUNCT}?${X}{4}${PUNCT}?${X}{12})${PUNCT}` +
    `(?:${NOPUNCT}+${PUNCT})*(${NOPUNCT}+)$`,
);
// The cri-o / kubeedge form without a pod UID (`0::/../crio-<id>.scope`).
const CRIO_RE = new RegExp(`${PUNCT}crio${PUNCT}(${NOPUNCT}+)$`);
const PUNCT_G = new RegExp(PUNCT, 'g');

/** What one cgroup path says about its process. */
export interface CgroupMatch {
  /** Canonical UID (punctuation → `-`, lower case), or `undefined` for the cri-o form without one. */
  podUid?: string;
  containerId: string;
}

/**
 * Matches one cgroup path (the third field of a `/proc/<pid>/cgroup` line), e.g.
 * `/kubepods/burstable/pod<uid>/<cid>`,
 * `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<cid>.scope`,
 * `/kubepods-besteffort-pod<uid_>.slice:cri-containerd:<cid>` (containerd's systemd form in v1),
 * `…/docker-<cid>.scope`, `…/crio-<cid>.scope`, `/docker/<id>/kubepods/…` (kind), `/../../pod<uid>/<cid>`.
 * Returns `undefined` for anything else (system.slice, user.slice, `/`).
 */
export function matchCgroupPath(path: string): CgroupMatch | undefined {
  const p = path.endsWith('.scope') ? path.slice(0, -'.scope'.length) : path;
  const m = KUBE_PODS_RE.exec(p);
  // Spec: "both matching → no match". Read literally that rejects every systemd cri-o path
  // (`…-pod<uid>.slice/crio-<cid>.scope` matches both), which cannot be the intent: the cri-o
  // regex is the fallback for paths *without* a pod UID, so a pod UID match wins.
  if (m) return { podUid: canonicalPodUid(m[1]!), containerId: m[2]! };
  const c = CRIO_RE.exec(p);
  if (c) return { containerId: c[1]! };
  return undefined;
}

/** Upstream's canonicalisation: every punctuation char → `-` (systemd escapes `-` as `_`); lower case. */
export function canonicalPodUid(uid: string): string {
  return uid.replace(PUNCT_G, '-').toLowerCase();
}

/** Comparison key for a UID: its hex digits, lower case (the cgroup form may omit the dashes). */
function uidKey(uid: string): string {
  return uid.replace(/[^0-9A-Fa-f]/g, '').toLowerCase();
}

export type CgroupParse =
  | { ok: true; podUid?: string; containerId?: string }
  | { ok: false; reason: 'conflicting-pod-uid' | 'conflicting-container-id' };

/**
 * Parses a whole `<pid>/cgroup` file (`hierarchy:controllers:path` per line; the path may itself
 * contain `:`). Lines that match nothing are ignored; different pod UIDs or container IDs on
 * different lines make the process unattributable (upstream: error, skip the process).
 */
export function parseCgroupFile(text: string): CgroupParse {
  let podUid: string | undefined;
  let containerId: string | undefined;
  for (const line of text.split('\n')) {
    const a = line.indexOf(':');
    const b = a < 0 ? -1 : line.indexOf(':', a + 1);
    if (b < 0) continue;
    const m = matchCgroupPath(line.slice(b + 1));
    if (!m) continue;
    if (m.podUid !== undefined) {
      if (podUid !== undefined && podUid !== m.podUid) return { ok: false, reason: 'conflicting-pod-uid' };
      podUid = m.podUid;
    }
    if (containerId !== undefined && containerId !== m.containerId) return { ok: false, reason: 'conflicting-container-id' };
    containerId = m.containerId;
  }
  return { ok: true, podUid, containerId };
}

/**
 * `starttime` from a `<pid>/stat` line: field 22, i.e. the 20th field after the *last* `)`
 * (`comm` may contain spaces and parentheses). `undefined` when malformed.
 */
export function parseStartTime(stat: string): number | undefined {
  const close = stat.lastIndexOf(')');
  if (close < 0) return undefined;
  const fields = stat.slice(close + 1).trim().split(/\s+/);
  const v = fields[19];
  if (v === undefined || !/^\d+$/.test(v)) return undefined;
  return Number(v);
}

function netnsId(path: string): NetnsId {
  const st = statSync(path); // follows the magic link (or a symlink in a fake root) to the nsfs inode
  return { dev: st.dev, ino: st.ino };
}

/**
 * Reads at most `max` bytes into `buf` (max + 1 long, reused across one scan: a fresh
 * zero-filled 64 KiB per pid made a 1000-pid scan allocate 64 MB); a cut-off last line is
 * dropped so it can never half-match. Only the bytes read are looked at.
 */
function readCapped(path: string, max: number, buf: Buffer): string {
  const fd = openSync(path, 'r');
  try {
    let n = 0;
    while (n <= max) {
      const r = readSync(fd, buf, n, max + 1 - n, null);
      if (r === 0) break;
      n += r;
    }
    if (n <= max) return buf.toString('utf8', 0, n);
    const text = buf.toString('utf8', 0, max);
    const nl = text.lastIndexOf('\n');
    return nl < 0 ? '' : text.slice(0, nl + 1);
  } finally {
    closeSync(fd);
  }
}

function isSkippable(e: unknown): boolean {
  return typeof (e as NodeJS.ErrnoException)?.code === 'string';
}

function better(a: PodNetns, b: PodNetns): boolean {
  return a.startTime !== b.startTime ? a.startTime < b.startTime : a.pid < b.pid;
}

function positiveInt(name: string, v: number): number {
  if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`${name} must be a positive integer, got ${v}`);
  return v;
}

/**
 * Finds the netns of each pod in `uids` under `procRoot` (§5.10).
 *
 * Deterministic: pids are walked in numeric order; for one pod the process with the smallest
 * `starttime` (then the smallest pid) represents a netns; if one pod's processes sit in several
 * netns, the one whose earliest process started first is chosen and a `multiple-netns` conflict
 * is reported. Upstream skips a netns "already claimed in this scan" (first come by pid order,
 * after the IP ownership check); without that check here, a netns that processes of several pods
 * sit in goes to the pod whose process started first (the sandbox precedes any visitor), and a
 * `shared-netns` conflict is reported; the other pods fall back to their other netns, if any.
 */
export function scanPodNetns(uids: Iterable<string>, opts: ProcScanOptions = {}): ProcScanResult {
  const procRoot = opts.procRoot ?? DEFAULT_PROC_ROOT;
  const maxPids = positiveInt('maxPids', opts.maxPids ?? DEFAULT_MAX_PIDS);
  const maxBytes = positiveInt('maxCgroupBytes', opts.maxCgroupBytes ?? DEFAULT_MAX_CGROUP_BYTES);
  const requested = [...uids];
  const byKey = new Map<string, string[]>(); // uid key → UIDs as passed
  for (const u of requested) {
    const k = uidKey(u);
    if (k.length !== 32) throw new TypeError(`not a pod UID: ${JSON.stringify(u)}`);
    byKey.set(k, [...(byKey.get(k) ?? []), u]);
  }
  let host: NetnsId;
  try {
    host = opts.hostNetns ?? netnsId(join(procRoot, '1', 'ns', 'net'));
  } catch (e) {
    throw new Error(`cannot identify the host netns from ${join(procRoot, '1', 'ns', 'net')} (pass hostNetns): ${(e as Error).message}`, { cause: e });
  }

  const pids = readdirSync(procRoot)
    .filter((n) => /^[1-9]\d*$/.test(n))
    .map(Number)
    .sort((a, b) => a - b);
  const truncated = pids.length > maxPids;
  const result: ProcScanResult = { found: new Map(), missing: [], conflicts: [], scanned: 0, skipped: 0, truncated };

  const buf = Buffer.allocUnsafe(maxBytes + 1);
  // uid key → netns "dev:ino" → best process in it
  const cands = new Map<string, Map<string, PodNetns>>();
  for (const pid of pids.slice(0, maxPids)) {
    result.scanned++;
    const dir = join(procRoot, String(pid));
    try {
      const path = join(dir, 'ns', 'net');
      const id = netnsId(path);
      if (id.dev === host.dev && id.ino === host.ino) continue; // hostNetwork pods, node daemons
      const cg = parseCgroupFile(readCapped(join(dir, 'cgroup'), maxBytes, buf));
      if (!cg.ok || cg.podUid === undefined) continue;
      const key = uidKey(cg.podUid);
      if (!byKey.has(key)) continue;
      let startTime = Infinity;
      try {
        startTime = parseStartTime(readFileSync(join(dir, 'stat'), 'utf8')) ?? Infinity;
      } catch (e) {
        if (!isSkippable(e)) throw e;
      }
      const c: PodNetns = { path, dev: id.dev, ino: id.ino, pid, startTime };
      let perNs = cands.get(key);
      if (!perNs) cands.set(key, (perNs = new Map()));
      const nsKey = `${id.dev}:${id.ino}`;
      const prev = perNs.get(nsKey);
      if (!prev || better(c, prev)) perNs.set(nsKey, c);
    } catch (e) {
      if (!isSkippable(e)) throw e;
      result.skipped++; // vanished or unreadable: races are normal on a live /proc
    }
  }

  // Optional ownership check, then netns shared by several pods → earliest process owns it.
  const owner = new Map<string, { key: string; c: PodNetns; others: Array<{ key: string; c: PodNetns }> }>();
  for (const [key, perNs] of [...cands].sort(([a], [b]) => (a < b ? -1 : 1))) {
    for (const [nsKey, c] of perNs) {
      const uid = byKey.get(key)![0]!;
      if (opts.verify && !opts.verify(uid, c)) {
        perNs.delete(nsKey);
        continue;
      }
      const o = owner.get(nsKey);
      if (!o) owner.set(nsKey, { key, c, others: [] });
      else if (better(c, o.c)) owner.set(nsKey, { key, c, others: [...o.others, { key: o.key, c: o.c }] });
      else o.others.push({ key, c });
    }
  }
  for (const [nsKey, o] of owner) {
    if (!o.others.length) continue;
    for (const other of o.others) cands.get(other.key)!.delete(nsKey);
    result.conflicts.push({
      kind: 'shared-netns', dev: o.c.dev, ino: o.c.ino, owner: byKey.get(o.key)![0]!,
      others: o.others.map((x) => ({ uid: byKey.get(x.key)![0]!, pid: x.c.pid })),
    });
  }

  for (const u of requested) {
    const perNs = cands.get(uidKey(u));
    const list = perNs ? [...perNs.values()].sort((a, b) => (better(a, b) ? -1 : better(b, a) ? 1 : 0)) : [];
    if (!list.length) {
      result.missing.push(u);
      continue;
    }
    result.found.set(u, list[0]!);
    if (list.length > 1 && byKey.get(uidKey(u))![0] === u) {
      result.conflicts.push({ kind: 'multiple-netns', uid: u, chosen: list[0]!, candidates: list });
    }
  }
  return result;
}
