// The repair controller's ambient hook as the agent gives it (beyond upstream, issue 14): a pod
// the ambient controller selects but neither it nor the dataplane holds is enrolled through the
// same path as the informer's (AmbientController.addPodToMesh: dataplane, annotation, Events),
// in the netns the /proc scan finds and proves. No netns found is permanent for this run of the repair (the
// controller then labels or deletes per REPAIR_*; its resync tries again later).
import type { V1Pod } from '@kubernetes/client-node';
import { podIps, type AmbientController } from '../ambient/controller.js';
import { NonRetryable } from '../kube/work-queue.js';
import type { AmbientRepairHook } from '../repair/controller.js';
import type { NetnsRef } from '../dataplane/netns-ref.js';

export function ambientRepairHook(controller: AmbientController, findNetns: (pod: V1Pod) => Promise<NetnsRef | undefined>): AmbientRepairHook {
  return {
    // While the ambient controller still works on the pod it is not repair's yet (its grace restarts after).
    shouldBeEnrolled: (pod) => controller.selects(pod) && !controller.busy(pod),
    isEnrolled: (uid) => controller.holds(uid),
    enroll: async (pod) => {
      const netns = await findNetns(pod);
      if (netns === undefined) throw new NonRetryable(`no netns found for pod ${pod.metadata?.namespace}/${pod.metadata?.name} in the proc scan`);
      try {
        await controller.addPodToMesh(pod, podIps(pod), netns);
      } finally {
        netns.release();  // ours: the dataplane took its own reference
      }
    },
  };
}
