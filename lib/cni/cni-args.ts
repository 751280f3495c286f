// CNI_ARGS as kubelet/containerd send it: `K=V;K=V`, keys in any order
// (`IgnoreUnknown=1;K8S_POD_NAMESPACE=…;K8S_POD_NAME=…;…`).
import { CNI_CODES, CniError } from './errors.js';

export interface K8sArgs {
  podName: string;
  podNamespace: string;
  podUid: string;
  infraContainerId: string;
}

export function parseCniArgs(raw: string | undefined): K8sArgs {
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
  return out;
}
