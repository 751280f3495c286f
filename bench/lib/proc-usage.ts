// A process' CPU and memory as the kernel counts them (/proc/<pid>/stat, /proc/<pid>/status),
// for a benchmark watching a process it did not start (the agent in its DaemonSet pod).
import { readFileSync, readdirSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ; 100 on every Linux port in use). */
const USER_HZ = 100;

/** utime + stime of `pid` in seconds (its threads included). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / USER_HZ; // fields 14 and 15
}

/**
 * Resident bytes of one named mapping of `pid` (`[heap]`: glibc's main arena, where the JS thread's
 * mallocs live), from /proc/<pid>/smaps; 0 when it has none.
 */
export function mappingRssBytes(pid: number | 'self', name: string): number {
  const smaps = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  const at = smaps.indexOf(` ${name}\n`);
  return at < 0 ? 0 : Number(/\nRss:\s+(\d+) kB/.exec(smaps.slice(at))?.[1] ?? 0) * 1024;
}

/** VmRSS of `pid` in KiB. */
export function rssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]);
}

/** Host pids whose cgroup path names pod `uid` (the kubelet's `pod<uid>` cgroup, either spelling). */
export function findPodPids(uid: string): number[] {
  const marks = [`/pod${uid}/`, `/pod${uid.replace(/-/g, '_')}/`];
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const cg = readFileSync(`/proc/${e}/cgroup`, 'utf8');
      if (marks.some((m) => cg.includes(m))) out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out.sort((a, b) => a - b);
}

export interface AgentUsage { cpuS: number; wallS: number; rssStartKiB: number; rssMaxKiB: number; rssMeanKiB: number; samples: number }

/** Samples one process every `everyMs` between start() and stop(). */
export class AgentSampler {
  #timer: NodeJS.Timeout | undefined;
  #pid = 0;
  #t0 = 0;
  #cpu0 = 0;
  #rss: number[] = [];

  constructor(private readonly everyMs: number) {}

  start(pid: number): void {
    this.stop();
    this.#pid = pid;
    this.#t0 = performance.now();
    this.#cpu0 = cpuSeconds(pid);
    this.#rss = [rssKiB(pid)];
    this.#timer = setInterval(() => {
      try {
        this.#rss.push(rssKiB(pid));
      } catch {
        // the process went: stop() reports what was seen
      }
    }, this.everyMs);
  }

  /** The usage since start(); zeros when not started. Throws if the process is gone (a restart would spoil the figures). */
  stop(): AgentUsage {
    if (!this.#timer) return { cpuS: 0, wallS: 0, rssStartKiB: 0, rssMaxKiB: 0, rssMeanKiB: 0, samples: 0 };
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#rss.push(rssKiB(this.#pid));
    const rss = this.#rss;
    return {
      cpuS: cpuSeconds(this.#pid) - this.#cpu0, wallS: (performance.now() - this.#t0) / 1000,
      rssStartKiB: rss[0]!, rssMaxKiB: Math.max(...rss), rssMeanKiB: rss.reduce((a, b) => a + b, 0) / rss.length, samples: rss.length,
    };
  }
}
