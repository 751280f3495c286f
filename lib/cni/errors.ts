// CNI errors as the spec defines them: a numeric code, a message and
// optional details, printed as JSON on stdout with exit 1. Codes 1-99 are
// the spec's; 100+ are podwire's own.
export const CNI_CODES = {
  /** Incompatible CNI version. */
  INCOMPATIBLE_VERSION: 1,
  /** Unsupported field in network configuration. */
  UNSUPPORTED_FIELD: 2,
  /** Container unknown or does not exist. */
  UNKNOWN_CONTAINER: 3,
  /** Invalid necessary environment variables (CNI_COMMAND, CNI_CONTAINERID, ...). */
  INVALID_ENV: 4,
  /** I/O failure. */
  IO: 5,
  /** Failed to decode content (bad JSON). */
  DECODE: 6,
  /** Invalid network config. */
  INVALID_CONFIG: 7,
  /** Try again later: the runtime (kubelet) retries the sandbox. */
  TRY_AGAIN: 11,
  /** STATUS: the plugin is not available. */
  NOT_AVAILABLE: 50,
  /** podwire: the pod could not be put into the mesh (and a retry will not help by itself). */
  ENROLL_FAILED: 100,
  /** podwire: CHECK found the pod's redirection drifted. */
  REDIRECTION_DRIFT: 101,
  /** podwire: sidecar rules could not be programmed. */
  SIDECAR_FAILED: 102,
  /** podwire: CNI_NETNS is the node's netns or the agent's own, never a pod's (refused before anything touches it). */
  HOST_NETNS: 103,
} as const;

export class CniError extends Error {
  constructor(readonly cniCode: number, message: string, readonly details = '', opts: { cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
  }

  /** The error object a plugin prints (CNI spec "Error"). */
  toJSON(cniVersion: string): { cniVersion: string; code: number; msg: string; details?: string } {
    return { cniVersion, code: this.cniCode, msg: this.message, ...(this.details ? { details: this.details } : {}) };
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'CniError', enumerable: false });
  }
}

/** The agent cannot take CNI work yet (startup snapshot not restored): the shim retries (HTTP 503). */
export class AgentNotReadyError extends Error {
  readonly code = 'ERR_AGENT_NOT_READY';
  static {
    Object.defineProperty(this.prototype, 'name', { value: 'AgentNotReadyError', enumerable: false });
  }
}
