// The agent's shutdown decision (istio-cni.md §5.13): clean up the node (CNI config and plugin,
// §3.6; host rules and probe set) or leave it in place because another agent is coming.
// Leaving it means fail closed: new pods' CNI ADD fails until the new agent is ready, instead of
// pods starting outside the mesh during an upgrade or a reboot. Cleaning up is right only when
// the agent is leaving this node for good: the DaemonSet is gone or being deleted, or no longer
// targets the node, or the uninstall already removed our access.
import type { V1DaemonSet, V1Node } from '@kubernetes/client-node';
import { KubeClient } from '../kube/client.js';
import { isKubeError, KubeConfigError, KubeError } from '../kube/errors.js';
import { podSpecFitsNode } from '../kube/node-affinity.js';
import { daemonSetPath, nodePath } from '../kube/paths.js';
import { AGENT_DAEMONSET_NAME } from '../kube/permissions.js';
import { sleep } from '../kube/retry.js';
import { checkTimeout } from '../util/timeout.js';

export interface CleanupDecision {
  skipCleanup: boolean;
  /** Short human text for the shutdown log line. */
  reason: string;
}

export interface SafeUpgradeOptions {
  client: KubeClient;
  /** POD_NAMESPACE: the DaemonSet's namespace. */
  namespace: string;
  nodeName: string;
  /** AMBIENT_DISABLE_SAFE_UPGRADE: always clean up, without asking the API. */
  disableSafeUpgrade: boolean;
  /** Default 'istio-cni-node' (the only name the agent's ClusterRole may get). */
  daemonSetName?: string;
  /** ISTIO_OWNED_CNI_CONFIG: when the API cannot answer, skip cleanup and retry twice (else clean up at once). */
  istioOwnedConfig?: boolean;
  /** Delay between attempts, default 1 000 ms (upstream's). */
  retryDelayMs?: number;
  /** Stops retrying: the default result is returned. */
  signal?: AbortSignal;
}

function nonEmpty(v: unknown, name: string): string {
  if (typeof v !== 'string' || v === '') throw new TypeError(`decideCleanup: ${name} must be a non-empty string`);
  return v;
}

function bool(v: unknown, name: string): boolean {
  if (typeof v !== 'boolean') throw new TypeError(`decideCleanup: ${name} must be a boolean`);
  return v;
}

function describe(err: unknown): string {
  if (err instanceof KubeError) return `${err.verb} ${err.resource}: ${err.code}`;
  if (err instanceof KubeConfigError) return err.code;
  return err instanceof Error ? err.name : String(err);
}

const cleanup = (reason: string): CleanupDecision => ({ skipCleanup: false, reason });

/**
 * Never throws for API failures: every outcome is a decision. Throws only for bad options
 * (TypeError; RangeError for retryDelayMs, from the shared timeout check).
 */
export async function decideCleanup(opts: SafeUpgradeOptions): Promise<CleanupDecision> {
  if (!(opts?.client instanceof KubeClient)) throw new TypeError('decideCleanup: client must be a KubeClient');
  const { client, signal } = opts;
  const namespace = nonEmpty(opts.namespace, 'namespace');
  const nodeName = nonEmpty(opts.nodeName, 'nodeName');
  const disabled = bool(opts.disableSafeUpgrade, 'disableSafeUpgrade');
  const name = nonEmpty(opts.daemonSetName ?? AGENT_DAEMONSET_NAME, 'daemonSetName');
  const istioOwned = bool(opts.istioOwnedConfig ?? false, 'istioOwnedConfig');
  const retryDelayMs = checkTimeout(opts.retryDelayMs ?? 1000, 'retryDelayMs', { allowZero: true });
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('decideCleanup: signal must be an AbortSignal');

  if (disabled) return cleanup('safe upgrade disabled (AMBIENT_DISABLE_SAFE_UPGRADE)');

  const ds = `DaemonSet ${namespace}/${name}`;
  // Upstream's fallback when the API cannot answer: an istio-owned CNI config is deleted whole by
  // cleanup (every pod's CNI on the node breaks), so then it leans to keeping it, after retries.
  const retries = istioOwned ? 2 : 0;
  let last: unknown;
  let attempts = 0;
  for (let i = 0; i <= retries; i++) {
    if (i > 0) await sleep(retryDelayMs, signal);
    if (signal?.aborted) break;
    attempts++;
    try {
      const set = await client.call({ verb: 'get', resource: 'daemonsets', namespace, name },
        (o) => client.send<V1DaemonSet>({ method: 'GET', path: daemonSetPath(namespace, name), kind: 'DaemonSet' }, o), signal ? { signal } : {});
      if (set.metadata?.deletionTimestamp) return cleanup(`uninstall: ${ds} is being deleted`);
      const node = await client.call({ verb: 'get', resource: 'nodes', name: nodeName },
        (o) => client.send<V1Node>({ method: 'GET', path: nodePath(nodeName), kind: 'Node' }, o), signal ? { signal } : {});
      // Upstream checks only the required node affinity; spec.nodeSelector is checked too since
      // the scheduler requires it as well: a relabelled node leaves the DaemonSet either way.
      const fit = podSpecFitsNode(set.spec?.template?.spec, node);
      if (!fit.fits) return cleanup(`${ds} no longer targets node ${nodeName} (its ${fit.by} does not match the node)`);
      return { skipCleanup: true, reason: `upgrade or reboot: ${ds} exists and still targets node ${nodeName}` };
    } catch (err) {
      if (isKubeError(err, 'NotFound')) {
        return cleanup(err.resource === 'nodes' ? `node ${nodeName} no longer exists` : `uninstall: ${ds} not found`);
      }
      // 401: uninstall deleted the ServiceAccount, so its token is no longer valid (upstream).
      // 403, beyond upstream: uninstall deleted the ClusterRoleBinding first, so the token still
      // authenticates but may read nothing. Either way the agent's access is gone for good, and
      // retrying cannot bring it back. (Also 403: a daemonSetName the role's resourceNames
      // does not list — a misconfiguration that makes every shutdown clean up.)
      if (isKubeError(err, 'Unauthorized') || isKubeError(err, 'Forbidden')) {
        return cleanup(`uninstall: get ${err.resource} answered ${err.code} (HTTP ${err.status}): the agent's access was removed`);
      }
      last = err;
    }
  }
  const why = signal?.aborted ? 'aborted' : `gave up after ${attempts} attempt(s)`;
  const lastText = last === undefined ? '' : ` (last: ${describe(last)})`;
  return { skipCleanup: istioOwned, reason: `${why}${lastText}; default for ${istioOwned ? 'istio-owned config: skip cleanup' : 'non-istio-owned config: clean up'}` };
}
