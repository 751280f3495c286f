// Whether a pod spec may run on a node by its required node affinity and nodeSelector, with the
// semantics of k8s.io/component-helpers/scheduling/corev1/nodeaffinity (what the scheduler and
// the DaemonSet controller use):
// - nodeSelectorTerms are ORed; an empty term list, and an empty term, match nothing;
// - within a term, matchExpressions (node labels) and matchFields (only `metadata.name`) are ANDed;
// - In / NotIn / Exists / DoesNotExist as for label selectors (NotIn matches an absent label);
//   Gt / Lt take exactly one value, both sides parsed as base-10 int64 — an unparsable node label
//   does not match;
// - a malformed requirement (wrong value count, unknown operator, a non-integer Gt/Lt value)
//   makes its term match nothing, as upstream skips a term it cannot parse; other terms still count.
// Pure: structural shapes, so client-node's V1PodSpec/V1Node and plain objects both fit.

export interface NodeSelectorRequirement {
  key: string;
  operator: string;
  values?: string[] | null;
}

export interface NodeSelectorTerm {
  matchExpressions?: NodeSelectorRequirement[] | null;
  matchFields?: NodeSelectorRequirement[] | null;
}

export interface NodeSelector {
  nodeSelectorTerms?: NodeSelectorTerm[] | null;
}

export interface NodeLike {
  metadata?: { name?: string; labels?: Record<string, string> | null } | null;
}

export interface PodSpecLike {
  nodeSelector?: Record<string, string> | null;
  affinity?: { nodeAffinity?: { requiredDuringSchedulingIgnoredDuringExecution?: NodeSelector | null } | null } | null;
}

/** Why a pod spec does not fit a node: which of its two constraints fails. */
export type NodeFit = { fits: true } | { fits: false; by: 'nodeSelector' | 'nodeAffinity' };

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** strconv.ParseInt(s, 10, 64): optional sign, decimal digits, int64 range; undefined if not. */
export function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const v = BigInt(s);
  return v < INT64_MIN || v > INT64_MAX ? undefined : v;
}

/** A label requirement: true/false, or undefined when it is malformed. */
function labelRequirement(r: NodeSelectorRequirement, labels: Readonly<Record<string, string>>): boolean | undefined {
  const values = r.values ?? [];
  const has = Object.prototype.hasOwnProperty.call(labels, r.key);
  const v = has ? labels[r.key]! : undefined;
  switch (r.operator) {
    case 'In':
    case 'NotIn': {
      if (values.length === 0) return undefined;
      const inSet = v !== undefined && values.includes(v);
      return r.operator === 'In' ? inSet : !inSet;
    }
    case 'Exists':
    case 'DoesNotExist':
      if (values.length !== 0) return undefined;
      return r.operator === 'Exists' ? has : !has;
    case 'Gt':
    case 'Lt': {
      const want = values.length === 1 ? parseInt64(values[0]!) : undefined;
      if (want === undefined) return undefined;
      const got = v === undefined ? undefined : parseInt64(v);
      if (got === undefined) return false;
      return r.operator === 'Gt' ? got > want : got < want;
    }
    default:
      return undefined;
  }
}

/** A field requirement: only `metadata.name`, In/NotIn with exactly one value (as the API validates). */
function fieldRequirement(r: NodeSelectorRequirement, nodeName: string): boolean | undefined {
  const values = r.values ?? [];
  if (r.key !== 'metadata.name' || values.length !== 1) return undefined;
  if (r.operator === 'In') return nodeName === values[0];
  if (r.operator === 'NotIn') return nodeName !== values[0];
  return undefined;
}

function termMatches(t: NodeSelectorTerm, labels: Readonly<Record<string, string>>, nodeName: string): boolean {
  const exprs = t.matchExpressions ?? [];
  const fields = t.matchFields ?? [];
  if (exprs.length === 0 && fields.length === 0) return false;
  // `=== true`: a malformed requirement (undefined) fails its term.
  return exprs.every((r) => labelRequirement(r, labels) === true) && fields.every((r) => fieldRequirement(r, nodeName) === true);
}

/** A required NodeSelector (nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution) against a node. */
export function nodeSelectorMatches(selector: NodeSelector, node: NodeLike): boolean {
  const labels = node.metadata?.labels ?? {};
  const name = node.metadata?.name ?? '';
  return (selector.nodeSelectorTerms ?? []).some((t) => termMatches(t, labels, name));
}

/**
 * Both constraints the scheduler requires of a node: every spec.nodeSelector label equal, and the
 * required node affinity (when there is one) matching. Preferred affinity, taints and resources
 * are not placement guarantees and are not checked.
 */
export function podSpecFitsNode(spec: PodSpecLike | null | undefined, node: NodeLike): NodeFit {
  const labels = node.metadata?.labels ?? {};
  for (const [k, v] of Object.entries(spec?.nodeSelector ?? {})) {
    if (!Object.prototype.hasOwnProperty.call(labels, k) || labels[k] !== v) return { fits: false, by: 'nodeSelector' };
  }
  const required = spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution;
  if (required && !nodeSelectorMatches(required, node)) return { fits: false, by: 'nodeAffinity' };
  return { fits: true };
}
