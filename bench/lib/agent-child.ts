// The agent process of `bench/agent.ts`: one agent per process, so its RSS is the agent's alone
// and every restart is a fresh process. This entry imports what an agent imports and little else
// (the bench's own modules — node building, the ztunnel peer, the report — stay in the parent), so
// start-up and memory are the agent's; the Istio-style agent's parts load only in that mode.
// The parent forks it with the spec as argv[2], and drives it over IPC.
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { Agent } from '../../lib/agent/agent.js';
import { parseAgentConfig, type AgentConfig } from '../../lib/agent/config.js';
import type { DriftRound } from '../../lib/agent/drift-check.js';
import type { SnapshotRestore } from '../../lib/agent/snapshot.js';
import { KubeClient } from '../../lib/kube/client.js';
import { loadKubeconfig } from '../../lib/kube/config.js';
import { nativeHeapStats } from '../../lib/net/heap.js';
import { createLogging, type Logging } from '../../lib/util/log.js';
import { mappingRssBytes } from './proc-usage.js';

/** Bytes → MiB, one decimal (upstream's agent is measured in the same unit: bench/lib/istio-agent.ts). */
const mb = (b: number) => Math.round(b / 104857.6) / 10;
const ms1 = (x: number) => Math.round(x * 10) / 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ChildSpec {
  mode: 'podwire' | 'istio';
  env: Record<string, string>;
  kubeconfig: string;
}

export interface SnapshotSummary {
  pods: number;
  repaired: number;
  failed: number;
  pruned: number;
  probeEntries: number;
  complete: boolean;
  scanMissing: number;
  durationMs: number;
}

export interface ReadyMsg {
  type: 'ready';
  /** Agent.start() (or the Istio-style start) until ready, ms. */
  startMs: number;
  /** ms after start() began: informers synced, snapshot restored. */
  marks: Record<string, number>;
  /** ms since the process started (Node boot + imports + start). */
  uptimeMs: number;
  /** CPU time (user + system, every thread: GC and job threads included) the start took, ms: less moved by other load than wall time. */
  cpuMs: number;
  snapshot: SnapshotSummary | undefined;
  enrolled: number;
}

export interface MemSample {
  rssMb: number;
  peakRssMb: number;
  /** RSS backed by files (the node binary's text, shared libraries, the addon). */
  rssFileMb: number;
  /** Anonymous RSS: the V8 heap (heapTotal), malloc's brk heap, thread arenas and stacks. */
  rssAnonMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  /** The `[heap]` mapping (malloc's main arena: native allocations of the JS thread). */
  mallocHeapMb: number;
  /** Anonymous RSS that is neither the V8 heap nor `[heap]`: malloc's thread arenas (native job threads), stacks, V8 code. */
  otherAnonMb: number;
  externalMb: number;
  /** The C allocator's totals over all arenas (mallinfo2): in use and held free (resident or not). */
  mallocInUseMb?: number;
  mallocFreeMb?: number;
  threads: number;
  gc: boolean;
}

export interface RunningAgent {
  startMs: number;
  marks: Record<string, number>;
  snapshot: SnapshotRestore | undefined;
  enrolled(): number;
  /** Every cached pod acknowledged by the connected ztunnel. */
  zdsKnowsAll(): boolean;
  drift(): Promise<DriftRound | undefined>;
  /** Istio-style only: mean ms per rules apply / verify. */
  stats(): Record<string, unknown>;
  stop(cleanup: boolean): Promise<void>;
}

function memSample(): MemSample {
  global.gc?.();
  global.gc?.();
  const m = process.memoryUsage();
  const status = readFileSync('/proc/self/status', 'utf8');
  const field = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? NaN);
  const kb = (k: string) => field(k) * 1024;
  const malloc = nativeHeapStats();
  const mallocHeap = mappingRssBytes('self', '[heap]');
  return {
    rssMb: mb(m.rss), peakRssMb: mb(kb('VmHWM')), rssFileMb: mb(kb('RssFile')), rssAnonMb: mb(kb('RssAnon')),
    heapUsedMb: mb(m.heapUsed), heapTotalMb: mb(m.heapTotal), mallocHeapMb: mb(mallocHeap),
    otherAnonMb: mb(kb('RssAnon') - m.heapTotal - mallocHeap), externalMb: mb(m.external),
    ...(malloc ? { mallocInUseMb: mb(malloc.inUseBytes), mallocFreeMb: mb(malloc.freeBytes) } : {}),
    threads: field('Threads'), gc: typeof global.gc === 'function',
  };
}

async function podwireAgent(config: AgentConfig, client: KubeClient, logging: Logging): Promise<RunningAgent> {
  const agent = new Agent({ config, client, logging, hostRuleRetryMs: 100 });
  const marks: Record<string, number> = {};
  const t0 = performance.now();
  const set = agent.readiness.set.bind(agent.readiness);
  agent.readiness.set = (c, v = true) => {
    if (v) marks[c] = ms1(performance.now() - t0);
    set(c, v);
  };
  // BENCH_AGENT_CPU_PROFILE=<dir>: a CPU profile of start() alone (the process's boot and what follows
  // ready left out); BENCH_AGENT_HEAP_PROFILE=<dir>: what start() allocated, by stack (sampled, collected
  // objects included: what the young generation had to scavenge).
  const cpuDir = process.env.BENCH_AGENT_CPU_PROFILE;
  const heapDir = process.env.BENCH_AGENT_HEAP_PROFILE;
  const profiler = cpuDir || heapDir ? new Session() : undefined;
  if (profiler) {
    profiler.connect();
    if (cpuDir) {
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: 200 });
      await profiler.post('Profiler.start');
    } else {
      await profiler.post('HeapProfiler.enable');
      await profiler.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    }
  }
  await agent.start();
  const startMs = performance.now() - t0;
  if (profiler) {
    const profile = cpuDir ? (await profiler.post('Profiler.stop')).profile : (await profiler.post('HeapProfiler.stopSampling')).profile;
    writeFileSync(join((cpuDir ?? heapDir)!, `start-${process.pid}.${cpuDir ? 'cpuprofile' : 'heapprofile'}`), JSON.stringify(profile));
    profiler.disconnect();
  }
  return {
    startMs, marks, snapshot: agent.snapshot,
    enrolled: () => agent.enrolledCount(),
    zdsKnowsAll: () => agent.node!.dataplane.snapshot().every((e) => agent.node!.zds!.knows(e.pod.uid)),
    drift: () => agent.drift!.runOnce(),
    stats: () => ({}),
    stop: async (cleanup) => {
      await agent.stop({ cleanup });
      client.close();
    },
  };
}

async function child(spec: ChildSpec): Promise<void> {
  const send = (m: unknown) => new Promise<void>((resolve) => process.send!(m, () => resolve()));
  let lines = 0;
  // Warnings and errors reach the bench's stderr (the first 20); info is off, as a quiet node would run.
  const logging = createLogging({ levels: { default: 'warn' }, json: true, sink: { write: (l: string) => { if (lines++ < 20) process.stderr.write(`[agent ${process.pid}] ${l}`); return true; } } });
  let agent: RunningAgent;
  const cpu0 = process.cpuUsage();
  try {
    const config = parseAgentConfig(spec.env, []);
    const client = new KubeClient(loadKubeconfig(spec.kubeconfig), { requestTimeoutMs: 30_000 });
    agent = await (spec.mode === 'podwire' ? podwireAgent(config, client, logging) : (await import('./agent-child-istio.js')).istioAgent(config, client, logging));
  } catch (err) {
    await send({ type: 'error', error: (err as Error).stack ?? String(err) });
    process.exit(1);
  }
  const readyAt = performance.now();
  const cpu = process.cpuUsage(cpu0);
  const s = agent.snapshot;
  const ready: ReadyMsg = {
    type: 'ready', startMs: agent.startMs, marks: agent.marks, uptimeMs: Math.round(readyAt), cpuMs: ms1((cpu.user + cpu.system) / 1000), enrolled: agent.enrolled(),
    snapshot: s && {
      pods: s.report.pods, repaired: s.report.repaired.length, failed: s.report.failed.length, pruned: s.report.pruned.length,
      probeEntries: s.report.probeEntries, complete: s.report.complete, scanMissing: s.scan.missing.length, durationMs: s.durationMs,
    },
  };
  const handlers: Record<string, (arg: unknown) => Promise<unknown> | unknown> = {
    mem: () => memSample(),
    stats: () => agent.stats(),
    enrolled: () => agent.enrolled(),
    /** ms from ready until ztunnel acknowledged every cached pod (the ZDS snapshot after a restart). */
    zds: async () => {
      for (const end = Date.now() + 120_000; Date.now() < end; await sleep(5)) if (agent.zdsKnowsAll()) return ms1(performance.now() - readyAt);
      throw new Error('ztunnel did not acknowledge every pod within 120 s');
    },
    drift: async () => {
      const r = await agent.drift();
      if (!r) throw new Error('drift round failed');
      return { checked: r.checked, durationMs: r.durationMs, drifted: r.drifted.length, repaired: r.drifted.filter((d) => d.failed.length === 0).length, parts: [...new Set(r.drifted.flatMap((d) => d.repaired))] };
    },
    stop: async (cleanup) => {
      await agent.stop(cleanup === true);
      return true;
    },
  };
  process.on('message', (m: { id: number; cmd: string; arg?: unknown }) => {
    void (async () => {
      try {
        const value = await handlers[m.cmd]!(m.arg);
        await send({ type: 'reply', id: m.id, ok: true, value });
        if (m.cmd === 'stop') process.exit(0);
      } catch (err) {
        await send({ type: 'reply', id: m.id, ok: false, error: (err as Error).stack ?? String(err) });
      }
    })();
  });
  await send(ready);
}


await child(JSON.parse(process.argv[2]!) as ChildSpec);
