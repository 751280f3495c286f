// Object names as the apiserver validates them, checked before a name reaches a request path.
// client-node escapes a path segment with encodeURIComponent, which leaves `.` and `..` as they
// are, and the URL parser then resolves them: GET pods/`..` became GET of the Namespace. So a
// name that is not a valid object name never leaves this process. No I/O, no client-node.

/** Which apiserver rule a name follows. */
export type NameRule =
  /** DNS-1123 subdomain (pods, nodes, daemonsets): ≤ 253, dot-separated labels. */
  | 'dns-subdomain'
  /** DNS-1123 label (namespaces): ≤ 63, lowercase alnum and '-'. */
  | 'dns-label'
  /** What any object name must be to be a path segment (apimachinery's path-segment rule). */
  | 'path-segment'
  /** A metadata.uid as runtimes pass it (K8S_POD_UID): see uidProblem. */
  | 'uid';

export type InvalidNameReason = 'empty' | 'too-long' | 'dot-segment' | 'bad-char' | 'bad-format';

export interface NameProblem {
  reason: InvalidNameReason;
  detail: string;
}

/** A name that cannot be an object's name; thrown before any request is made. */
export class InvalidNameError extends Error {
  readonly code = 'ERR_KUBE_INVALID_NAME';
  constructor(
    /** What the value was given as (`name`, `namespace`, `K8S_POD_NAME`, `PodName`). */
    readonly field: string,
    readonly value: string,
    readonly rule: NameRule,
    readonly reason: InvalidNameReason,
    detail: string,
  ) {
    super(`${field} ${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)}: ${detail}`);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'InvalidNameError', enumerable: false });
  }
}

const LABEL = '[a-z0-9](?:[-a-z0-9]*[a-z0-9])?';
const DNS_LABEL = new RegExp(`^${LABEL}$`);
const DNS_SUBDOMAIN = new RegExp(`^${LABEL}(?:\\.${LABEL})*$`);
// C0, DEL and C1 controls.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export const DNS_SUBDOMAIN_MAX = 253;
export const DNS_LABEL_MAX = 63;
export const UID_MAX = 128;

/** Why `value` breaks `rule`, or undefined when it is a valid name. */
export function nameProblem(value: string, rule: NameRule): NameProblem | undefined {
  if (typeof value !== 'string' || value === '') return { reason: 'empty', detail: 'must not be empty' };
  switch (rule) {
    case 'dns-subdomain':
      if (value.length > DNS_SUBDOMAIN_MAX) return { reason: 'too-long', detail: `longer than ${DNS_SUBDOMAIN_MAX} characters (DNS-1123 subdomain)` };
      if (!DNS_SUBDOMAIN.test(value)) {
        return { reason: 'bad-format', detail: 'not a DNS-1123 subdomain (lowercase letters, digits, \'-\' and \'.\', each dot-separated part starting and ending with a letter or digit)' };
      }
      return undefined;
    case 'dns-label':
      if (value.length > DNS_LABEL_MAX) return { reason: 'too-long', detail: `longer than ${DNS_LABEL_MAX} characters (DNS-1123 label)` };
      if (!DNS_LABEL.test(value)) return { reason: 'bad-format', detail: 'not a DNS-1123 label (lowercase letters, digits and \'-\', starting and ending with a letter or digit)' };
      return undefined;
    case 'path-segment':
      if (value === '.' || value === '..') return { reason: 'dot-segment', detail: 'may not be "." or ".."' };
      // '%' too: the URL parser also resolves %2e%2e as "..".
      if (/[/%]/.test(value) || CONTROL.test(value)) return { reason: 'bad-char', detail: 'may not contain \'/\', \'%\' or control characters' };
      return undefined;
    case 'uid':
      return uidProblem(value);
  }
}

/**
 * A UID is a 36-character RFC 4122 string in practice; any non-empty string of at most 128
 * characters without '/' or control characters is accepted, so an odd runtime still works and
 * nothing path-like or log-breaking gets through.
 */
function uidProblem(value: string): NameProblem | undefined {
  if (value.length > UID_MAX) return { reason: 'too-long', detail: `longer than ${UID_MAX} characters` };
  if (value.includes('/') || CONTROL.test(value)) return { reason: 'bad-char', detail: 'may not contain \'/\' or control characters' };
  return undefined;
}

/** Returns `value`, or throws InvalidNameError naming `field`. */
export function checkName(value: string, rule: NameRule, field: string): string {
  const p = nameProblem(value, rule);
  if (p) throw new InvalidNameError(field, String(value), rule, p.reason, p.detail);
  return value;
}

export const checkPodName = (value: string, field = 'pod name'): string => checkName(value, 'dns-subdomain', field);
export const checkNamespace = (value: string, field = 'namespace'): string => checkName(value, 'dns-label', field);

// The rule a resource's object names follow, where podwire calls it by name; any other resource
// gets the path-segment rule (event names may be longer than a subdomain, RBAC names hold ':').
const RESOURCE_RULES: Record<string, NameRule> = {
  pods: 'dns-subdomain',
  nodes: 'dns-subdomain',
  daemonsets: 'dns-subdomain',
  namespaces: 'dns-label',
};

/** The rule for `resource`'s names (`pods/status` is a pod's). */
export function ruleForResource(resource: string): NameRule {
  return RESOURCE_RULES[resource.split('/')[0]!] ?? 'path-segment';
}
