// Istio's ambient enablement selectors (AMBIENT_ENABLEMENT_SELECTOR, Helm
// `ambient.enablementSelectors`; spec §2.4): a list of {podSelector, namespaceSelector}
// pairs; a pod is selected when some pair matches both its labels and its namespace's.
import { DATAPLANE_MODE_AMBIENT, DATAPLANE_MODE_LABEL, DATAPLANE_MODE_NONE } from './constants.js';
import { compileLabelSelector, SelectorError, type CompiledSelector, type LabelSelector } from './label-selector.js';

export interface EnablementSelector {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
}

/**
 * The chart's default (`values.ambient.enablementSelectors`): pods labelled
 * `istio.io/dataplane-mode=ambient` anywhere, and every pod of a namespace labelled
 * `istio.io/dataplane-mode=ambient` unless the pod is labelled `istio.io/dataplane-mode=none`.
 */
export const DEFAULT_ENABLEMENT_SELECTORS: readonly EnablementSelector[] = Object.freeze([
  { podSelector: { matchLabels: { [DATAPLANE_MODE_LABEL]: DATAPLANE_MODE_AMBIENT } } },
  {
    podSelector: { matchExpressions: [{ key: DATAPLANE_MODE_LABEL, operator: 'NotIn', values: [DATAPLANE_MODE_NONE] }] },
    namespaceSelector: { matchLabels: { [DATAPLANE_MODE_LABEL]: DATAPLANE_MODE_AMBIENT } },
  },
]);

type Labels = Readonly<Record<string, string>> | null | undefined;

export interface CompiledEnablementSelectors {
  /** How many pairs there are; 0 selects nothing. */
  readonly size: number;
  /** Index of the first pair matching both label sets, or -1. */
  match(podLabels: Labels, namespaceLabels: Labels): number;
  /**
   * Whether the namespace alone is enabled: some pair with a *non-empty* namespaceSelector
   * matches it (upstream MatchesNamespace). The agent re-evaluates a namespace's pods when this
   * flips, and decisions use it to tell "the pod opted out" from "nothing enables it".
   */
  matchesNamespace(namespaceLabels: Labels): boolean;
}

/** Throws SelectorError (code ERR_INVALID_SELECTOR, `path` like `[1].podSelector.matchLabels`). */
export function compileEnablementSelectors(input: unknown): CompiledEnablementSelectors {
  if (!Array.isArray(input)) throw new SelectorError('selectors', 'must be a list of {podSelector, namespaceSelector}');
  const pairs: { pod: CompiledSelector; ns: CompiledSelector }[] = input.map((entry: unknown, i) => {
    const p = `[${i}]`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      throw new SelectorError(p, 'must be an object with podSelector and/or namespaceSelector');
    for (const k of Object.keys(entry))
      if (k !== 'podSelector' && k !== 'namespaceSelector')
        throw new SelectorError(p, `unknown field ${JSON.stringify(k)} (expected podSelector, namespaceSelector)`);
    const e = entry as Record<string, unknown>;
    return {
      pod: compileLabelSelector(e.podSelector, `${p}.podSelector`),
      ns: compileLabelSelector(e.namespaceSelector, `${p}.namespaceSelector`),
    };
  });
  return {
    size: pairs.length,
    match(podLabels, namespaceLabels) {
      return pairs.findIndex((s) => s.pod.matches(podLabels) && s.ns.matches(namespaceLabels));
    },
    matchesNamespace(namespaceLabels) {
      return pairs.some((s) => !s.ns.empty && s.ns.matches(namespaceLabels));
    },
  };
}
