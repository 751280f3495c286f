// Which namespaces may hold a pod that needs the CNI plugin whatever labels the pod itself
// carries. The agent's decision file (lib/cni/decision-file.ts) lists them, so that the shim,
// running while the agent is down, fails closed for a pod it has never heard of in such a
// namespace and passes the rest. Pure: no I/O.
import type { CompiledEnablementSelectors } from './enablement.js';

type Labels = Readonly<Record<string, string>> | null | undefined;

/** Namespace label of the sidecar injector's default webhook (`enabled` injects). */
export const SIDECAR_INJECTION_LABEL = 'istio-injection';
/** Namespace label of a revisioned injector: any value selects a revision's webhook. */
export const ISTIO_REV_LABEL = 'istio.io/rev';

const NO_LABELS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Whether the enablement selectors may enroll a pod of this namespace that did not opt in by
 * labels of its own: some pair with a non-empty namespaceSelector matches the namespace
 * (`istio.io/dataplane-mode=ambient` with the default selectors), or some pair selects a pod
 * without any label here (e.g. a pair with no podSelector). Over-inclusive on purpose: a
 * namespaceSelector pair whose podSelector still needs a label counts too, since an unknown
 * pod may carry it. A pair that needs a pod label and has no namespaceSelector (the default
 * first pair) does not make every namespace count: that is the opt-in-by-label case.
 */
export function namespaceMayEnroll(namespaceLabels: Labels, selectors: CompiledEnablementSelectors): boolean {
  if (selectors.size === 0) return false;
  return selectors.matchesNamespace(namespaceLabels) || selectors.match(NO_LABELS, namespaceLabels) >= 0;
}

/** Labelled for sidecar injection: `istio-injection=enabled`, or any `istio.io/rev`. */
export function namespaceInjectsSidecars(namespaceLabels: Labels): boolean {
  if (!namespaceLabels) return false;
  return namespaceLabels[SIDECAR_INJECTION_LABEL] === 'enabled' || Object.prototype.hasOwnProperty.call(namespaceLabels, ISTIO_REV_LABEL);
}
