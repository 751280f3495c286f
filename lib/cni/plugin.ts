// The CNI plugin's decisions, served by the agent (architecture "The CNI
// plugin: a native thin client"): the shim forwards each invocation here and
// prints what comes back. ADD follows §2.3's order without any API call per
// pod (the pod comes from the informer cache, a bounded wait, then one GET):
// self-bypass → not a Kubernetes pod → excluded namespace → ambient (enroll;
// the answer waits for ztunnel's ack, so the network is redirected before any
// container starts) → sidecar (istio-init's rules) → pass. Every success
// prints the prevResult unchanged, in the config's CNI version.
import type { V1Pod } from '@kubernetes/client-node';
import type { AmbientController } from '../ambient/controller.js';
import { hostPath } from './cmdadd.js';
import { lookupPod, type PodLookupOptions } from './pod-lookup.js';
import { EnrollError } from '../dataplane/errors.js';
import type { Dataplane } from '../dataplane/dataplane.js';
import type { KubeClient } from '../kube/client.js';
import { isKubeError } from '../kube/errors.js';
import { decideAmbient, type SelectionPolicy } from '../mesh/decision.js';
import { AGENT_POD_NAME_PREFIX } from './constants.js';
import { parseCniArgs, type K8sArgs } from './cni-args.js';
import { CNI_CODES, CniError, AgentNotReadyError } from './errors.js';
import type { Invocation } from './invocation.js';
import { parseNetConf, type PluginConf } from './netconf.js';
import { convertResult, emptyResult, resultIps } from './result.js';
import { programSidecar, sidecarEligibility } from './sidecar.js';
import { CURRENT_VERSION } from './version.js';

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
}

export interface CniPluginDeps {
  controller: Pick<AmbientController, 'pods' | 'namespaces' | 'addPodToMesh'>;
  client: KubeClient;
  policy: SelectionPolicy;
  dataplane: Pick<Dataplane, 'unenroll' | 'verify' | 'cache'>;
  /** HOST_MOUNTS_ROOT: CNI_NETNS is opened under it. */
  hostMountsRoot: string;
  /** Informers synced: before that, work that needs the pod is answered 503 (the shim retries). */
  ready: () => boolean;
  lookup?: PodLookupOptions;
  log?: (level: 'debug' | 'info' | 'warn' | 'error', message: string, fields?: Record<string, unknown>) => void;
}

export type AddOutcome = 'bypass-agent-pod' | 'not-kubernetes' | 'excluded' | 'ambient' | 'sidecar' | 'none';

export class CniPlugin {
  /** Attachments by container id (in memory: an agent restart forgets them; DEL then finds the pod by name). */
  readonly attachments = new Map<string, Attachment>();
  private readonly log: NonNullable<CniPluginDeps['log']>;

  constructor(private readonly deps: CniPluginDeps) {
    this.log = deps.log ?? (() => undefined);
  }

  /** Runs one invocation; a CniError becomes the error JSON, anything else code 11 (the runtime retries). */
  async handle(inv: Invocation, signal?: AbortSignal): Promise<CniReply> {
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
      const e = err instanceof CniError ? err : new CniError(CNI_CODES.TRY_AGAIN, (err as Error)?.message ?? String(err), '', { cause: err });
      return { exitCode: 1, stdout: `${JSON.stringify(e.toJSON(version))}\n` };
    }
  }

  private pass(conf: PluginConf): CniReply {
    const out = conf.prevResult ? convertResult(conf.prevResult, conf.cniVersion) : emptyResult(conf.cniVersion);
    return { exitCode: 0, stdout: `${JSON.stringify(out)}\n` };
  }

  private async add(inv: Invocation, conf: PluginConf, args: K8sArgs, signal?: AbortSignal): Promise<CniReply> {
    const outcome = await this.addOutcome(inv, conf, args, signal);
    this.log(outcome === 'none' ? 'debug' : 'info', `cni ADD: ${outcome}`, { pod: `${args.podNamespace}/${args.podName}`, container: inv.containerId });
    return this.pass(conf);
  }

  private async addOutcome(inv: Invocation, conf: PluginConf, args: K8sArgs, signal?: AbortSignal): Promise<AddOutcome> {
    // Self-bypass before anything that needs the API (a rebooted node's agent pod must start first).
    if (args.podName.startsWith(AGENT_POD_NAME_PREFIX) && args.podNamespace === conf.podNamespace && conf.podNamespace !== '') return 'bypass-agent-pod';
    if (args.podName === '' || args.podNamespace === '') return 'not-kubernetes';
    if (conf.excludeNamespaces.includes(args.podNamespace)) return 'excluded';
    const pod = await this.findPod(args, signal);
    const ips = resultIps(conf.prevResult);
    const netnsPath = hostPath(this.deps.hostMountsRoot, inv.netns);
    if (conf.ambientEnabled) {
      const decision = decideAmbient(pod.pod, pod.namespace, this.deps.policy);
      if (decision.enroll) {
        if (ips.length === 0) throw new CniError(CNI_CODES.INVALID_CONFIG, `pod ${args.podNamespace}/${args.podName} is ambient but prevResult has no IPs (is podwire chained after the main plugin?)`);
        try {
          await this.deps.controller.addPodToMesh(pod.pod, ips, netnsPath);
        } catch (err) {
          const retry = err instanceof EnrollError ? err.retryable : true;
          throw new CniError(retry ? CNI_CODES.TRY_AGAIN : CNI_CODES.ENROLL_FAILED,
            `podwire could not add pod ${args.podNamespace}/${args.podName} to the ambient mesh: ${(err as Error).message}`, '', { cause: err });
        }
        this.attachments.set(inv.containerId, { containerId: inv.containerId, ifname: inv.ifname, uid: pod.pod.metadata?.uid ?? '', namespace: args.podNamespace, name: args.podName });
        return 'ambient';
      }
    }
    const sidecar = sidecarEligibility(pod.pod);
    if (!sidecar.eligible) return 'none';
    try {
      await programSidecar(netnsPath, pod.pod, sidecar.proxy, { backend: conf.nativeNftables ? 'nftables' : 'iptables', podIps: ips });
    } catch (err) {
      throw new CniError(CNI_CODES.SIDECAR_FAILED, `podwire could not program sidecar rules for pod ${args.podNamespace}/${args.podName}: ${(err as Error).message}`, '', { cause: err });
    }
    return 'sidecar';
  }

  private async findPod(args: K8sArgs, signal?: AbortSignal): Promise<{ pod: V1Pod; namespace: Parameters<typeof decideAmbient>[1] }> {
    if (!this.deps.ready()) throw new AgentNotReadyError('the node agent is starting (informers not synced yet)');
    try {
      return await lookupPod(this.deps.controller, this.deps.client, { namespace: args.podNamespace, name: args.podName },
        { ...this.deps.lookup, ...(signal ? { signal } : {}) });
    } catch (err) {
      const what = isKubeError(err) && err.code === 'NotFound' ? 'not found' : `could not be read: ${(err as Error).message}`;
      throw new CniError(CNI_CODES.TRY_AGAIN, `pod ${args.podNamespace}/${args.podName} ${what}`, '', { cause: err });
    }
  }

  /** The enrolled pod an invocation is about: by its attachment, else by name in the dataplane cache. */
  private enrolledPod(inv: Invocation, args: K8sArgs) {
    const att = this.attachments.get(inv.containerId);
    const uid = att?.uid || args.podUid || this.deps.controller.pods.get(args.podName, args.podNamespace)?.metadata?.uid;
    return uid ? this.deps.dataplane.cache.get(uid) : undefined;
  }

  // DEL tolerates an empty CNI_NETNS (ctr sends one) and a pod that was never enrolled.
  private async del(inv: Invocation, args: K8sArgs): Promise<CniReply> {
    // Before the snapshot is restored the pod may not be known yet: 503, the shim retries (or queues it).
    if (!this.deps.ready()) throw new AgentNotReadyError('the node agent is starting (informers not synced yet)');
    const att = this.attachments.get(inv.containerId);
    const entry = this.enrolledPod(inv, args);
    // Only the sandbox that was enrolled is taken out: a DEL for an older or failed sandbox of the same pod must not.
    if (entry && (att || this.sameNetns(entry, inv.netns))) {
      await this.deps.dataplane.unenroll(entry.pod, { podDeleted: true });
      this.log('info', 'cni DEL: pod removed from the mesh', { pod: `${entry.pod.namespace}/${entry.pod.name}`, container: inv.containerId });
    }
    this.attachments.delete(inv.containerId);
    return { exitCode: 0, stdout: '' };
  }

  private sameNetns(entry: NonNullable<ReturnType<Dataplane['cache']['get']>>, netns: string): boolean {
    if (netns === '' || !entry.netns) return false;
    try {
      return entry.netns.isAt(hostPath(this.deps.hostMountsRoot, netns));
    } catch {
      return false;  // not an absolute path
    }
  }

  private async check(inv: Invocation, args: K8sArgs): Promise<CniReply> {
    const entry = this.enrolledPod(inv, args);
    if (!entry) return { exitCode: 0, stdout: '' };  // not an ambient pod of ours: nothing to check
    const drift = await this.deps.dataplane.verify(entry.pod, { netnsPath: hostPath(this.deps.hostMountsRoot, inv.netns) });
    if (!drift.ok) throw new CniError(CNI_CODES.REDIRECTION_DRIFT, `pod ${entry.pod.namespace}/${entry.pod.name}: redirection drifted`, drift.drift.join('; '));
    return { exitCode: 0, stdout: '' };
  }

  // GC (CNI 1.1): every attachment the runtime no longer holds is released. Without the list the
  // runtime said nothing about what it holds: nothing is released.
  private async gc(conf: PluginConf): Promise<CniReply> {
    if (!conf.validAttachments) return { exitCode: 0, stdout: '' };
    const valid = new Set((conf.validAttachments ?? []).map((a) => `${a.containerID}/${a.ifname}`));
    for (const att of [...this.attachments.values()]) {
      if (valid.has(`${att.containerId}/${att.ifname}`)) continue;
      const entry = this.deps.dataplane.cache.get(att.uid);
      if (entry) await this.deps.dataplane.unenroll(entry.pod, { podDeleted: true });
      this.attachments.delete(att.containerId);
      this.log('info', 'cni GC: stale attachment released', { pod: `${att.namespace}/${att.name}`, container: att.containerId });
    }
    return { exitCode: 0, stdout: '' };
  }

  private status(): CniReply {
    if (!this.deps.ready()) throw new CniError(CNI_CODES.NOT_AVAILABLE, 'the podwire node agent is not ready yet');
    return { exitCode: 0, stdout: '' };
  }
}
