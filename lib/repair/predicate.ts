// The broken-pod predicate of Istio's repair controller (spec §4, `matchesFilter`): a pod that
// carries the sidecar annotation and whose validation init container last terminated with the
// configured exit code (and message), unless that init container has since completed. Pure.
import type { V1Pod } from '@kubernetes/client-node';

export interface BrokenPodFilter {
  /** The pod must carry this annotation ('' = any pod). */
  sidecarAnnotation: string;
  /** The init container to look at ('' = any). */
  initContainerName: string;
  /** Required termination message, compared trimmed ('' = any). */
  initTerminationMessage: string;
  /** Required exit code (0 = any). */
  initExitCode: number;
}

/** Upstream's defaults: `sidecar.istio.io/status`, `istio-validation`, any message, exit 126 (ValidationErrorCode). */
export const DEFAULT_BROKEN_POD_FILTER: Readonly<BrokenPodFilter> = Object.freeze({
  sidecarAnnotation: 'sidecar.istio.io/status',
  initContainerName: 'istio-validation',
  initTerminationMessage: '',
  initExitCode: 126,
});

/** Whether `pod` is broken by §4's predicate. */
export function isBrokenPod(pod: V1Pod, filter: BrokenPodFilter = DEFAULT_BROKEN_POD_FILTER): boolean {
  if (filter.sidecarAnnotation !== '') {
    const annotations = pod.metadata?.annotations;
    if (!annotations || !Object.prototype.hasOwnProperty.call(annotations, filter.sidecarAnnotation)) return false;
  }
  const wantMessage = filter.initTerminationMessage.trim();
  for (const st of pod.status?.initContainerStatuses ?? []) {
    if (filter.initContainerName !== '' && st.name !== filter.initContainerName) continue;
    const now = st.state?.terminated;
    if (now && (now.reason === 'Completed' || now.exitCode === 0)) continue;
    // JSON `lastState` is Go's LastTerminationState.
    const last = st.lastState?.terminated;
    if (!last) continue;
    if (wantMessage !== '' && wantMessage !== (last.message ?? '').trim()) continue;
    if (filter.initExitCode !== 0 && filter.initExitCode !== last.exitCode) continue;
    return true;
  }
  return false;
}
