// mesh/: pure decisions about which pods belong in the mesh. No I/O.
export * from './constants.js';
export type { MeshPod, MeshNamespace, MeshObjectMeta } from './types.js';
export { compileLabelSelector, SelectorError } from './label-selector.js';
export type { LabelSelector, LabelSelectorRequirement, SelectorOperator, CompiledSelector } from './label-selector.js';
export { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from './enablement.js';
export type { EnablementSelector, CompiledEnablementSelectors } from './enablement.js';
export {
  isZtunnelPod, isAgentPod, isNamespaceExcluded, isHostNetworkPod, hasSidecar, isTerminal, isDeleting,
} from './exclusions.js';
export { decideAmbient } from './decision.js';
export type { AmbientDecision, SkipReason, SelectionPolicy } from './decision.js';
