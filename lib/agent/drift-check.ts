// The periodic drift check (podwire, beyond upstream): every enrolled pod's
// in-pod rules, probe-set entries and ztunnel hand-over are verified on an
// interval and put right where they drifted — the case of a pod whose rules
// someone flushed, which upstream only notices at the next agent restart.
// Rounds never overlap (the next is scheduled when one ends); a round works
// on at most `concurrency` pods at once and reads the kernel probe set once.
import type { Dataplane, DriftRepair } from '../dataplane/dataplane.js';
import type { PodInfo } from '../dataplane/types.js';
import { mapLimit } from '../util/limit.js';

export interface DriftRound {
  /** Pods checked (enrolled with a netns when the round started and still so). */
  checked: number;
  /** Pods where something had drifted, with what and what was done. */
  drifted: Array<DriftRepair & { pod: PodInfo }>;
  durationMs: number;
}

export interface DriftCheckOptions {
  dataplane: Pick<Dataplane, 'snapshot' | 'repair' | 'probeEntries'>;
  /** Period between the end of one round and the start of the next (ms). */
  intervalMs: number;
  /** Pods checked at once (default 8: each holds a netns fd and a native job while it runs). */
  concurrency?: number;
  /** Called for every pod with drift (log, metrics, Event), after its repair. */
  onDrift?: (d: DriftRepair & { pod: PodInfo }) => void | Promise<void>;
  /** Called after each round. */
  onRound?: (r: DriftRound) => void;
  /** A round that failed as a whole (e.g. the probe set could not be read). */
  onError?: (err: unknown) => void;
}

export class DriftCheck {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<DriftRound | undefined> | undefined;
  private stopped = false;
  private readonly concurrency: number;

  constructor(private readonly opts: DriftCheckOptions) {
    if (!Number.isInteger(opts.intervalMs) || opts.intervalMs < 1) throw new RangeError(`intervalMs must be a positive integer, got ${opts.intervalMs}`);
    const c = opts.concurrency ?? 8;
    if (!Number.isInteger(c) || c < 1 || c > 256) throw new RangeError(`concurrency must be an integer in 1..256, got ${c}`);
    this.concurrency = c;
  }

  /** Schedules the first round one interval from now. */
  start(): void {
    if (this.stopped || this.timer) return;
    this.schedule();
  }

  /** Stops scheduling and waits for a round in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One round now (a round already running is joined, not doubled). */
  runOnce(): Promise<DriftRound | undefined> {
    if (!this.running) {
      this.running = this.round().catch((err: unknown) => {
        this.opts.onError?.(err);
        return undefined;
      }).finally(() => {
        this.running = undefined;
      });
    }
    return this.running;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.runOnce().then(() => {
        if (!this.stopped) this.schedule();
      });
    }, this.opts.intervalMs);
    this.timer.unref();
  }

  private async round(): Promise<DriftRound> {
    const t0 = performance.now();
    const pods = this.opts.dataplane.snapshot().filter((e) => e.netns && !e.netns.released).map((e) => e.pod);
    const probeEntries = await this.opts.dataplane.probeEntries();
    const out: DriftRound = { checked: 0, drifted: [], durationMs: 0 };
    await mapLimit(pods, this.concurrency, async (pod) => {
      if (this.stopped) return;
      let r: DriftRepair;
      try {
        r = await this.opts.dataplane.repair(pod.uid, { probeEntries });
      } catch (err) {
        // e.g. the rules could not even be read: this pod is reported, the round goes on.
        r = { uid: pod.uid, checked: true, drift: ['check failed'], repaired: [], failed: [{ part: 'rules', error: err instanceof Error ? err.message : String(err) }] };
      }
      if (!r.checked) return;
      out.checked++;
      if (r.drift.length === 0) return;
      const d = { ...r, pod };
      out.drifted.push(d);
      try {
        await this.opts.onDrift?.(d);
      } catch (err) {
        this.opts.onError?.(err);
      }
    });
    out.durationMs = performance.now() - t0;
    this.opts.onRound?.(out);
    return out;
  }
}
