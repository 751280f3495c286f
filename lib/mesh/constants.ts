// The labels, annotations and names Istio's node agent keys on (spec §2.3, §2.4, §5.3, §5.6).
// Spelled exactly as upstream: these are the drop-in contract with istiod, ztunnel and users.

/** Namespace/pod label the default enablement selectors use (`ambient` enables, `none` opts a pod out). */
export const DATAPLANE_MODE_LABEL = 'istio.io/dataplane-mode';
export const DATAPLANE_MODE_AMBIENT = 'ambient';
export const DATAPLANE_MODE_NONE = 'none';

/** Set by the sidecar injector; its presence means the pod has a sidecar and ambient must leave it alone. */
export const SIDECAR_STATUS_ANNOTATION = 'sidecar.istio.io/status';

/** The agent's enrollment record on the pod (`enabled` | `pending` | absent). */
export const REDIRECTION_ANNOTATION = 'ambient.istio.io/redirection';

/** ztunnel pods: label `app=ztunnel` in SYSTEM_NAMESPACE. */
export const ZTUNNEL_APP_LABEL = 'app';
export const ZTUNNEL_APP_VALUE = 'ztunnel';

/** The agent's own DaemonSet pods are named `istio-cni-node-*` in POD_NAMESPACE (the plugin's self-bypass). */
export const AGENT_POD_NAME_PREFIX = 'istio-cni-node-';

/** Pod phases after which a pod never runs again. */
export const TERMINAL_PHASES: ReadonlySet<string> = new Set(['Succeeded', 'Failed']);
