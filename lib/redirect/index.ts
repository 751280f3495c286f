// podwire's redirection rules as data: the in-pod (ambient), host-probe and
// sidecar rule sets, their configuration from pod annotations, and the two
// renderers (iptables-restore input, nft script). Pure: no I/O.
export * from './model.js';
export { inpodRules, resolveInpodConfig, type InpodConfig, type ResolvedInpodConfig } from './inpod.js';
export { hostProbeRules, type HostProbeConfig } from './hostprobe.js';
export {
  sidecarRules, resolveSidecarConfig, type SidecarConfig, type ResolvedSidecarConfig, type InterceptionMode,
} from './sidecar.js';
export {
  ANNOTATIONS, inpodConfigFromPod, sidecarConfigFromPod, type InpodPodInput, type SidecarPodInput,
} from './annotations.js';
export { toIptablesRestore, toIptablesText, iptablesRuleText } from './render-iptables.js';
export { toNft, nftRuleText } from './render-nft.js';
export { parseGoBool, type PortSpec, type CidrSpec } from './validate.js';
export { inpodTables, hostTables, sidecarTables } from './tables.js';
export {
  apply, verify, remove, prepare, execIptables, execNft, nativeNft,
  type ApplyResult, type Backend, type DriftReport, type EngineOptions, type IptablesRunner, type NftSender, type RemoveResult,
} from './apply.js';
