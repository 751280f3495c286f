// The periodic drift check (podwire, beyond upstream): every enrolled pod's
// in-pod rules, probe-set entries and ztunnel hand-over are verified on an
// interval and put right where they drifted — the case of a pod whose rules
// someone flushed, which upstream only notices at the next agent restart.
// With `mesh` (the ambient controller), a round also looks for Running pods
// the policy selects that the dataplane does not hold at all (a GC or DEL
// took them out while they ran: traffic to 15001 with no ztunnel behind it)
// and re-enrolls them through the controller.
// Rounds never overlap (the next is scheduled when one ends); a round works
// on at most `concurrency` pods at once and reads the kernel probe set once.
import type { V1Pod } from '@kubernetes/client-node';
import { podInfoOf, type ReenrollOutcome } from '../ambient/controller.js';
import type { Dataplane, DriftRepair } from '../dataplane/dataplane.js';
import type { PodInfo } from '../dataplane/types.js';
import { mapLimit } from '../util/limit.js';

/** What the drift check needs of the ambient controller (AmbientController satisfies it). */
export interface MeshPods {
  /** Running pods the policy selects that the dataplane does not hold. */
  unheldPods(): V1Pod[];
  /** Re-enrolls one of them (netns resolved, enrolled, annotated). */
  reenroll(pod: V1Pod): Promise<ReenrollOutcome>;
}

/** The drift line of a selected Running pod the dataplane did not hold. */
export const UNHELD_DRIFT = 'pod is selected for ambient and Running, but not enrolled (ztunnel does not hold it)';

export interface DriftRound {
  /** Pods checked (enrolled with a netns when the round started and still so). */
  checked: number;
  /** Pods where something had drifted, with what and what was done. */
  drifted: Array<DriftRepair & { pod: PodInfo }>;
  /** Selected Running pods the dataplane did not hold (re-enrolled, or reported as drifted when that failed). */
  unheld: number;
  /** Probe-set IPs of owners that no longer exist, removed (`pruneOrphans`). */
  pruned: string[];
  durationMs: number;
}

export interface DriftCheckOptions {
  dataplane: Pick<Dataplane, 'snapshot' | 'repair' | 'probeEntries'>;
  /** The pods that should be in the mesh; those the dataplane does not hold are re-enrolled (reported once each while their netns is not found). */
  mesh?: MeshPods;
  /** Period between the end of one round and the start of the next (ms). */
  intervalMs: number;
  /** Pods checked at once (default 8: each holds a netns fd and a native job while it runs). */
  concurrency?: number;
  /** Called for every pod with drift (log, metrics, Event), after its repair. */
  onDrift?: (d: DriftRepair & { pod: PodInfo }) => void | Promise<void>;
  /** Called after each round. */
  onRound?: (r: DriftRound) => void;
  /**
   * Run at the start of each round: removes the probe-set entries whose owner
   * no longer exists (Dataplane.pruneOrphanProbes), returning their IPs.
   */
  pruneOrphans?: () => Promise<string[]>;
  /** A round that failed as a whole (e.g. the probe set could not be read). */
  onError?: (err: unknown) => void;
}

export class DriftCheck {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<DriftRound | undefined> | undefined;
  private stopped = false;
  private readonly concurrency: number;
  /** Unheld pods already reported for a netns that could not be found (one report per pod, not one per round). */
  private readonly noNetns = new Set<string>();

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
    // A failed prune is reported and the round goes on: the pods' own checks do not depend on it.
    const pruned = (await this.opts.pruneOrphans?.().catch((err: unknown) => {
      this.opts.onError?.(err);
      return [];
    })) ?? [];
    const pods = this.opts.dataplane.snapshot().filter((e) => e.netns && !e.netns.released).map((e) => e.pod);
    const probeEntries = await this.opts.dataplane.probeEntries();
    const out: DriftRound = { checked: 0, drifted: [], unheld: 0, pruned, durationMs: 0 };
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
      await this.report(out, { ...r, pod });
    });
    if (this.opts.mesh) await this.unheld(this.opts.mesh, out);
    out.durationMs = performance.now() - t0;
    this.opts.onRound?.(out);
    return out;
  }

  private async report(out: DriftRound, d: DriftRepair & { pod: PodInfo }): Promise<void> {
    out.drifted.push(d);
    try {
      await this.opts.onDrift?.(d);
    } catch (err) {
      this.opts.onError?.(err);
    }
  }

  /** Re-enrolls the selected Running pods the dataplane does not hold (after the held ones were repaired). */
  private async unheld(mesh: MeshPods, out: DriftRound): Promise<void> {
    const pods = mesh.unheldPods();
    const live = new Set(pods.map((p) => p.metadata?.uid ?? ''));
    for (const uid of this.noNetns) if (!live.has(uid)) this.noNetns.delete(uid);
    await mapLimit(pods, this.concurrency, async (pod) => {
      if (this.stopped) return;
      const info = podInfoOf(pod);
      const d: DriftRepair & { pod: PodInfo } = { uid: info.uid, checked: true, drift: [UNHELD_DRIFT], repaired: [], failed: [], pod: info };
      let outcome: ReenrollOutcome | 'failed';
      try {
        outcome = await mesh.reenroll(pod);
      } catch (err) {
        outcome = 'failed';
        d.failed.push({ part: 'enrollment', error: err instanceof Error ? err.message : String(err) });
      }
      if (outcome === 'held' || outcome === 'not-selected') return;  // put right (or no longer wanted) meanwhile
      out.unheld++;
      if (outcome === 'no-netns') {
        if (this.noNetns.has(info.uid)) return;
        this.noNetns.add(info.uid);
        d.failed.push({ part: 'enrollment', error: 'the pod netns was not found' });
      } else if (outcome === 'enrolled') {
        this.noNetns.delete(info.uid);
        d.repaired.push('enrollment');
      }
      await this.report(out, d);
    });
  }
}
