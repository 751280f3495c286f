// The agent's answer to a CNI ADD (§5.5): look the pod up (informer cache,
// briefly waited for, then one GET), check it is still meant for ambient,
// and enroll it through the same path the informers use — with the IPs the
// plugin saw (the API server does not know them yet) and the sandbox's
// netns from CNI_NETNS, opened under the host mounts root. A rejection
// becomes a 500 with its message: the runtime fails the sandbox and the
// kubelet retries it (fail closed). Also the netns helpers both CNI paths
// share: the host path of CNI_NETNS, its identity, and the refusal of the
// node's and the agent's own netns.
import { ZTUNNEL_CONNECT_WAIT_MS } from './invoke.js';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { decideAmbient, type SelectionPolicy } from '../mesh/decision.js';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { Informer } from '../kube/informer.js';
import type { CmdAddContext, CmdAddRequest } from './endpoint.js';
import type { KubeClient } from '../kube/client.js';
import { lookupPod, type PodLookupOptions } from './pod-lookup.js';

export type CniAddErrorCode =
  /** The startup snapshot is not restored yet: the plugin retries. */
  | 'ERR_AGENT_NOT_READY'
  /** The pod is not (or no longer) selected for ambient. */
  | 'ERR_POD_NOT_ELIGIBLE'
  /** CNI_NETNS is not an absolute path (or leaves the host mounts root). */
  | 'ERR_BAD_NETNS'
  /** CNI_NETNS is the node's netns or the agent's own: never a pod's. */
  | 'ERR_HOST_NETNS';

export class CniAddError extends Error {
  constructor(readonly code: CniAddErrorCode, message: string) {
    super(message);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'CniAddError', enumerable: false });
  }
}

/** A network namespace by identity (the nsfs file's device and inode). */
export interface NetnsIdentity {
  dev: number;
  ino: number;
}

/** A netns no CNI invocation may name as a pod's, and what it is (for the message). */
export interface RefusedNetns extends NetnsIdentity {
  what: string;
}

/**
 * CNI_NETNS as the agent sees it: `<root>/<path>` (a `/` root leaves it as
 * given). A path that is not absolute, or whose `..` would leave the root, is refused.
 */
export function hostPath(root: string, path: string): string {
  if (!path.startsWith('/') || path.includes('\0')) throw new CniAddError('ERR_BAD_NETNS', `netns ${JSON.stringify(path)} is not an absolute path`);
  if (root === '/') return path;
  const base = root.replace(/\/+$/, '');
  const joined = join(base, path);
  if (joined !== base && !joined.startsWith(`${base}/`)) throw new CniAddError('ERR_BAD_NETNS', `netns ${JSON.stringify(path)} leaves ${root}`);
  return joined;
}

/** The identity of the file at `path` (links followed), or undefined when it cannot be read. */
export function netnsIdentity(path: string): NetnsIdentity | undefined {
  try {
    const st = statSync(path);
    return { dev: st.dev, ino: st.ino };
  } catch {
    return undefined;
  }
}

export const sameIdentity = (a: NetnsIdentity | undefined, b: NetnsIdentity | undefined): boolean =>
  !!a && !!b && a.dev === b.dev && a.ino === b.ino;

/**
 * The sandbox netns of an ADD or CHECK: its host path and identity. Throws
 * CniAddError ERR_HOST_NETNS when it is one of `refused` (whatever path leads
 * there: symlinks, `..`, /proc/<pid>/ns/net); `id` is undefined when the path
 * cannot be read (the dataplane then fails on it as before).
 */
export function sandboxNetns(root: string, netns: string, refused: readonly RefusedNetns[]): { path: string; id: NetnsIdentity | undefined } {
  const path = hostPath(root, netns);
  const id = netnsIdentity(path);
  const hit = id && refused.find((r) => sameIdentity(r, id));
  if (hit) throw new CniAddError('ERR_HOST_NETNS', `netns ${JSON.stringify(netns)} is ${hit.what}, not a pod's: refused`);
  return { path, id };
}

/** The agent's own netns (/proc/self/ns/net): always refused. */
export function ownNetns(): RefusedNetns[] {
  const id = netnsIdentity('/proc/self/ns/net');
  return id ? [{ ...id, what: "the node agent's own netns" }] : [];
}

/**
 * What the CNI paths need of the ambient controller (lib/ambient/controller.ts
 * AmbientController satisfies it). `signal`: an aborted ADD rejects with a
 * retryable EnrollError and leaves nothing behind. `removePodFromMesh`: takes
 * a pod out wholly (ztunnel, probe set, in-pod rules, annotation, the
 * controller's entry), or so that the next call finishes it.
 */
export interface CniController {
  readonly pods: Informer<V1Pod>;
  readonly namespaces: Informer<V1Namespace>;
  addPodToMesh(pod: V1Pod, ips: string[], netnsPath: string | undefined, opts?: { signal?: AbortSignal; ztunnelConnectWaitMs?: number }): Promise<void>;
  removePodFromMesh(uid: string, opts: { reason: 'cni-del' | 'cni-gc' | 'queued-del'; ifNetns?: NetnsIdentity }): Promise<unknown>;
}

export interface CniAddDeps {
  controller: CniController;
  client: KubeClient;
  policy: SelectionPolicy;
  /** HOST_MOUNTS_ROOT. */
  hostMountsRoot: string;
  /** Whether the agent takes CNI adds yet (startup snapshot restored). */
  ready: () => boolean;
  /** Netns identities never accepted as a pod's (the node's, the agent's own); default the agent's own. */
  refusedNetns?: () => readonly RefusedNetns[];
  lookup?: PodLookupOptions;
}

export function cniAddHandler(deps: CniAddDeps): (req: CmdAddRequest, ctx: CmdAddContext) => Promise<void> {
  return async (req, ctx) => {
    if (!deps.ready()) throw new CniAddError('ERR_AGENT_NOT_READY', 'the node agent is starting (startup snapshot not restored yet); retry');
    const { path: netnsPath } = sandboxNetns(deps.hostMountsRoot, req.netns, deps.refusedNetns?.() ?? ownNetns());
    // Upstream's body carries no UID: by name only. A stale Terminating object is refused below (fail closed).
    const ref = { namespace: req.podNamespace, name: req.podName };
    const { pod, namespace } = await lookupPod(deps.controller, deps.client, ref, { ...deps.lookup, signal: ctx.signal });
    const decision = decideAmbient(pod, namespace, deps.policy);
    if (!decision.enroll) {
      throw new CniAddError('ERR_POD_NOT_ELIGIBLE', `pod ${ref.namespace}/${ref.name} is unexpectedly not eligible for ambient enrollment: ${decision.message}`);
    }
    await deps.controller.addPodToMesh(pod, req.ips, netnsPath, { signal: ctx.signal, ztunnelConnectWaitMs: ZTUNNEL_CONNECT_WAIT_MS });
  };
}
