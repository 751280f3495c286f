// The kubelet's UID, which the nftables host probe rule matches (`meta skuid`): nft has no
// iptables `--socket-exists`, so the rule tells the kubelet's probes from other host traffic by
// the socket's owner. Found as upstream does (cni/pkg/nftables getKubeletUIDFromPath): a process
// under the host proc root whose comm is `kubelet` (or MicroK8s' `kubelite`) and one of whose
// argv words contains "kubelet" (any case); its real UID. Upstream refuses to program the host
// rule without one (retried with the rest of it, then the start fails); KUBELET_UID overrides.
//
// The proc root is read as hostile input: any local user can name a process `kubelet`
// (prctl PR_SET_NAME) and give it any argv, so
//  - entries are read bounded, through O_NOFOLLOW|O_NONBLOCK and only when regular files (a FIFO
//    or a link planted in a copied proc root never blocks or redirects the read);
//  - `status` must carry the same Name as `comm` (a pid reused between the reads is skipped) and
//    four decimal ids in range;
//  - candidates that disagree on the UID are refused (ERR_KUBELET_AMBIGUOUS) instead of taking the
//    first one as upstream does: a look-alike would otherwise get its connections SNATed to the
//    probe address (past ztunnel) and the real kubelet's probes would not.
import { closeSync, constants, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';

export type KubeletUidErrorCode =
  /** No process under the proc root is the kubelet. */
  | 'ERR_KUBELET_NOT_FOUND'
  /** Several look like the kubelet and their UIDs differ: set KUBELET_UID. */
  | 'ERR_KUBELET_AMBIGUOUS'
  /** The proc root itself cannot be listed. */
  | 'ERR_KUBELET_PROC_ROOT';

export class KubeletUidError extends Error {
  constructor(readonly code: KubeletUidErrorCode, readonly procRoot: string, message: string, opts?: { cause?: unknown }) {
    super(message, opts);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'KubeletUidError', enumerable: false });
  }
}

/** The names upstream looks for, in its order. */
export const KUBELET_NAMES = ['kubelet', 'kubelite'] as const;

export interface KubeletProcess {
  pid: number;
  name: (typeof KUBELET_NAMES)[number];
  /** Real UID (what upstream uses). */
  uid: number;
  /** Effective and filesystem UIDs: a socket's owner (skuid) is the creator's fsuid. */
  euid: number;
  fsuid: number;
}

export interface KubeletUid {
  uid: number;
  /** `setting`: KUBELET_UID (or the agent option); `process`: found under the proc root. */
  source: 'setting' | 'process';
  /** The processes it was read from (source `process`), lowest pid first. */
  processes: KubeletProcess[];
  /** One sentence each, for `warn` lines. */
  warnings: string[];
}

const COMM_MAX = 64;             // the kernel's comm is ≤ 15 bytes + "\n"
const CMDLINE_MAX = 64 << 10;    // enough to see the kubelet's own path or flags
const STATUS_MAX = 16 << 10;     // a real status is ~1.5 KiB
const UID_MAX = 0xfffffffe;      // (uid_t)-1 is "no uid"
const PID = /^[1-9][0-9]{0,9}$/;

/** Up to `max` bytes of a regular file, or undefined when it is gone, unreadable or not a regular file. */
function readSmall(path: string, max: number): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;  // exited (ENOENT/ESRCH), not ours to read (EACCES), a planted link (ELOOP)
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const buf = Buffer.alloc(max);
    let n = 0;
    while (n < max) {
      const r = readSync(fd, buf, n, max - n, null);
      if (r === 0) break;
      n += r;
    }
    return buf.subarray(0, n);
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

function uidOf(text: string): number | undefined {
  if (!/^(0|[1-9][0-9]{0,9})$/.test(text)) return undefined;
  const n = Number(text);
  return n <= UID_MAX ? n : undefined;
}

/** `Name:` and `Uid:` of a `<pid>/status`; undefined when either is missing or malformed. */
export function parseStatus(text: string): { name: string; uid: number; euid: number; fsuid: number } | undefined {
  let name: string | undefined;
  let ids: number[] | undefined;
  for (const line of text.split('\n')) {
    if (line.startsWith('Name:\t')) {
      if (name !== undefined) return undefined;  // twice: not the kernel's
      name = line.slice(6);
    } else if (line.startsWith('Uid:\t')) {
      if (ids !== undefined) return undefined;
      const parts = line.slice(5).split('\t').map(uidOf);
      if (parts.length !== 4 || parts.some((p) => p === undefined)) return undefined;
      ids = parts as number[];
    }
  }
  if (name === undefined || ids === undefined) return undefined;
  return { name, uid: ids[0]!, euid: ids[1]!, fsuid: ids[3]! };
}

/**
 * Every process under `procRoot` that is the kubelet by upstream's rules, lowest pid first.
 * Processes that exit or change mid-scan are skipped. Throws KubeletUidError
 * ERR_KUBELET_PROC_ROOT when the root cannot be listed.
 */
export function findKubeletProcesses(procRoot: string): KubeletProcess[] {
  let entries;
  try {
    entries = readdirSync(procRoot, { withFileTypes: true });
  } catch (err) {
    throw new KubeletUidError('ERR_KUBELET_PROC_ROOT', procRoot, `cannot list ${procRoot} to find the kubelet: ${(err as Error).message}`, { cause: err });
  }
  const pids = entries.filter((e) => e.isDirectory() && PID.test(e.name)).map((e) => Number(e.name)).sort((a, b) => a - b);
  const found: KubeletProcess[] = [];
  for (const pid of pids) {
    const dir = join(procRoot, String(pid));
    const comm = readSmall(join(dir, 'comm'), COMM_MAX)?.toString('utf8').replace(/\n$/, '');
    const name = KUBELET_NAMES.find((n) => n === comm);
    if (!name) continue;
    const status = readSmall(join(dir, 'status'), STATUS_MAX);
    const st = status && parseStatus(status.toString('utf8'));
    if (!st || st.name !== name) continue;
    const argv = readSmall(join(dir, 'cmdline'), CMDLINE_MAX)?.toString('utf8').split('\0') ?? [];
    if (!argv.some((a) => a.toLowerCase().includes('kubelet'))) continue;
    found.push({ pid, name, uid: st.uid, euid: st.euid, fsuid: st.fsuid });
  }
  return found;
}

/**
 * The UID the nftables host probe rule matches: `override` (KUBELET_UID) when given, else the
 * kubelet's real UID under `procRoot`. Throws KubeletUidError: ERR_KUBELET_NOT_FOUND,
 * ERR_KUBELET_AMBIGUOUS (look-alikes with other UIDs), ERR_KUBELET_PROC_ROOT.
 */
export function resolveKubeletUid(procRoot: string, override?: number | null): KubeletUid {
  if (override !== undefined && override !== null) {
    if (!Number.isInteger(override) || override < 0 || override > UID_MAX) throw new RangeError(`kubelet uid must be an integer 0–${UID_MAX}, not ${String(override)}`);
    return { uid: override, source: 'setting', processes: [], warnings: [] };
  }
  const found = findKubeletProcesses(procRoot);
  if (found.length === 0) {
    throw new KubeletUidError('ERR_KUBELET_NOT_FOUND', procRoot,
      `no kubelet (or kubelite) process under ${procRoot}: the nftables host probe rule matches the kubelet's UID; set KUBELET_UID if it runs elsewhere`);
  }
  const uids = [...new Set(found.map((p) => p.uid))];
  if (uids.length > 1) {
    const list = found.slice(0, 8).map((p) => `pid ${p.pid} uid ${p.uid}`).join(', ');
    throw new KubeletUidError('ERR_KUBELET_AMBIGUOUS', procRoot,
      `processes named like the kubelet under ${procRoot} run as different UIDs (${list}): set KUBELET_UID to the kubelet's`);
  }
  const warnings: string[] = [];
  const odd = found.find((p) => p.euid !== p.uid || p.fsuid !== p.uid);
  if (odd) warnings.push(`kubelet pid ${odd.pid} has real UID ${odd.uid} but effective/fs UID ${odd.euid}/${odd.fsuid}; the host probe rule matches the real UID, as upstream`);
  return { uid: uids[0]!, source: 'process', processes: found, warnings };
}
