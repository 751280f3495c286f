// Kubernetes label selectors (metav1.LabelSelector) compiled once and matched many times,
// with the semantics of k8s.io/apimachinery LabelSelectorAsSelector:
// - matchLabels k: v  → label k present and equal to v;
// - In / NotIn        → present with a value in the set / absent or a value not in the set;
// - Exists / DoesNotExist → present / absent (values must be empty);
// - all requirements must hold; an empty selector (no requirements) matches everything.
// Invalid selectors are rejected at compile time, as apimachinery does, so a typo fails at
// start instead of silently matching nothing (or everything).

export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface LabelSelectorRequirement {
  key: string;
  operator: SelectorOperator;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export class SelectorError extends TypeError {
  readonly code = 'ERR_INVALID_SELECTOR';
  /** Where in the input the problem is, e.g. `[1].podSelector.matchExpressions[0].operator`. */
  constructor(readonly path: string, message: string) {
    super(`${path}: ${message}`);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'SelectorError', enumerable: false });
  }
}

interface Requirement {
  key: string;
  operator: SelectorOperator | 'Equals';
  values: ReadonlySet<string>;
}

export interface CompiledSelector {
  /** No requirements: matches every label set (what an empty LabelSelector means). */
  readonly empty: boolean;
  matches(labels: Readonly<Record<string, string>> | null | undefined): boolean;
}

const OPERATORS: ReadonlySet<string> = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);
// Qualified name: [prefix/]name, name ≤ 63, prefix a DNS-1123 subdomain ≤ 253 (validation.IsQualifiedName).
const NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function checkKey(key: unknown, path: string): string {
  if (typeof key !== 'string' || key === '') throw new SelectorError(path, 'label key must be a non-empty string');
  const slash = key.lastIndexOf('/');
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (slash >= 0) {
    const prefix = key.slice(0, slash);
    if (prefix === '' || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))
      throw new SelectorError(path, `label key ${JSON.stringify(key)} has an invalid prefix (must be a DNS-1123 subdomain)`);
  }
  if (name.length > 63 || !NAME.test(name))
    throw new SelectorError(path, `label key ${JSON.stringify(key)} is not a valid label name`);
  return key;
}

function checkValue(value: unknown, path: string): string {
  if (typeof value !== 'string') throw new SelectorError(path, `label value must be a string, got ${JSON.stringify(value)}`);
  if (value !== '' && (value.length > 63 || !NAME.test(value)))
    throw new SelectorError(path, `label value ${JSON.stringify(value)} is not valid (≤ 63 characters, alphanumeric, '-', '_', '.')`);
  return value;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

// Unknown fields are rejected: Go's decoder would ignore `matchLabel:` and leave an empty
// selector behind — one that matches every pod. Intended behaviour: refuse the typo.
function checkFields(obj: Record<string, unknown>, allowed: readonly string[], path: string): void {
  for (const k of Object.keys(obj))
    if (!allowed.includes(k)) throw new SelectorError(path, `unknown field ${JSON.stringify(k)} (expected ${allowed.join(', ')})`);
}

/**
 * Compiles a LabelSelector. `undefined`/`null` compile to the empty selector (match all): an
 * enablement selector without a podSelector or namespaceSelector means "any" (spec §2.4).
 * Throws SelectorError (code ERR_INVALID_SELECTOR) naming the bad field.
 */
export function compileLabelSelector(input: unknown, path = 'selector'): CompiledSelector {
  const reqs: Requirement[] = [];
  if (input !== undefined && input !== null) {
    if (!isPlainObject(input)) throw new SelectorError(path, 'must be an object with matchLabels and/or matchExpressions');
    checkFields(input, ['matchLabels', 'matchExpressions'], path);
    const { matchLabels, matchExpressions } = input;
    if (matchLabels !== undefined && matchLabels !== null) {
      if (!isPlainObject(matchLabels)) throw new SelectorError(`${path}.matchLabels`, 'must be an object of label key → value');
      for (const [k, v] of Object.entries(matchLabels)) {
        const p = `${path}.matchLabels[${JSON.stringify(k)}]`;
        reqs.push({ key: checkKey(k, p), operator: 'Equals', values: new Set([checkValue(v, p)]) });
      }
    }
    if (matchExpressions !== undefined && matchExpressions !== null) {
      if (!Array.isArray(matchExpressions)) throw new SelectorError(`${path}.matchExpressions`, 'must be a list');
      matchExpressions.forEach((e: unknown, i) => {
        const p = `${path}.matchExpressions[${i}]`;
        if (!isPlainObject(e)) throw new SelectorError(p, 'must be an object with key, operator and values');
        checkFields(e, ['key', 'operator', 'values'], p);
        const key = checkKey(e.key, `${p}.key`);
        const op = e.operator;
        if (typeof op !== 'string' || !OPERATORS.has(op))
          throw new SelectorError(`${p}.operator`, `${JSON.stringify(op)} is not one of In, NotIn, Exists, DoesNotExist`);
        const raw = e.values ?? [];
        if (!Array.isArray(raw)) throw new SelectorError(`${p}.values`, 'must be a list of strings');
        const values = raw.map((v: unknown, j) => checkValue(v, `${p}.values[${j}]`));
        if ((op === 'In' || op === 'NotIn') && values.length === 0)
          throw new SelectorError(`${p}.values`, `must not be empty for operator ${op}`);
        if ((op === 'Exists' || op === 'DoesNotExist') && values.length !== 0)
          throw new SelectorError(`${p}.values`, `must be empty for operator ${op}`);
        reqs.push({ key, operator: op as SelectorOperator, values: new Set(values) });
      });
    }
  }
  return {
    empty: reqs.length === 0,
    matches(labels) {
      const l = labels ?? {};
      for (const r of reqs) {
        const has = Object.prototype.hasOwnProperty.call(l, r.key);
        const v = has ? l[r.key]! : undefined;
        switch (r.operator) {
          case 'Equals':
          case 'In':
            if (v === undefined || !r.values.has(v)) return false;
            break;
          case 'NotIn':
            if (v !== undefined && r.values.has(v)) return false;
            break;
          case 'Exists':
            if (!has) return false;
            break;
          case 'DoesNotExist':
            if (has) return false;
            break;
        }
      }
      return true;
    },
  };
}
