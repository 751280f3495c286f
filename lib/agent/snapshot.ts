// Startup reconciliation (§5.3, §5.12): the pods this node's agent had
// fully enrolled (annotation `enabled`, not terminal, not ztunnel) are
// restored before anything else runs — each netns re-found by the proc
// scan, rules verified and re-applied only where they drifted (or left
// alone), the probe set refilled and pruned unless the snapshot is
// incomplete. Pods annotated `pending` are not in it: the informers re-add them.
import type { V1Pod } from '@kubernetes/client-node';
import type { Dataplane, ReconcileItem, ReconcileReport } from '../dataplane/dataplane.js';
import { podInfoOf, podIps } from '../ambient/controller.js';
import { scanPodNetns, type ProcScanResult } from '../ambient/proc-scan.js';
import { REDIRECTION_ANNOTATION } from '../mesh/constants.js';
import { isTerminal, isZtunnelPod } from '../mesh/exclusions.js';

/** The pods of the startup snapshot (GetActiveAmbientPodSnapshot). */
export function activeAmbientPods(pods: readonly V1Pod[], systemNamespace: string): V1Pod[] {
  return pods.filter((p) => p.metadata?.annotations?.[REDIRECTION_ANNOTATION] === 'enabled'
    && !isTerminal(p) && !isZtunnelPod(p, systemNamespace) && !!p.metadata?.uid);
}

export interface SnapshotRestore {
  report: ReconcileReport;
  scan: Pick<ProcScanResult, 'missing' | 'conflicts' | 'scanned' | 'truncated'>;
  durationMs: number;
}

export async function restoreSnapshot(opts: {
  pods: readonly V1Pod[];
  dataplane: Pick<Dataplane, 'reconcile'>;
  procRoot: string;
  /** AMBIENT_RECONCILE_POD_RULES_ON_STARTUP: verify (and repair drift) or keep the rules as they are. */
  reconcileRules: boolean;
}): Promise<SnapshotRestore> {
  const t0 = performance.now();
  const uids = opts.pods.map((p) => p.metadata!.uid!);
  const scan = uids.length ? scanPodNetns(uids, { procRoot: opts.procRoot }) : { found: new Map(), missing: [], conflicts: [], scanned: 0, truncated: false };
  const items: ReconcileItem[] = opts.pods.map((p) => {
    const found = scan.found.get(p.metadata!.uid!);
    return { pod: podInfoOf(p, podIps(p)), ...(found ? { netnsPath: found.path } : {}) };
  });
  const report = await opts.dataplane.reconcile(items, { rules: opts.reconcileRules ? 'verify' : 'keep' });
  return {
    report,
    scan: { missing: scan.missing, conflicts: scan.conflicts, scanned: scan.scanned, truncated: scan.truncated },
    durationMs: performance.now() - t0,
  };
}
