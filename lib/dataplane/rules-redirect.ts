// The dataplane's rule backend: the in-pod redirection of lib/redirect, with
// the node-wide settings and each pod's annotations. Models are pure and
// depend only on the configuration, so they are built once per distinct one.
import type { Netns } from '../net/netns/netns.js';
import { apply, prepare, remove, verify, type EngineOptions } from '../redirect/apply.js';
import { inpodConfigFromPod } from '../redirect/annotations.js';
import { inpodRules } from '../redirect/inpod.js';
import type { RuleModel } from '../redirect/model.js';
import type { DriftReport, PodInfo, RuleBackend } from './types.js';

export interface NodeRedirectSettings {
  /** AMBIENT_DNS_CAPTURE. Default true. */
  dnsCapture?: boolean;
  /** AMBIENT_IPV6. Default true here (dual stack), as the demo node is. */
  ipv6?: boolean;
  snatIp?: string;
  snatIpv6?: string;
}

export class RedirectRules implements RuleBackend {
  private readonly models = new Map<string, RuleModel>();
  /** The model of a pod without annotations: it depends on the (fixed) settings only. */
  private plain: RuleModel | undefined;

  constructor(private readonly engine: EngineOptions, private readonly settings: NodeRedirectSettings = {}) {}

  /** The model for a pod (cached by its effective configuration). */
  modelFor(pod: PodInfo): RuleModel {
    // No annotations (the common case): skip deriving and stringifying the configuration per pod.
    const a: unknown = pod.annotations;
    const plain = a == null || (typeof a === 'object' && !Array.isArray(a) && Object.keys(a).length === 0);
    if (plain && this.plain) return this.plain;
    const cfg = inpodConfigFromPod({
      ...(pod.annotations ? { annotations: pod.annotations } : {}),
      dnsCaptureGlobal: this.settings.dnsCapture ?? true,
      ipv6: this.settings.ipv6 ?? true,
      ...(this.settings.snatIp ? { snatIp: this.settings.snatIp } : {}),
      ...(this.settings.snatIpv6 ? { snatIpv6: this.settings.snatIpv6 } : {}),
    });
    const key = JSON.stringify(cfg);
    let model = this.models.get(key);
    if (!model) {
      model = inpodRules(cfg);
      this.models.set(key, model);
    }
    if (plain) this.plain = model;
    return model;
  }

  /** Builds the engine's references for a pod without annotations (the common case) ahead of time. */
  async prepare(): Promise<void> {
    await prepare(this.modelFor({ uid: '', name: '', namespace: '', ips: [] }), this.engine);
  }

  async apply(ns: Netns, pod: PodInfo): Promise<void> {
    await apply(ns, this.modelFor(pod), this.engine);
  }

  verify(ns: Netns, pod: PodInfo): Promise<DriftReport> {
    return verify(ns, this.modelFor(pod), this.engine);
  }

  async remove(ns: Netns, pod: PodInfo): Promise<void> {
    await remove(ns, this.modelFor(pod), this.engine);
  }
}
