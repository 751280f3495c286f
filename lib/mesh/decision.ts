// The ambient enrollment decision for one pod, given its namespace: the selectors (§2.4) plus
// every exclusion the agent applies (§5.3, §5.4), folded into one answer with a reason an
// operator can act on. Pure: no I/O, no clock.
import type { CompiledEnablementSelectors } from './enablement.js';
import {
  hasSidecar, isAgentPod, isDeleting, isHostNetworkPod, isNamespaceExcluded, isTerminal, isZtunnelPod,
} from './exclusions.js';
import type { MeshNamespace, MeshPod } from './types.js';

export interface SelectionPolicy {
  /** AMBIENT_ENABLEMENT_SELECTOR, compiled. */
  selectors: CompiledEnablementSelectors;
  /** EXCLUDE_NAMESPACES. */
  excludeNamespaces: ReadonlySet<string> | readonly string[];
  /** SYSTEM_NAMESPACE: where ztunnel runs. */
  systemNamespace: string;
  /** POD_NAMESPACE: where the agent itself runs ('' or absent: unknown, no self-check). */
  podNamespace?: string;
}

/** Why a pod is not enrolled; the first that applies is reported, in this order. */
export type SkipReason =
  /** ztunnel's own pod (label app=ztunnel in SYSTEM_NAMESPACE). */
  | 'ztunnel-pod'
  /** the node agent's own pod (istio-cni-node-* in POD_NAMESPACE). */
  | 'agent-pod'
  /** the namespace is listed in EXCLUDE_NAMESPACES. */
  | 'namespace-excluded'
  /** spec.hostNetwork: no pod netns to redirect. */
  | 'host-network'
  /** annotation sidecar.istio.io/status: the sidecar handles this pod. */
  | 'sidecar-injected'
  /** phase Succeeded/Failed. */
  | 'pod-terminal'
  /** AMBIENT_ENABLEMENT_SELECTOR is an empty list: nothing is ever selected. */
  | 'no-selectors'
  /** the namespace is enabled by a namespaceSelector, but the pod's labels opt it out (e.g. istio.io/dataplane-mode=none). */
  | 'pod-not-selected'
  /** neither the namespace nor the pod matches any selector (e.g. namespace not labelled istio.io/dataplane-mode=ambient). */
  | 'not-selected'
  /** selected, but deletion was requested: not enrolled now; an enrolled pod stays until terminal or gone. */
  | 'pod-deleting';

export type AmbientDecision =
  | { enroll: true; reason: 'selected'; /** index of the first matching selector */ selector: number; message: string }
  | {
    enroll: false;
    reason: SkipReason;
    /** Whether an already enrolled (or pending) pod must be taken out now. */
    unenroll: boolean;
    message: string;
  };

function skip(reason: SkipReason, message: string, unenroll = true): AmbientDecision {
  return { enroll: false, reason, unenroll, message };
}

/**
 * Whether `pod` belongs in the ambient mesh. Throws TypeError when `namespace` is not the
 * pod's namespace (a caller bug that would apply another namespace's labels).
 */
export function decideAmbient(pod: MeshPod, namespace: MeshNamespace, policy: SelectionPolicy): AmbientDecision {
  if (typeof pod !== 'object' || pod === null) throw new TypeError('pod must be an object');
  if (typeof namespace !== 'object' || namespace === null) throw new TypeError('namespace must be an object');
  const nsName = namespace.metadata?.name;
  const podNs = pod.metadata?.namespace;
  if (podNs !== undefined && nsName !== undefined && podNs !== nsName)
    throw new TypeError(`namespace ${nsName} is not the namespace of pod ${podNs}/${pod.metadata?.name ?? ''}`);
  const ns = podNs ?? nsName;
  const ref = `pod ${ns ?? ''}/${pod.metadata?.name ?? ''}`;

  if (isZtunnelPod(pod, policy.systemNamespace)) return skip('ztunnel-pod', `${ref} is ztunnel (app=ztunnel in ${policy.systemNamespace})`);
  if (isAgentPod(pod, policy.podNamespace)) return skip('agent-pod', `${ref} is the node agent itself`);
  if (isNamespaceExcluded(ns, policy.excludeNamespaces)) return skip('namespace-excluded', `namespace ${ns} is in EXCLUDE_NAMESPACES`);
  if (isHostNetworkPod(pod)) return skip('host-network', `${ref} uses the host network (spec.hostNetwork)`);
  if (hasSidecar(pod)) return skip('sidecar-injected', `${ref} has an injected sidecar (annotation sidecar.istio.io/status)`);
  if (isTerminal(pod)) return skip('pod-terminal', `${ref} is in terminal phase ${pod.status?.phase}`);
  if (policy.selectors.size === 0) return skip('no-selectors', 'AMBIENT_ENABLEMENT_SELECTOR is empty: no pod is selected');

  const nsLabels = namespace.metadata?.labels;
  const selector = policy.selectors.match(pod.metadata?.labels, nsLabels);
  if (selector < 0) {
    return policy.selectors.matchesNamespace(nsLabels)
      ? skip('pod-not-selected', `namespace ${ns} is enabled for ambient but ${ref}'s labels match no AMBIENT_ENABLEMENT_SELECTOR entry`)
      : skip('not-selected', `neither namespace ${ns} nor ${ref} matches an AMBIENT_ENABLEMENT_SELECTOR entry`);
  }
  // Upstream enrolls a selected pod whatever its deletionTimestamp. Intended behaviour: don't
  // start enrolling a pod that is going away, but keep an enrolled one through its grace period
  // (its connections still go through ztunnel) until it is terminal or deleted, as upstream does.
  if (isDeleting(pod)) return skip('pod-deleting', `${ref} is being deleted`, false);
  return { enroll: true, reason: 'selected', selector, message: `${ref} matches AMBIENT_ENABLEMENT_SELECTOR entry ${selector}` };
}
