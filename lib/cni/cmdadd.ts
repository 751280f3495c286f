// The agent's answer to a CNI ADD (§5.5): look the pod up (informer cache,
// briefly waited for, then one GET), check it is still meant for ambient,
// and enroll it through the same path the informers use — with the IPs the
// plugin saw (the API server does not know them yet) and the sandbox's
// netns from CNI_NETNS, opened under the host mounts root. A rejection
// becomes a 500 with its message: the runtime fails the sandbox and the
// kubelet retries it (fail closed).
import { decideAmbient, type SelectionPolicy } from '../mesh/decision.js';
import type { AmbientController } from '../ambient/controller.js';
import type { CmdAddContext, CmdAddRequest } from './endpoint.js';
import type { KubeClient } from '../kube/client.js';
import { lookupPod, type PodLookupOptions } from './pod-lookup.js';

export type CniAddErrorCode =
  /** The informers have not synced yet: the plugin retries. */
  | 'ERR_AGENT_NOT_READY'
  /** The pod is not (or no longer) selected for ambient. */
  | 'ERR_POD_NOT_ELIGIBLE'
  /** CNI_NETNS is not an absolute path. */
  | 'ERR_BAD_NETNS';

export class CniAddError extends Error {
  constructor(readonly code: CniAddErrorCode, message: string) {
    super(message);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'CniAddError', enumerable: false });
  }
}

/** CNI_NETNS as the agent sees it: `<root>/<path>` (a `/` root leaves it as given). */
export function hostPath(root: string, path: string): string {
  if (!path.startsWith('/') || path.includes('\0')) throw new CniAddError('ERR_BAD_NETNS', `netns ${JSON.stringify(path)} is not an absolute path`);
  return root === '/' ? path : `${root.replace(/\/+$/, '')}${path}`;
}

export interface CniAddDeps {
  controller: AmbientController;
  client: KubeClient;
  policy: SelectionPolicy;
  /** HOST_MOUNTS_ROOT. */
  hostMountsRoot: string;
  /** Whether the agent takes CNI adds yet (informers synced). */
  ready: () => boolean;
  lookup?: PodLookupOptions;
}

export function cniAddHandler(deps: CniAddDeps): (req: CmdAddRequest, ctx: CmdAddContext) => Promise<void> {
  return async (req, ctx) => {
    if (!deps.ready()) throw new CniAddError('ERR_AGENT_NOT_READY', 'the node agent is starting (informers not synced yet); retry');
    const netnsPath = hostPath(deps.hostMountsRoot, req.netns);
    const ref = { namespace: req.podNamespace, name: req.podName };
    const { pod, namespace } = await lookupPod(deps.controller, deps.client, ref, { ...deps.lookup, signal: ctx.signal });
    const decision = decideAmbient(pod, namespace, deps.policy);
    if (!decision.enroll) {
      throw new CniAddError('ERR_POD_NOT_ELIGIBLE', `pod ${ref.namespace}/${ref.name} is unexpectedly not eligible for ambient enrollment: ${decision.message}`);
    }
    await deps.controller.addPodToMesh(pod, req.ips, netnsPath);
  };
}
