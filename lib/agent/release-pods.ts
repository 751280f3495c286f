// Uninstall takes every enrolled pod out of the mesh before the host probe rule goes. Upstream
// leaves running pods redirected (its own comment: they "will eventually start to fail kubelet
// healthchecks" once the probe rule is gone, and their traffic keeps going to a ztunnel that is
// usually being uninstalled too). The intent of an uninstall is that running pods keep working:
// unredirected, as if they had started without the mesh. A pod not released within the budget
// (a wedged netns, a ztunnel that never acks) keeps its rules and is named in the log.
import type { Dataplane } from '../dataplane/dataplane.js';

export interface ReleaseReport {
  released: number;
  failed: Array<{ uid: string; error: string }>;
  /** Not attempted before the budget ran out. */
  left: string[];
}

export async function releaseAllPods(dataplane: Dataplane, opts: { budgetMs: number; concurrency?: number }): Promise<ReleaseReport> {
  const todo = dataplane.snapshot().map((e) => e.pod);
  const report: ReleaseReport = { released: 0, failed: [], left: [] };
  const signal = AbortSignal.timeout(opts.budgetMs);
  let next = 0;
  const worker = async () => {
    while (next < todo.length) {
      const pod = todo[next++]!;
      if (signal.aborted) {
        report.left.push(pod.uid);
        continue;
      }
      try {
        await dataplane.unenroll(pod, { podDeleted: false, signal });
        report.released++;
      } catch (err) {
        report.failed.push({ uid: pod.uid, error: (err as Error).message });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 8) }, worker));
  return report;
}
