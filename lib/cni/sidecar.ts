// Sidecar mode in the plugin (§2.3 step 8, §2.6, §2.7): whether a pod gets
// istio-init's rules from the plugin, and programming them into its netns
// with the redirect engine (iptables byte-identical to Istio's goldens; nft
// when the plugin entry says native_nftables).
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { sidecarConfigFromPod } from '../redirect/annotations.js';
import { apply, type Backend } from '../redirect/apply.js';
import { sidecarRules } from '../redirect/sidecar.js';
import { parseGoBool } from '../redirect/validate.js';
import { Netns } from '../net/netns/netns.js';

const SIDECAR_STATUS = 'sidecar.istio.io/status';
const INJECT = 'sidecar.istio.io/inject';

export type SidecarEligibility = { eligible: true; proxy: V1Container } | { eligible: false; reason: string };

const byName = (pod: V1Pod, name: string) =>
  [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])].find((c) => c.name === name);

/** §2.3 step 8, first match wins; not eligible = the plugin leaves the pod alone. */
export function sidecarEligibility(pod: V1Pod): SidecarEligibility {
  if (byName(pod, 'istio-init')) return { eligible: false, reason: 'has an istio-init container (it programs the rules itself)' };
  const proxy = byName(pod, 'istio-proxy');
  const disable = proxy?.env?.find((e) => e.name === 'DISABLE_ENVOY')?.value;
  if (disable !== undefined && parseGoBool(disable) === true) return { eligible: false, reason: 'istio-proxy has DISABLE_ENVOY=true' };
  if (!proxy) return { eligible: false, reason: 'no istio-proxy container' };
  const args = proxy.args ?? [];
  if (args.length >= 2 && args[0] === 'proxy' && args[1] !== '' && args[1] !== 'sidecar') return { eligible: false, reason: `proxy type ${args[1]}` };
  const inject = pod.metadata?.labels?.[INJECT] ?? pod.metadata?.annotations?.[INJECT];
  if (inject !== undefined && parseGoBool(inject) === false) return { eligible: false, reason: `${INJECT}=${inject}` };
  if (pod.metadata?.annotations?.[SIDECAR_STATUS] === undefined) return { eligible: false, reason: `no ${SIDECAR_STATUS} annotation` };
  return { eligible: true, proxy };
}

/**
 * Programs the sidecar rules into `netns`: an open handle (used as is, left open: the caller
 * proved it and owns it) or a path (opened and closed here). `podIps` (the
 * prevResult's, in interface order) tell whether the pod is IPv6, as Istio
 * reads it from the netns's first address. Throws the engine's errors and
 * RangeError/TypeError for an annotation that does not validate.
 */
export async function programSidecar(netns: string | Netns, pod: V1Pod, proxy: V1Container, opts: { backend: Backend; podIps: string[] }): Promise<void> {
  const env = Object.fromEntries((proxy.env ?? []).filter((e) => typeof e.value === 'string').map((e) => [e.name, e.value!]));
  const input: Parameters<typeof sidecarConfigFromPod>[0] = { annotations: pod.metadata?.annotations ?? {}, proxyEnv: env, podIps: opts.podIps };
  const sc = proxy.securityContext;
  if (typeof sc?.runAsUser === 'number') input.proxyUid = sc.runAsUser;
  if (typeof sc?.runAsGroup === 'number') input.proxyGid = sc.runAsGroup;
  const { dualStack: _d, ...cfg } = sidecarConfigFromPod(input);
  const model = sidecarRules(cfg);
  if (typeof netns !== 'string') {
    await apply(netns, model, { backend: opts.backend });
    return;
  }
  const ns = Netns.open(netns);
  try {
    await apply(ns, model, { backend: opts.backend });
  } finally {
    ns.close();
  }
}
