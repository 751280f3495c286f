// Configuration from a pod, the way Istio derives it: the node agent's
// per-pod overrides for ambient (spec §5.11) and the CNI plugin's sidecar
// redirect parameters from annotations + the istio-proxy container (§2.6).
import type { InpodConfig } from './inpod.js';
import type { InterceptionMode, SidecarConfig } from './sidecar.js';
import {
  checkId, checkInterfaces, checkPortSpec, checkCidrSpec, parseGoBool,
} from './validate.js';
import { parseIp } from '../net/ip.js';

export const ANNOTATIONS = {
  dnsCapture: 'ambient.istio.io/dns-capture',
  bypassInboundCapture: 'ambient.istio.io/bypass-inbound-capture',
  rerouteVirtualInterfaces: 'istio.io/reroute-virtual-interfaces',
  kubevirtInterfaces: 'traffic.sidecar.istio.io/kubevirtInterfaces',
  interceptionMode: 'sidecar.istio.io/interceptionMode',
  includeOutboundIPRanges: 'traffic.sidecar.istio.io/includeOutboundIPRanges',
  excludeOutboundIPRanges: 'traffic.sidecar.istio.io/excludeOutboundIPRanges',
  includeInboundPorts: 'traffic.sidecar.istio.io/includeInboundPorts',
  excludeInboundPorts: 'traffic.sidecar.istio.io/excludeInboundPorts',
  includeOutboundPorts: 'traffic.sidecar.istio.io/includeOutboundPorts',
  excludeOutboundPorts: 'traffic.sidecar.istio.io/excludeOutboundPorts',
  excludeInterfaces: 'traffic.sidecar.istio.io/excludeInterfaces',
} as const;

type StringMap = Record<string, string>;

function checkMap(v: unknown, what: string): StringMap {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new TypeError(`${what} must be an object of strings`);
  for (const [k, x] of Object.entries(v)) if (typeof x !== 'string') throw new TypeError(`${what}[${JSON.stringify(k)}] must be a string`);
  return v as StringMap;
}

const has = (m: StringMap, k: string) => Object.prototype.hasOwnProperty.call(m, k);

export interface InpodPodInput {
  annotations?: Record<string, string>;
  /** AMBIENT_DNS_CAPTURE (the node-wide default). Default true. */
  dnsCaptureGlobal?: boolean;
  /** AMBIENT_IPV6. Default false. */
  ipv6?: boolean;
  snatIp?: string;
  snatIpv6?: string;
}

/** Ambient per-pod overrides: unparsable booleans are ignored, as upstream does. */
export function inpodConfigFromPod(input: InpodPodInput = {}): InpodConfig {
  const a = checkMap(input.annotations, 'annotations');
  const cfg: InpodConfig = { dnsCapture: input.dnsCaptureGlobal ?? true, ingressBypass: false };
  if (input.ipv6 !== undefined) cfg.ipv6 = input.ipv6;
  if (input.snatIp !== undefined) cfg.snatIp = input.snatIp;
  if (input.snatIpv6 !== undefined) cfg.snatIpv6 = input.snatIpv6;
  if (has(a, ANNOTATIONS.bypassInboundCapture)) {
    const v = parseGoBool(a[ANNOTATIONS.bypassInboundCapture]!);
    if (v !== undefined) cfg.ingressBypass = v;
  }
  if (has(a, ANNOTATIONS.dnsCapture)) {
    const v = parseGoBool(a[ANNOTATIONS.dnsCapture]!);
    if (v !== undefined) cfg.dnsCapture = v;
  }
  if (has(a, ANNOTATIONS.rerouteVirtualInterfaces)) {
    const names = a[ANNOTATIONS.rerouteVirtualInterfaces]!.split(',').map((s) => s.trim()).filter((s) => s !== '');
    cfg.virtualInterfaces = checkInterfaces(names, ANNOTATIONS.rerouteVirtualInterfaces);
  }
  return cfg;
}

export interface SidecarPodInput {
  annotations?: Record<string, string>;
  /** istio-proxy securityContext runAsUser / runAsGroup (0 or absent → 1337). */
  proxyUid?: number;
  proxyGid?: number;
  /** istio-proxy container environment (ISTIO_META_DNS_CAPTURE, ISTIO_DUAL_STACK, INVALID_DROP). */
  proxyEnv?: Record<string, string>;
  /**
   * Whether the pod netns has IPv6, when known directly. Otherwise derived
   * from `podIps` (addresses in interface order) as Istio does.
   */
  ipv6?: boolean;
  podIps?: string[];
  /** The plugin's own environment: ISTIO_OUTBOUND_OWNER_GROUPS(_EXCLUDE), ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR. */
  pluginEnv?: Record<string, string>;
}

function annotationError(key: string, err: unknown): never {
  const e = err as Error;
  const msg = `annotation ${key}: ${e.message}`;
  throw err instanceof RangeError ? new RangeError(msg) : new TypeError(msg);
}

/** The CNI plugin's sidecar parameters (Istio's NewRedirect + FillConfigFromEnvironment). */
export function sidecarConfigFromPod(input: SidecarPodInput = {}): SidecarConfig & { dualStack: boolean } {
  const a = checkMap(input.annotations, 'annotations');
  const env = checkMap(input.proxyEnv, 'proxyEnv');
  const plugin = checkMap(input.pluginEnv, 'pluginEnv');
  const get = <T>(key: string, parse: (v: string) => T): T | undefined => {
    if (!has(a, key)) return undefined;
    try {
      return parse(a[key]!);
    } catch (err) {
      return annotationError(key, err);
    }
  };
  const envBool = (k: string) => (has(env, k) ? parseGoBool(env[k]!) ?? false : false);

  const mode = get(ANNOTATIONS.interceptionMode, (v) => {
    if (v !== 'REDIRECT' && v !== 'TPROXY') throw new TypeError(`unknown interception mode ${JSON.stringify(v)} (REDIRECT or TPROXY)`);
    return v as InterceptionMode;
  }) ?? 'REDIRECT';
  const id = (v: number | undefined, what: string) => (v === undefined || v === 0 ? 1337 : Number(checkId(v, what)));

  // The plugin appends the proxy's own ports to the inbound exclusions, de-duplicated.
  const exIn = get(ANNOTATIONS.excludeInboundPorts, (v) => checkPortSpec(v === '*' ? '*' : v, 'excludeInboundPorts')) ?? [15020];
  const excludeInboundPorts = exIn === '*' ? '*' : [...new Set([...exIn, 15020, 15021, 15090])];

  const virt = has(a, ANNOTATIONS.rerouteVirtualInterfaces)
    ? get(ANNOTATIONS.rerouteVirtualInterfaces, (v) => checkInterfaces(v, 'rerouteVirtualInterfaces'))
    : get(ANNOTATIONS.kubevirtInterfaces, (v) => checkInterfaces(v, 'kubevirtInterfaces'));

  const dualStack = envBool('ISTIO_DUAL_STACK');
  let ipv6 = input.ipv6;
  if (ipv6 === undefined && input.podIps !== undefined) {
    const fams = input.podIps.map((ip) => parseIp(ip).family);
    ipv6 = dualStack ? fams.includes(6) : fams[0] === 6;
  }

  const cfg: SidecarConfig & { dualStack: boolean } = {
    ipv6: ipv6 ?? false,
    mode,
    proxyUid: id(input.proxyUid, 'proxyUid'),
    proxyGid: id(input.proxyGid, 'proxyGid'),
    includeOutboundCidrs: get(ANNOTATIONS.includeOutboundIPRanges, (v) => checkCidrSpec(v, 'includeOutboundIPRanges', true)) ?? '*',
    excludeOutboundCidrs: (get(ANNOTATIONS.excludeOutboundIPRanges, (v) => checkCidrSpec(v, 'excludeOutboundIPRanges', false)) ?? []) as string[],
    includeInboundPorts: get(ANNOTATIONS.includeInboundPorts, (v) => checkPortSpec(v, 'includeInboundPorts')) ?? '*',
    excludeInboundPorts,
    includeOutboundPorts: get(ANNOTATIONS.includeOutboundPorts, (v) => checkPortSpec(v, 'includeOutboundPorts')) ?? [],
    excludeOutboundPorts: get(ANNOTATIONS.excludeOutboundPorts, (v) => checkPortSpec(v, 'excludeOutboundPorts')) ?? [15020],
    excludeInterfaces: get(ANNOTATIONS.excludeInterfaces, (v) => checkInterfaces(v, 'excludeInterfaces')) ?? [],
    rerouteVirtualInterfaces: virt ?? [],
    dnsCapture: envBool('ISTIO_META_DNS_CAPTURE'),
    invalidDrop: envBool('INVALID_DROP'),
    dualStack,
  };
  if (has(plugin, 'ISTIO_OUTBOUND_OWNER_GROUPS')) cfg.ownerGroupsInclude = plugin.ISTIO_OUTBOUND_OWNER_GROUPS!;
  if (has(plugin, 'ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE')) cfg.ownerGroupsExclude = plugin.ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE!;
  if (has(plugin, 'ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR')) cfg.hostIpv4LoopbackCidr = plugin.ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR!;
  return cfg;
}

