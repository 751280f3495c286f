// Finding a running pod's network namespace by scanning a proc root (spec §5.10, note 9), the way
// Istio's `podcgroupns_linux.go` does: walk the numeric `<pid>` dirs, read `<pid>/cgroup`, pull the
// pod UID out of the cgroup paths with the SPIRE regexes, skip processes in the host netns, and
// identify each candidate netns by the (dev, ino) of the nsfs inode behind `<pid>/ns/net`.
//
// Two steps. `scanPodNetns` is the walk: pure Node fs, synchronous, bounded (a cap on pids read and
// on bytes read per cgroup file); it only *identifies* candidates, and a pid that vanishes or
// cannot be read mid-scan (ENOENT, ESRCH, EACCES, …) is skipped, never an error. `openPodNetns`
// turns candidates into open handles, and only those are ever enrolled: the path is opened, the
// fd's (dev, ino) must be what the walk saw (the pid may have exited and been reused since), the
// netns must not be the node's (`<procRoot>/1/ns/net`, this process's own), and it must hold one
// of the pod's IPs (upstream's ownership rule: a cgroup ties a process to a pod, not to a netns; a
// process can visit another pod's netns).
import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { formatIp, parseIp } from '../net/ip.js';
import { isResourceExhaustion } from '../util/resource-errors.js';
import { NetnsRef } from './netns-ref.js';

/** Identity of a network namespace: the nsfs inode and its device. */
export interface NetnsId {
  dev: number;
  ino: number;
}

/** One candidate netns of a pod as the walk saw it (identity only: nothing is open). */
export interface PodNetns extends NetnsId {
  /** `<procRoot>/<pid>/ns/net` of the process that represents this netns for the pod. */
  path: string;
  pid: number;
  /** Field 22 of `<pid>/stat` (clock ticks since boot); `Infinity` when unreadable. */
  startTime: number;
}

export interface ProcScanResult {
  /**
   * Every netns the processes of each requested pod sit in, oldest first (by the earliest
   * `starttime` of the pod's processes in it, then the smallest pid). Keyed by the UID exactly as
   * the caller passed it; pods without any candidate are absent (and listed in `missing`).
   */
  candidates: Map<string, PodNetns[]>;
  /** Requested UIDs without a candidate, in the order given. */
  missing: string[];
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

// Out of fds or memory is not "this pid is gone": skipping would report the pod missing (and the
// caller would drop it); the scan fails and the caller retries.
function isSkippable(e: unknown): boolean {
  return typeof (e as NodeJS.ErrnoException)?.code === 'string' && !isResourceExhaustion(e);
}

function older(a: PodNetns, b: PodNetns): boolean {
  return a.startTime !== b.startTime ? a.startTime < b.startTime : a.pid < b.pid;
}

const byAge = (a: PodNetns, b: PodNetns) => (older(a, b) ? -1 : older(b, a) ? 1 : 0);

function positiveInt(name: string, v: number): number {
  if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`${name} must be a positive integer, got ${v}`);
  return v;
}

function hostNetnsOf(procRoot: string, given: NetnsId | undefined): NetnsId {
  const path = join(procRoot, '1', 'ns', 'net');
  try {
    return given ?? netnsId(path);
  } catch (e) {
    throw new Error(`cannot identify the host netns from ${path} (pass hostNetns): ${(e as Error).message}`, { cause: e });
  }
}

/**
 * Walks `procRoot` for the netns of each pod in `uids` (§5.10): pids in numeric order, processes
 * in the host netns skipped, for each pod every netns its processes sit in, represented by the
 * pod's oldest process there. Identities only: see `openPodNetns` for handles.
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
  const host = hostNetnsOf(procRoot, opts.hostNetns);

  const pids = readdirSync(procRoot)
    .filter((n) => /^[1-9]\d*$/.test(n))
    .map(Number)
    .sort((a, b) => a - b);
  const truncated = pids.length > maxPids;
  const result: ProcScanResult = { candidates: new Map(), missing: [], scanned: 0, skipped: 0, truncated };

  const buf = Buffer.allocUnsafe(maxBytes + 1);
  // uid key → netns "dev:ino" → oldest process in it
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
      if (!prev || older(c, prev)) perNs.set(nsKey, c);
    } catch (e) {
      if (!isSkippable(e)) throw e;
      result.skipped++; // vanished or unreadable: races are normal on a live /proc
    }
  }
  for (const u of requested) {
    const perNs = cands.get(uidKey(u));
    if (!perNs?.size) result.missing.push(u);
    else result.candidates.set(u, [...perNs.values()].sort(byAge));
  }
  return result;
}

/** A pod as `openPodNetns` needs it: the UID its processes' cgroups carry and the IPs its netns must hold. */
export interface PodIps {
  uid: string;
  ips: readonly string[];
}

/** Why a candidate netns was not given to a pod. */
export type NetnsRefusal =
  /** The path could not be opened (the process exited, or it is not a netns any more). */
  | 'gone'
  /** The path now leads to another netns than the walk saw (the pid exited and was reused). */
  | 'stale'
  /** The node's netns (`<procRoot>/1/ns/net`, `hostNetns`) or this process's own. */
  | 'host'
  /** The pod has no IPs yet: ownership cannot be proved (upstream: not on this scan). */
  | 'no-ips'
  /** The netns holds none of the pod's IPs (a process visiting another pod's netns). */
  | 'not-owner'
  /** Another pod of this call proved it first (both pods' IPs are in it). */
  | 'claimed'
  /** The netns's addresses could not be read. */
  | 'check-failed';

/** A pod's netns, open: `ref` holds one reference that belongs to the caller (release it once). */
export interface OpenPodNetns extends PodNetns {
  ref: NetnsRef;
}

export type ProcScanConflict =
  /** The pod's processes sit in several netns (sandbox re-created, or a visitor): the oldest one proved is used. */
  | { kind: 'multiple-netns'; uid: string; chosen: PodNetns; candidates: PodNetns[] }
  /** Processes of several pods sit in one netns: it is given to `owner` (the pod whose IP it holds), the others are refused. */
  | { kind: 'shared-netns'; dev: number; ino: number; owner: string; others: Array<{ uid: string; pid: number; reason: NetnsRefusal }> };

export interface OpenPodNetnsResult {
  /** Opened, identity-checked, never the node's, holding one of the pod's IPs. The caller owns each `ref`. */
  found: Map<string, OpenPodNetns>;
  /** Pods nothing was found for (no candidate, or every candidate refused), in the order given. */
  missing: string[];
  refused: Array<{ uid: string; candidate: PodNetns; reason: NetnsRefusal; error?: string }>;
  conflicts: ProcScanConflict[];
  scanned: number;
  skipped: number;
  truncated: boolean;
}

export interface OpenPodNetnsOptions extends ProcScanOptions {
  /**
   * A walk to reuse (each candidate is re-proved at open, so an older walk can never give a
   * wrong netns, only miss a new one). Default: a fresh `scanPodNetns` for these pods.
   */
  scan?: ProcScanResult;
}

/** Canonical text of an IP (IPv4-mapped IPv6 as IPv4), or undefined when it is not one. */
function ipKey(ip: unknown): string | undefined {
  if (typeof ip !== 'string') return undefined;
  try {
    const { bytes } = parseIp(ip);
    const mapped = bytes.length === 16 && bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
    return formatIp(mapped ? bytes.subarray(12) : bytes);
  } catch {
    return undefined;
  }
}

/**
 * Whether an interface in the netns carries one of `ips` (upstream's netnsContainsAnyPodIP). The
 * sockets it opens stay with the proof's reference: the caller's work on the netns uses them, and
 * its release lets them go (NetnsRef); a refused candidate's close takes them.
 */
async function holdsAnyIp(ref: NetnsRef, ips: ReadonlySet<string>): Promise<boolean> {
  const addrs = await (await ref.ns.netlink()).addrs.list();
  return addrs.some((a) => ips.has(ipKey(a.address) ?? ''));
}

/**
 * Finds, opens and proves the netns of each pod (§5.10 with upstream's ownership rule). The
 * candidates of all pods are tried oldest first; a candidate is accepted only if its path opens
 * to the very (dev, ino) the walk saw, is not the node's netns (read again now: `hostNetns`,
 * `<procRoot>/1/ns/net`, `/proc/self/ns/net`), and holds one of the pod's IPs; the first pod to
 * prove a netns owns it for this call. A refused candidate is closed at once and the pod's next
 * one is tried. Every `found[uid].ref` is the caller's to release, exactly once; nothing else
 * stays open.
 */
export async function openPodNetns(pods: Iterable<PodIps>, opts: OpenPodNetnsOptions = {}): Promise<OpenPodNetnsResult> {
  const procRoot = opts.procRoot ?? DEFAULT_PROC_ROOT;
  const list = [...pods];
  const scan = opts.scan ?? scanPodNetns(list.map((p) => p.uid), opts);
  const out: OpenPodNetnsResult = {
    found: new Map(), missing: [], refused: [], conflicts: [], scanned: scan.scanned, skipped: scan.skipped, truncated: scan.truncated,
  };
  const ipsOf = new Map(list.map((p) => [p.uid, new Set(p.ips.map(ipKey).filter((k): k is string => k !== undefined))]));
  const order: Array<{ uid: string; c: PodNetns }> = [];
  for (const { uid } of list) for (const c of scan.candidates.get(uid) ?? []) order.push({ uid, c });
  order.sort((a, b) => byAge(a.c, b.c) || (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0));

  const owners = new Map<string, string>(); // netns dev:ino → UID that proved it
  const refuse = (uid: string, c: PodNetns, reason: NetnsRefusal, error?: string) => {
    out.refused.push({ uid, candidate: c, reason, ...(error !== undefined ? { error } : {}) });
  };
  // The node's netns identities, read now (after the walk), once for every candidate.
  const nodeIds = nodeNetnsIds(procRoot, opts.hostNetns);
  const skipped = (uid: string, c: PodNetns) => out.found.has(uid) || owners.has(`${c.dev}:${c.ino}`) || ipsOf.get(uid)!.size === 0;
  // Proofs run PROVE_AHEAD candidates ahead of the decisions, which are still taken one by one in
  // `order` (each proof waits on a job thread for the netns's sockets: one at a time, the walk of
  // a restart's thousand pods would mostly wait). A proof never rejects: fatal errors are returned.
  const proofs = new Map<number, Promise<Proof>>();
  const ahead = (j: number) => {
    const o = order[j];
    if (o !== undefined && !proofs.has(j) && !skipped(o.uid, o.c)) proofs.set(j, prove(o.c, ipsOf.get(o.uid)!, nodeIds));
  };
  const drop = async (j: number) => {
    const p = proofs.get(j);
    proofs.delete(j);
    const r = p && await p;
    if (r && 'ref' in r) r.ref.release();
  };
  try {
    for (let i = 0; i < order.length; i++) {
      const { uid, c } = order[i]!;
      if (out.found.has(uid)) { await drop(i); continue; }
      if (owners.has(`${c.dev}:${c.ino}`)) { await drop(i); refuse(uid, c, 'claimed'); continue; }
      if (ipsOf.get(uid)!.size === 0) { refuse(uid, c, 'no-ips'); continue; }
      for (let j = i; j <= i + PROVE_AHEAD; j++) ahead(j);
      const r = await proofs.get(i)!;
      proofs.delete(i);
      if ('fatal' in r) throw r.fatal;
      if ('reason' in r) { refuse(uid, c, r.reason, r.error); continue; }
      owners.set(`${c.dev}:${c.ino}`, uid);
      out.found.set(uid, { ...c, ref: r.ref });
    }
  } catch (e) {
    for (const j of [...proofs.keys()]) await drop(j);
    for (const f of out.found.values()) f.ref.release();
    throw e;
  }

  for (const { uid } of list) {
    const f = out.found.get(uid);
    if (!f) {
      if (!out.missing.includes(uid)) out.missing.push(uid);
      continue;
    }
    const cands = scan.candidates.get(uid) ?? [];
    if (cands.length > 1) out.conflicts.push({ kind: 'multiple-netns', uid, chosen: stripRef(f), candidates: cands });
  }
  for (const [nsKey, owner] of owners) {
    const others = out.refused.filter((r) => `${r.candidate.dev}:${r.candidate.ino}` === nsKey && r.uid !== owner);
    if (!others.length) continue;
    const [dev, ino] = nsKey.split(':').map(Number) as [number, number];
    out.conflicts.push({ kind: 'shared-netns', dev, ino, owner, others: others.map((r) => ({ uid: r.uid, pid: r.candidate.pid, reason: r.reason })) });
  }
  return out;
}

function stripRef(f: OpenPodNetns): PodNetns {
  return { path: f.path, dev: f.dev, ino: f.ino, pid: f.pid, startTime: f.startTime };
}

/** How many candidates are proved ahead of the in-order decisions (each holds one netns fd meanwhile). */
const PROVE_AHEAD = 8;

/** A candidate proved: its netns, open (the caller's to keep or release); or why not; or an error no pod should be reported for. */
type Proof = { ref: NetnsRef } | { reason: NetnsRefusal; error?: string } | { fatal: unknown };

/**
 * Opens a candidate and proves it: the very (dev, ino) the walk saw, not the node's netns,
 * holding one of `ips`. A refused candidate is closed at once. Resource exhaustion is fatal
 * (not "gone": the pod would be reported missing).
 */
async function prove(c: PodNetns, ips: ReadonlySet<string>, nodeIds: readonly NetnsId[]): Promise<Proof> {
  let ref: NetnsRef;
  try {
    ref = NetnsRef.open(c.path);
  } catch (e) {
    return isResourceExhaustion(e) ? { fatal: e } : { reason: 'gone', error: (e as Error).message };
  }
  let keep = false;
  try {
    const { dev, ino } = ref.ns.id;
    if (dev !== c.dev || ino !== c.ino) return { reason: 'stale' };
    if (nodeIds.some((n) => n.dev === dev && n.ino === ino)) return { reason: 'host' };
    let owned: boolean;
    try {
      owned = await holdsAnyIp(ref, ips);
    } catch (e) {
      return isResourceExhaustion(e) ? { fatal: e } : { reason: 'check-failed', error: (e as Error).message };
    }
    if (!owned) return { reason: 'not-owner' };
    keep = true;
    return { ref };
  } finally {
    if (!keep) ref.release();
  }
}

/** The node's netns identities, read now: the given host identity, `<procRoot>/1/ns/net`, this process's own. */
function nodeNetnsIds(procRoot: string, host: NetnsId | undefined): NetnsId[] {
  const at = (p: string) => {
    try {
      return netnsId(p);
    } catch {
      return undefined;
    }
  };
  return [host, at(join(procRoot, '1', 'ns', 'net')), at('/proc/self/ns/net')].filter((x): x is NetnsId => x !== undefined);
}
