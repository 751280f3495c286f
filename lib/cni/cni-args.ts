// CNI_ARGS as kubelet/containerd send it: `K=V;K=V`, keys in any order
// (`IgnoreUnknown=1;K8S_POD_NAMESPACE=…;K8S_POD_NAME=…;…`).
import { InvalidNameError, nameProblem, type NameRule } from '../kube/names.js';
import { CNI_CODES, CniError } from './errors.js';

export interface K8sArgs {
  podName: string;
  podNamespace: string;
  /** K8S_POD_UID, '' when the runtime sent none (the lookup then matches by name only). */
  podUid: string;
  infraContainerId: string;
}

export interface ParseCniArgsOptions {
  /**
   * A pod name, namespace or UID that cannot be an object's: 'throw' (default: code 4, before any
   * lookup) or 'drop' (the field reads '', for DEL, which must not fail over it: the ADD of such
   * a pod was refused, so nothing was enrolled, and the runtime could not remove the sandbox).
   */
  onInvalid?: 'throw' | 'drop';
}

// The identity fields and the rule each follows (a pod name is a DNS-1123 subdomain, a namespace
// a label). An empty value means "not sent" and is left to the caller (not a Kubernetes pod).
const CHECKED: ReadonlyArray<readonly [keyof K8sArgs, string, NameRule]> = [
  ['podName', 'K8S_POD_NAME', 'dns-subdomain'],
  ['podNamespace', 'K8S_POD_NAMESPACE', 'dns-label'],
  ['podUid', 'K8S_POD_UID', 'uid'],
];

export function parseCniArgs(raw: string | undefined, opts: ParseCniArgsOptions = {}): K8sArgs {
  const out: K8sArgs = { podName: '', podNamespace: '', podUid: '', infraContainerId: '' };
  if (!raw) return out;
  // Like libcni's LoadArgs (and the shim): every `;`-separated part must be KEY=VALUE, empty ones too.
  for (const pair of raw.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0) throw new CniError(CNI_CODES.INVALID_ENV, `CNI_ARGS: ${JSON.stringify(pair)} is not KEY=VALUE`);
    const key = pair.slice(0, eq);
    const value = pair.slice(eq + 1);
    if (key === 'K8S_POD_NAME') out.podName = value;
    else if (key === 'K8S_POD_NAMESPACE') out.podNamespace = value;
    else if (key === 'K8S_POD_UID') out.podUid = value;
    else if (key === 'K8S_POD_INFRA_CONTAINER_ID') out.infraContainerId = value;
  }
  for (const [field, key, rule] of CHECKED) {
    if (out[field] === '') continue;
    const p = nameProblem(out[field], rule);
    if (!p) continue;
    if (opts.onInvalid === 'drop') {
      out[field] = '';
      continue;
    }
    const cause = new InvalidNameError(key, out[field], rule, p.reason, p.detail);
    throw new CniError(CNI_CODES.INVALID_ENV, `CNI_ARGS: ${cause.message}`, '', { cause });
  }
  return out;
}
