// What the agent has learnt about each pod that nothing else keeps: when its in-pod rules were
// last applied or found intact (and by what), which ztunnel connection last acked it, its last
// enrollment failure and its last drift, with the Event the agent posted for it. `podwire status`
// and `podwire explain` read it over the status socket (lib/agent/status-socket.ts). Bounded:
// a pod's record goes when it leaves the mesh, and the oldest go past MAX_RECORDS.
import type { DriftRepair } from '../dataplane/dataplane.js';
import { EnrollError, ERR_ENROLL_ABORTED } from '../dataplane/errors.js';

/** Records kept at most (a node runs a few hundred pods; this bounds a churn of short-lived ones). */
export const MAX_RECORDS = 10_000;

/** Who last found or made a pod's rules right. */
export type VerifiedBy = 'enrollment' | 'startup-snapshot' | 'drift-check';

export interface EnrollFailure {
  at: string;
  stage: string;
  retryable: boolean;
  error: string;
  /** The Warning Event the ambient controller posts on the pod for it (once per failing stage). */
  event: { reason: 'EnrollFailed' };
}

export interface DriftRecord {
  at: string;
  drift: string[];
  repaired: string[];
  failed: Array<{ part: string; error: string }>;
  /** The Warning Event the agent posts on the pod for it. */
  event: { reason: 'RedirectionDrift' | 'RedirectionDriftRepaired' };
}

export interface PodRecord {
  rulesVerifiedAt?: string;
  rulesVerifiedBy?: VerifiedBy;
  /** The last ZDS request about this pod that ztunnel acked: on which connection, when. */
  ztunnelAck?: { connection: number; type: string; at: string };
  lastFailure?: EnrollFailure;
  lastDrift?: DriftRecord;
}

/** The ZDS server's ack events, as lib/zds/server.ts emits them. */
interface AckSource {
  on(event: 'ack', listener: (e: { connection: number; type: string; uid: string | undefined }) => void): unknown;
}

/** The `stage` label of `podwire_enroll_failures_total` for a failure. */
export function enrollFailureStage(err: unknown): string {
  return err instanceof EnrollError ? err.stage : 'unknown';
}

export class PodStatusBook {
  readonly #records = new Map<string, PodRecord>();
  readonly #now: () => Date;
  /** The last drift-check round. */
  lastDriftRound: { at: string; checked: number; drifted: number; durationMs: number } | undefined;

  constructor(opts: { now?: () => Date } = {}) {
    this.#now = opts.now ?? (() => new Date());
  }

  get(uid: string): Readonly<PodRecord> | undefined {
    return this.#records.get(uid);
  }

  get size(): number {
    return this.#records.size;
  }

  /** The pod's rules are in place as of now (an enrollment, the startup snapshot, a clean or repaired drift check). */
  verified(uid: string, by: VerifiedBy): void {
    const r = this.#record(uid);
    r.rulesVerifiedAt = this.#stamp();
    r.rulesVerifiedBy = by;
  }

  /** An enrollment failed; false when it was not a failure (aborted: cancelled by its caller). */
  enrollFailed(uid: string, err: unknown): boolean {
    if ((err as { code?: unknown })?.code === ERR_ENROLL_ABORTED) return false;
    const e = err instanceof EnrollError ? err : undefined;
    this.#record(uid).lastFailure = {
      at: this.#stamp(),
      stage: e?.stage ?? 'unknown',
      retryable: e?.retryable ?? true,
      error: err instanceof Error ? err.message : String(err),
      event: { reason: 'EnrollFailed' },
    };
    return true;
  }

  /** A drift check looked at the pod: intact (verified now) or drifted (and what was done). */
  checked(uid: string, r: Pick<DriftRepair, 'drift' | 'repaired' | 'failed'>): void {
    if (r.drift.length === 0 && r.failed.length === 0) this.verified(uid, 'drift-check');
    else this.drifted(uid, r);
  }

  /** A drift-check round ended. */
  driftRound(r: { checked: number; drifted: readonly unknown[]; durationMs: number }): void {
    this.lastDriftRound = { at: this.#stamp(), checked: r.checked, drifted: r.drifted.length, durationMs: Math.round(r.durationMs * 10) / 10 };
  }

  /** What a drift check found and did for one pod (the agent posts the Event named here). */
  drifted(uid: string, d: Pick<DriftRepair, 'drift' | 'repaired' | 'failed'>): void {
    const r = this.#record(uid);
    const fixed = d.failed.length === 0;
    r.lastDrift = {
      at: this.#stamp(), drift: [...d.drift], repaired: [...d.repaired], failed: d.failed.map((f) => ({ ...f })),
      event: { reason: fixed ? 'RedirectionDriftRepaired' : 'RedirectionDrift' },
    };
    if (fixed) this.verified(uid, 'drift-check');
  }

  /** The pod left the mesh: nothing more to say about it. */
  forget(uid: string): void {
    this.#records.delete(uid);
  }

  /** Records every ack that names a pod. */
  watchZds(server: AckSource): void {
    server.on('ack', (e) => {
      if (!e.uid || e.type === 'del') return;
      this.#record(e.uid).ztunnelAck = { connection: e.connection, type: e.type, at: this.#stamp() };
    });
  }

  #stamp(): string {
    return this.#now().toISOString();
  }

  #record(uid: string): PodRecord {
    let r = this.#records.get(uid);
    if (r) return r;
    if (this.#records.size >= MAX_RECORDS) this.#records.delete(this.#records.keys().next().value!);
    r = {};
    this.#records.set(uid, r);
    return r;
  }
}
