// Startup reconciliation (§5.3, §5.12): the pods this node's agent had
// fully enrolled (annotation `enabled`, not terminal, not ztunnel) are
// restored before anything else runs — each netns re-found by the proc
// scan and proved (opened, the inode the scan saw, not the node's, holding
// one of the pod's IPs), rules verified and re-applied only where they
// drifted (or left alone), the probe set refilled and pruned (of entries
// whose owner no longer exists even when the snapshot is incomplete). Pods
// annotated `pending` are not in it: the informers re-add them.
import type { V1Pod } from '@kubernetes/client-node';
import type { Dataplane, ReconcileItem, ReconcileReport } from '../dataplane/dataplane.js';
import { podInfoOf, podIps } from '../ambient/controller.js';
import { openPodNetns, type OpenPodNetnsResult } from '../dataplane/proc-scan.js';
import { REDIRECTION_ANNOTATION } from '../mesh/constants.js';
import { isTerminal, isZtunnelPod } from '../mesh/exclusions.js';

/** The pods of the startup snapshot (GetActiveAmbientPodSnapshot). */
export function activeAmbientPods(pods: readonly V1Pod[], systemNamespace: string): V1Pod[] {
  return pods.filter((p) => p.metadata?.annotations?.[REDIRECTION_ANNOTATION] === 'enabled'
    && !isTerminal(p) && !isZtunnelPod(p, systemNamespace) && !!p.metadata?.uid);
}

export interface SnapshotRestore {
  report: ReconcileReport;
  scan: Pick<OpenPodNetnsResult, 'missing' | 'refused' | 'conflicts' | 'scanned' | 'truncated'>;
  durationMs: number;
}

export async function restoreSnapshot(opts: {
  pods: readonly V1Pod[];
  dataplane: Pick<Dataplane, 'reconcile'>;
  procRoot: string;
  /** AMBIENT_RECONCILE_POD_RULES_ON_STARTUP: verify (and repair drift) or keep the rules as they are. */
  reconcileRules: boolean;
  /** Whether a pod with this UID exists (the synced informer): probe entries of others are pruned in any case. */
  ownerExists?: (uid: string) => boolean;
}): Promise<SnapshotRestore> {
  const t0 = performance.now();
  const wanted = opts.pods.map((p) => ({ uid: p.metadata!.uid!, ips: podIps(p) }));
  const scan: OpenPodNetnsResult = wanted.length
    ? await openPodNetns(wanted, { procRoot: opts.procRoot })
    : { found: new Map(), missing: [], refused: [], conflicts: [], scanned: 0, skipped: 0, truncated: false };
  try {
    const items: ReconcileItem[] = opts.pods.map((p) => {
      const found = scan.found.get(p.metadata!.uid!);
      return { pod: podInfoOf(p, podIps(p)), ...(found ? { netns: found.ref } : {}) };
    });
    const report = await opts.dataplane.reconcile(items, {
      rules: opts.reconcileRules ? 'verify' : 'keep', ...(opts.ownerExists ? { ownerExists: opts.ownerExists } : {}),
    });
    return {
      report,
      scan: { missing: scan.missing, refused: scan.refused, conflicts: scan.conflicts, scanned: scan.scanned, truncated: scan.truncated },
      durationMs: performance.now() - t0,
    };
  } finally {
    for (const f of scan.found.values()) f.ref.release();  // ours; the dataplane took its own for what it keeps (the proof's sockets go with ours)
  }
}
