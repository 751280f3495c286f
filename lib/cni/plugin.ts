// The CNI plugin's decisions, served by the agent (architecture "The CNI
// plugin: a native thin client"): the shim forwards each invocation here and
// prints what comes back. ADD follows §2.3's order without any API call per
// pod (the pod comes from the informer cache, a bounded wait, then one GET):
// self-bypass → not a Kubernetes pod → excluded namespace → ambient (enroll;
// the answer waits for ztunnel's ack, so the network is redirected before any
// container starts) → sidecar (istio-init's rules) → pass. Every ADD success
// prints the prevResult in the config's CNI version, as upstream's plugin does (result.ts).
//
// Sandboxes are told apart by their netns identity (device + inode of the
// nsfs file): a pod's old sandbox and its running one share the pod's name
// and UID but never a live netns. DEL and GC take a pod out only when the
// sandbox they are about is the one the dataplane holds; when that cannot be
// shown the pod stays enrolled (the informer's pod delete removes a pod that
// is really gone), never the other way round. A removal is the controller's
// removePodFromMesh: wholly, never half (the annotation and in-pod rules too).
import type { V1Pod } from '@kubernetes/client-node';
import { CniAddError, ownNetns, sameIdentity, sandboxNetns, type CniController, type NetnsIdentity, type RefusedNetns } from './cmdadd.js';
import { lookupPod, PodLookupError, type PodLookupOptions } from './pod-lookup.js';
import { EnrollError } from '../dataplane/errors.js';
import type { Dataplane } from '../dataplane/dataplane.js';
import type { CacheEntry } from '../dataplane/pod-cache.js';
import type { KubeClient } from '../kube/client.js';
import { isKubeError } from '../kube/errors.js';
import { decideAmbient, type SelectionPolicy } from '../mesh/decision.js';
import { AGENT_POD_NAME_PREFIX } from './constants.js';
import { ZTUNNEL_CONNECT_WAIT_MS } from './invoke.js';
import { parseCniArgs, type K8sArgs } from './cni-args.js';
import { CNI_CODES, CniError, AgentNotReadyError } from './errors.js';
import type { Invocation } from './invocation.js';
import { parseNetConf, type PluginConf } from './netconf.js';
import { passThrough, resultIps } from './result.js';
import { programSidecar, sidecarEligibility } from './sidecar.js';
import { checkVersion, CURRENT_VERSION } from './version.js';

/** What the shim prints and exits with. */
export interface CniReply {
  exitCode: 0 | 1;
  stdout: string;
}

/** One sandbox's attachment, as ADD saw it (DEL, CHECK and GC find the pod by it). */
export interface Attachment {
  containerId: string;
  ifname: string;
  uid: string;
  namespace: string;
  name: string;
  /** The identity of CNI_NETNS when ADD enrolled it (undefined: it could not be read). */
  netns: NetnsIdentity | undefined;
}

export interface CniPluginDeps {
  controller: CniController;
  client: KubeClient;
  policy: SelectionPolicy;
  /** What the plugin reads (the enrolled netns) and CHECK verifies; removal goes through the controller. */
  dataplane: Pick<Dataplane, 'verify' | 'cache'>;
  /** HOST_MOUNTS_ROOT: CNI_NETNS is opened under it. */
  hostMountsRoot: string;
  /**
   * The startup snapshot is restored (the dataplane knows every enrolled pod):
   * before that ADD (of a pod it must look up), DEL, CHECK and GC are answered
   * 503 (the shim retries or queues) and STATUS code 50.
   */
  ready: () => boolean;
  /** Netns identities never accepted as a pod's: the node's and the agent's own (default: the agent's own). */
  refusedNetns?: () => readonly RefusedNetns[];
  lookup?: PodLookupOptions;
  log?: (level: 'debug' | 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;
}

export type AddOutcome = 'bypass-agent-pod' | 'not-kubernetes' | 'excluded' | 'ambient' | 'sidecar' | 'none';

const NOT_READY = 'the node agent is starting (startup snapshot not restored yet)';

/**
 * What ADD prints: the prevResult as upstream's plugin prints it (result.ts,
 * byte for byte). A prevResult whose cniVersion is none podwire speaks is
 * code 1 (docs/cni.md); one that does not decode in the config's version, 6.
 */
function passThroughOutput(conf: PluginConf): string {
  const v = (conf.prevResult as { cniVersion?: unknown } | undefined)?.cniVersion;
  if (typeof v === 'string' && v !== '') checkVersion(v);
  return passThrough(conf.prevResult, conf.cniVersion);
}

export class CniPlugin {
  /**
   * Attachments by container id, each with its netns identity (in memory: an
   * agent restart forgets them; DEL then goes by the netns alone).
   */
  readonly attachments = new Map<string, Attachment>();
  private readonly log: NonNullable<CniPluginDeps['log']>;
  private running = 0;
  private settled: Array<() => void> = [];

  constructor(private readonly deps: CniPluginDeps) {
    this.log = deps.log ?? (() => undefined);
  }

  /**
   * Runs one invocation; a CniError becomes the error JSON, anything else code
   * 11 (the runtime retries). AgentNotReadyError is thrown (the endpoint answers 503).
   * `signal` cancels an ADD: it then answers code 11 and leaves nothing enrolled or recorded.
   */
  async handle(inv: Invocation, signal?: AbortSignal): Promise<CniReply> {
    this.running++;
    try {
      return await this.run(inv, signal);
    } finally {
      if (--this.running === 0) for (const r of this.settled.splice(0)) r();
    }
  }

  /** Resolves once no invocation is running (a cancelled one included: its undo has finished). */
  idle(): Promise<void> {
    return this.running === 0 ? Promise.resolve() : new Promise((r) => { this.settled.push(r); });
  }

  private async run(inv: Invocation, signal?: AbortSignal): Promise<CniReply> {
    let version: string = CURRENT_VERSION;
    try {
      const conf = parseNetConf(inv.config);
      version = conf.cniVersion;
      const args = parseCniArgs(inv.args);
      switch (inv.command) {
        case 'ADD': return await this.add(inv, conf, args, signal);
        case 'DEL': return await this.del(inv, args);
        case 'CHECK': return await this.check(inv, args);
        case 'GC': return await this.gc(conf);
        case 'STATUS': return this.status();
      }
    } catch (err) {
      if (err instanceof AgentNotReadyError) throw err;
      const e = toCniError(err);
      return { exitCode: 1, stdout: `${JSON.stringify(e.toJSON(version))}\n` };
    }
  }

  private async add(inv: Invocation, conf: PluginConf, args: K8sArgs, signal?: AbortSignal): Promise<CniReply> {
    // prevResult is read first, whatever the branch: a malformed one is code 6 (1 for its version), never a branch's error.
    const stdout = passThroughOutput(conf);
    const outcome = await this.addOutcome(inv, conf, args, signal);
    this.log(outcome === 'none' ? 'debug' : 'info', `cni ADD: ${outcome}`, { pod: `${args.podNamespace}/${args.podName}`, container: inv.containerId });
    return { exitCode: 0, stdout };
  }

  private refused(): readonly RefusedNetns[] {
    return this.deps.refusedNetns?.() ?? ownNetns();
  }

  private async addOutcome(inv: Invocation, conf: PluginConf, args: K8sArgs, signal?: AbortSignal): Promise<AddOutcome> {
    // Self-bypass before anything that needs the API (a rebooted node's agent pod must start first).
    if (args.podName.startsWith(AGENT_POD_NAME_PREFIX) && args.podNamespace === conf.podNamespace && conf.podNamespace !== '') return 'bypass-agent-pod';
    if (args.podName === '' || args.podNamespace === '') return 'not-kubernetes';
    if (conf.excludeNamespaces.includes(args.podNamespace)) return 'excluded';
    const ips = resultIps(conf.prevResult);  // decoded already (passThroughOutput): every address is a CIDR
    // The node's or the agent's netns is never a pod's: refused before anything is looked up or programmed.
    const sandbox = sandboxNetns(this.deps.hostMountsRoot, inv.netns, this.refused());
    const pod = await this.findPod(args, signal);
    const ref = `${args.podNamespace}/${args.podName}`;
    if (conf.ambientEnabled) {
      const decision = decideAmbient(pod.pod, pod.namespace, this.deps.policy);
      // 'pod-deleting' is decided last: the pod would be ambient but is going away. Starting it
      // unredirected would be failing open: the runtime retries until the pod is gone.
      if (decision.reason === 'pod-deleting') throw new CniError(CNI_CODES.TRY_AGAIN, `pod ${ref} is being deleted: not started outside the ambient mesh`);
      if (decision.enroll) {
        if (ips.length === 0) throw new CniError(CNI_CODES.INVALID_CONFIG, `pod ${ref} is ambient but prevResult has no IPs (is podwire chained after the main plugin?)`);
        await this.enroll(inv, args, pod.pod, ips, sandbox, signal);
        return 'ambient';
      }
    }
    const sidecar = sidecarEligibility(pod.pod);
    if (!sidecar.eligible) return 'none';
    try {
      await programSidecar(sandbox.path, pod.pod, sidecar.proxy, { backend: conf.nativeNftables ? 'nftables' : 'iptables', podIps: ips });
    } catch (err) {
      throw new CniError(CNI_CODES.SIDECAR_FAILED, `podwire could not program sidecar rules for pod ${ref}: ${(err as Error).message}`, '', { cause: err });
    }
    return 'sidecar';
  }

  private async enroll(inv: Invocation, args: K8sArgs, pod: V1Pod, ips: string[], sandbox: { path: string; id: NetnsIdentity | undefined }, signal?: AbortSignal): Promise<void> {
    const ref = `${args.podNamespace}/${args.podName}`;
    const uid = pod.metadata?.uid ?? '';
    const cancelled = () => new CniError(CNI_CODES.TRY_AGAIN, `podwire: CNI ADD of pod ${ref} cancelled (${String(signal?.reason?.message ?? signal?.reason ?? 'aborted')})`);
    if (signal?.aborted) throw cancelled();
    try {
      await this.deps.controller.addPodToMesh(pod, ips, sandbox.path, { ...(signal ? { signal } : {}), ztunnelConnectWaitMs: ZTUNNEL_CONNECT_WAIT_MS });
    } catch (err) {
      if (signal?.aborted) throw cancelled();
      // The dataplane's own refusal of the node's netns (defense in depth behind sandboxNetns).
      if (err instanceof EnrollError && err.code === 'ERR_NETNS_IS_HOST') throw new CniError(CNI_CODES.HOST_NETNS, err.message, '', { cause: err });
      const retry = err instanceof EnrollError ? err.retryable : true;
      throw new CniError(retry ? CNI_CODES.TRY_AGAIN : CNI_CODES.ENROLL_FAILED,
        `podwire could not add pod ${ref} to the ambient mesh: ${(err as Error).message}`, '', { cause: err });
    }
    if (signal?.aborted) {
      // Finished although cancelled (a controller that does not take the signal): the runtime is
      // told to try again and tears this sandbox down, so nothing of it may stay enrolled.
      const entry = this.deps.dataplane.cache.get(uid);
      if (entry?.netns && sameIdentity(entry.netns.ns.id, sandbox.id)) await this.removeFromMesh(entry, 'cni-del');
      throw cancelled();
    }
    // This sandbox is the pod's enrolled one now: an older sandbox's attachment must not take it out later.
    for (const [id, a] of this.attachments) if (a.uid === uid && id !== inv.containerId) this.attachments.delete(id);
    this.attachments.set(inv.containerId, {
      containerId: inv.containerId, ifname: inv.ifname, uid, namespace: args.podNamespace, name: args.podName,
      netns: sandbox.id ?? this.deps.dataplane.cache.get(uid)?.netns?.ns.id,
    });
  }

  private async findPod(args: K8sArgs, signal?: AbortSignal): Promise<{ pod: V1Pod; namespace: Parameters<typeof decideAmbient>[1] }> {
    if (!this.deps.ready()) throw new AgentNotReadyError(NOT_READY);
    const ref = { namespace: args.podNamespace, name: args.podName, ...(args.podUid ? { uid: args.podUid } : {}) };
    try {
      return await lookupPod(this.deps.controller, this.deps.client, ref, { ...this.deps.lookup, ...(signal ? { signal } : {}) });
    } catch (err) {
      const what = err instanceof PodLookupError ? `not found with UID ${args.podUid} (${err.message}); retry once the API server has it`
        : isKubeError(err) && err.code === 'NotFound' ? 'not found' : `could not be read: ${(err as Error).message}`;
      throw new CniError(CNI_CODES.TRY_AGAIN, `pod ${args.podNamespace}/${args.podName} ${what}`, '', { cause: err });
    }
  }

  /** Takes a pod out of the mesh wholly (ztunnel, probe set, in-pod rules, annotation, the controller's entry). */
  // Only while the pod is still enrolled in the netns seen now: an ADD of a new sandbox that lands
  // between this check and the removal is left alone (the dataplane re-checks under the pod's lock).
  private async removeFromMesh(entry: CacheEntry, reason: 'cni-del' | 'cni-gc'): Promise<boolean> {
    const ifNetns = CniPlugin.held(entry);
    if (!ifNetns) return false;
    const r = await this.deps.controller.removePodFromMesh(entry.pod.uid, { reason, ifNetns }) as { skipped?: true } | undefined;
    return r?.skipped !== true;
  }

  /** The netns the dataplane holds for an entry, while it holds it. */
  private static held(entry: CacheEntry | undefined): NetnsIdentity | undefined {
    return entry?.netns && !entry.netns.released ? entry.netns.ns.id : undefined;
  }

  // DEL tolerates an empty CNI_NETNS (ctr sends one, and so does a runtime whose netns is gone) and a pod that was never enrolled.
  private async del(inv: Invocation, args: K8sArgs): Promise<CniReply> {
    // Before the snapshot is restored the pod may not be known yet: 503, the shim retries (or queues it).
    if (!this.deps.ready()) throw new AgentNotReadyError(NOT_READY);
    let given: NetnsIdentity | undefined;
    try {
      given = inv.netns === '' ? undefined : sandboxNetns(this.deps.hostMountsRoot, inv.netns, []).id;
    } catch {
      given = undefined;  // not a usable path: it proves nothing, like an empty one (DEL never fails on it)
    }
    const att = this.attachments.get(inv.containerId);
    let entry: CacheEntry | undefined;
    let ours: boolean;
    if (att) {
      // The sandbox ADD enrolled, if the dataplane still holds its netns and the DEL (naming a readable netns) is about it.
      entry = this.deps.dataplane.cache.get(att.uid);
      ours = sameIdentity(CniPlugin.held(entry), att.netns) && (given === undefined || sameIdentity(given, att.netns));
    } else {
      // No attachment (the agent restarted, or the ADD never reached it): only a DEL naming the very
      // netns the pod is enrolled with. An empty or vanished netns proves nothing: the pod stays.
      const uid = args.podUid || this.deps.controller.pods.get(args.podName, args.podNamespace)?.metadata?.uid;
      entry = uid ? this.deps.dataplane.cache.get(uid) : undefined;
      ours = sameIdentity(CniPlugin.held(entry), given);
    }
    if (entry && ours && await this.removeFromMesh(entry, 'cni-del')) {
      this.log('info', 'cni DEL: pod removed from the mesh', { pod: `${entry.pod.namespace}/${entry.pod.name}`, container: inv.containerId });
    } else if (entry) {
      this.log('info', 'cni DEL: not the enrolled sandbox; pod left in the mesh', { pod: `${entry.pod.namespace}/${entry.pod.name}`, container: inv.containerId });
    }
    this.attachments.delete(inv.containerId);
    return { exitCode: 0, stdout: '' };
  }

  /** The enrolled pod CHECK is about: by its attachment, else by UID or name in the dataplane cache. */
  private enrolledPod(inv: Invocation, args: K8sArgs): CacheEntry | undefined {
    const att = this.attachments.get(inv.containerId);
    const uid = att?.uid || args.podUid || this.deps.controller.pods.get(args.podName, args.podNamespace)?.metadata?.uid;
    return uid ? this.deps.dataplane.cache.get(uid) : undefined;
  }

  private async check(inv: Invocation, args: K8sArgs): Promise<CniReply> {
    if (!this.deps.ready()) throw new AgentNotReadyError(NOT_READY);
    const sandbox = sandboxNetns(this.deps.hostMountsRoot, inv.netns, this.refused());
    const entry = this.enrolledPod(inv, args);
    if (!entry) return { exitCode: 0, stdout: '' };  // not an ambient pod of ours: nothing to check
    const drift = await this.deps.dataplane.verify(entry.pod, { netnsPath: sandbox.path });
    if (!drift.ok) throw new CniError(CNI_CODES.REDIRECTION_DRIFT, `pod ${entry.pod.namespace}/${entry.pod.name}: redirection drifted`, drift.drift.join('; '));
    return { exitCode: 0, stdout: '' };
  }

  // GC (CNI 1.1): every attachment the runtime no longer holds is released; its pod is taken out
  // only if the dataplane still holds that attachment's netns. Without the list the runtime said
  // nothing about what it holds: nothing is released.
  private async gc(conf: PluginConf): Promise<CniReply> {
    if (!this.deps.ready()) throw new AgentNotReadyError(NOT_READY);
    if (!conf.validAttachments) return { exitCode: 0, stdout: '' };
    const valid = new Set(conf.validAttachments.map((a) => `${a.containerID}/${a.ifname}`));
    for (const att of [...this.attachments.values()]) {
      if (valid.has(`${att.containerId}/${att.ifname}`)) continue;
      const entry = this.deps.dataplane.cache.get(att.uid);
      if (entry && sameIdentity(CniPlugin.held(entry), att.netns) && await this.removeFromMesh(entry, 'cni-gc')) {
        this.log('info', 'cni GC: stale attachment released, pod removed from the mesh', { pod: `${att.namespace}/${att.name}`, container: att.containerId });
      } else {
        this.log('info', 'cni GC: stale attachment forgotten (not the enrolled sandbox)', { pod: `${att.namespace}/${att.name}`, container: att.containerId });
      }
      this.attachments.delete(att.containerId);
    }
    return { exitCode: 0, stdout: '' };
  }

  private status(): CniReply {
    if (!this.deps.ready()) throw new CniError(CNI_CODES.NOT_AVAILABLE, 'the podwire node agent is not ready yet');
    return { exitCode: 0, stdout: '' };
  }
}

/** Typed errors of the plugin's parts as CNI errors; anything unexpected is code 11 (the runtime retries). */
function toCniError(err: unknown): CniError {
  if (err instanceof CniAddError) {
    if (err.code === 'ERR_HOST_NETNS') return new CniError(CNI_CODES.HOST_NETNS, err.message, '', { cause: err });
    if (err.code === 'ERR_BAD_NETNS') return new CniError(CNI_CODES.INVALID_ENV, `CNI_NETNS: ${err.message}`, '', { cause: err });
  }
  if (err instanceof CniError) return err;
  return new CniError(CNI_CODES.TRY_AGAIN, (err as Error)?.message ?? String(err), '', { cause: err });
}
