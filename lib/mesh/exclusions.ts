// Pods the ambient agent never enrolls whatever the selectors say (spec §2.3, §2.4, §5.3, §5.4).
// Each test is a predicate on plain objects so the agent, the plugin endpoint and the
// startup snapshot share one definition.
import {
  AGENT_POD_NAME_PREFIX, SIDECAR_STATUS_ANNOTATION, TERMINAL_PHASES, ZTUNNEL_APP_LABEL, ZTUNNEL_APP_VALUE,
} from './constants.js';
import type { MeshPod } from './types.js';

const has = (m: Record<string, string> | null | undefined, k: string) => !!m && Object.prototype.hasOwnProperty.call(m, k);

/** ztunnel itself: label `app=ztunnel` in the system namespace (upstream's snapshot/fan-out test). */
export function isZtunnelPod(pod: MeshPod, systemNamespace: string): boolean {
  return pod.metadata?.namespace === systemNamespace && pod.metadata?.labels?.[ZTUNNEL_APP_LABEL] === ZTUNNEL_APP_VALUE;
}

/** The agent's own DaemonSet pod (`istio-cni-node-*` in POD_NAMESPACE); never when POD_NAMESPACE is unset. */
export function isAgentPod(pod: MeshPod, podNamespace: string | undefined): boolean {
  return !!podNamespace && pod.metadata?.namespace === podNamespace && (pod.metadata?.name ?? '').startsWith(AGENT_POD_NAME_PREFIX);
}

/** Exact-match membership in EXCLUDE_NAMESPACES. */
export function isNamespaceExcluded(namespace: string | undefined, excluded: ReadonlySet<string> | readonly string[]): boolean {
  if (namespace === undefined) return false;
  return excluded instanceof Set ? excluded.has(namespace) : (excluded as readonly string[]).includes(namespace);
}

/** The pod shares the node's netns: there is no pod netns to redirect. */
export function isHostNetworkPod(pod: MeshPod): boolean {
  return pod.spec?.hostNetwork === true;
}

/**
 * Sidecar-injected: the injector's `sidecar.istio.io/status` annotation is present (any value).
 * This is the only test ambient selection makes; the istio-proxy/istio-init container checks
 * belong to the plugin's sidecar eligibility (§2.3 step 8), not to ambient.
 */
export function hasSidecar(pod: MeshPod): boolean {
  return has(pod.metadata?.annotations, SIDECAR_STATUS_ANNOTATION);
}

/** Phase Succeeded or Failed: the pod will never run again. */
export function isTerminal(pod: MeshPod): boolean {
  const phase = pod.status?.phase;
  return phase !== undefined && TERMINAL_PHASES.has(phase);
}

/** Graceful deletion requested (deletionTimestamp set); the pod may still be running. */
export function isDeleting(pod: MeshPod): boolean {
  const t = pod.metadata?.deletionTimestamp;
  return t !== undefined && t !== null && t !== '';
}
