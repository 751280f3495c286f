// The names and limits podwire-cni (C++, native/cni-shim/shim_constants.h) and the agent
// (TypeScript) must agree on. test/cni/constants.test.ts reads the header and fails when
// the two differ, so a change lands in both or in neither.

/** CNI_AGENT_RUN_DIR's default: the plugin sockets, the DEL queue and the decision file live here. */
export const DEFAULT_RUN_DIR = '/var/run/istio-cni';
/** The plugin endpoint's socket in the run dir. */
export const PLUGIN_EVENT_SOCKET = 'pluginevent.sock';
/** Where the shim leaves a record per DEL it could not deliver (the agent drains it at start). */
export const DEL_QUEUE_DIR = 'cni-del-queue';
/** Records the queue holds at most; past that the shim fails the DEL (the runtime retries). */
export const DEL_QUEUE_MAX = 4096;
/** The node-local decision file the shim reads when the agent is unreachable (docs/cni.md). */
export const DECISION_FILE = 'cni-decisions.json';
/** Its format version: a file of another version is ignored (the shim fails closed). */
export const DECISION_FILE_VERSION = 1;
/** The agent's own DaemonSet pods (the plugin's self-bypass); the mesh layer owns the name. */
export { AGENT_POD_NAME_PREFIX } from '../mesh/constants.js';
/** CNI spec versions the plugin speaks; 0.1.0 and 0.2.0 predate chaining and are refused. */
export const SUPPORTED_VERSIONS = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
/** The version the plugin implements (VERSION answers it). */
export const CURRENT_VERSION = '1.1.0' as const;
