// The kube layer's public surface: the package entry `podwire/kube` (not re-exported from
// lib/index.ts, which must not load client-node).
export { KubeError, KubeConfigError, isKubeError, isNotFound, isConflict, isTransient } from './errors.js';
export type { KubeErrorCode, KubeConfigErrorCode, KubeVerb } from './errors.js';
export { KubeCredentials, loadCredentials, loadKubeconfig, inClusterConfig, SERVICEACCOUNT_DIR } from './config.js';
export type { InClusterOptions, KubeconfigOptions, LoadOptions, TlsMaterial } from './config.js';
export { KubeClient, USER_AGENT } from './client.js';
export type { KubeClientOptions, CallOptions, CallTarget } from './client.js';
export { InvalidNameError, checkName, checkPodName, checkNamespace, nameProblem } from './names.js';
export type { NameRule, NameProblem, InvalidNameReason } from './names.js';
export { withRetry } from './retry.js';
export type { RetryOptions } from './retry.js';
export { Informer, objectKey } from './informer.js';
export type { InformerOptions, InformerStats, BackoffOptions } from './informer.js';
export { PODS, NAMESPACES, NODES, podInformer, namespaceInformer, stripManagedFields } from './resources.js';
export type { ResourceSpec, ListQuery, PodInformerOptions } from './resources.js';
export { getPod, patchPodMetadata, patchPodStatus, annotatePodViaStatus, deletePod } from './pods.js';
export type { PodRef, MetadataPatch, GetOptions, DeletePodOptions } from './pods.js';
export { createPodEvent } from './events.js';
export { missingAccess, accessLabel } from './access.js';
export type { AccessAttributes } from './access.js';
export type { PodEvent, PodIdentity } from './events.js';
