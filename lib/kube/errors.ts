// The kube layer's two error classes. Callers branch on `code`, never on
// message text: KubeConfigError for credentials that cannot be loaded (which
// file, which field), KubeError for a request that failed (which verb on which
// resource, the HTTP status, the server's own reason and message).

/** Why credentials could not be loaded. */
export type KubeConfigErrorCode =
  /** A file is missing or unreadable (`file` names it). */
  | 'KUBE_CONFIG_UNREADABLE'
  /** A kubeconfig is not YAML/JSON, or a field is missing or malformed (`field` names it). */
  | 'KUBE_CONFIG_INVALID'
  /** The kubeconfig asks for an auth method this layer does not implement (exec, auth-provider). */
  | 'KUBE_CONFIG_UNSUPPORTED'
  /** In-cluster: KUBERNETES_SERVICE_HOST/PORT are unset or malformed (`field` names the variable). */
  | 'KUBE_CONFIG_NO_CLUSTER'
  /** A token file exists but is empty. */
  | 'KUBE_TOKEN_EMPTY';

export class KubeConfigError extends Error {
  override readonly name = 'KubeConfigError';
  constructor(
    readonly code: KubeConfigErrorCode,
    message: string,
    /** The file at fault, when there is one. */
    readonly file?: string,
    /** The field at fault (kubeconfig path such as `clusters[0].cluster.server`, or an env var). */
    readonly field?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * What went wrong with a request. HTTP failures map from the status (and the
 * Status reason where it refines it: 409 AlreadyExists vs Conflict); failures
 * without a response are Timeout (our own deadline), Unavailable (connection
 * refused/reset, DNS, TLS) or Aborted (the caller cancelled).
 */
export type KubeErrorCode =
  | 'BadRequest' | 'Unauthorized' | 'Forbidden' | 'NotFound' | 'MethodNotAllowed'
  | 'Conflict' | 'AlreadyExists' | 'Gone' | 'Invalid' | 'TooManyRequests'
  | 'InternalError' | 'Unavailable' | 'Timeout' | 'Aborted' | 'Unknown';

export type KubeVerb = 'get' | 'list' | 'watch' | 'create' | 'patch' | 'update' | 'delete';

export interface KubeErrorDetails {
  code: KubeErrorCode;
  /** HTTP status; 0 when no response arrived. */
  status: number;
  verb: KubeVerb;
  /** Resource as RBAC names it: `pods`, `pods/status`, `events`, `namespaces`. */
  resource: string;
  namespace?: string;
  name?: string;
  /** The apiserver's Status.reason (e.g. `Expired`, `AlreadyExists`), when it sent one. */
  reason?: string;
  /** The apiserver's Status.message, or the transport error's message. */
  serverMessage?: string;
  cause?: unknown;
}

export class KubeError extends Error {
  override readonly name = 'KubeError';
  readonly code: KubeErrorCode;
  readonly status: number;
  readonly verb: KubeVerb;
  readonly resource: string;
  readonly namespace: string | undefined;
  readonly objectName: string | undefined;
  readonly reason: string | undefined;
  readonly serverMessage: string | undefined;

  constructor(d: KubeErrorDetails) {
    const target = [d.namespace, d.name].filter(Boolean).join('/');
    super(`${d.verb} ${d.resource}${target ? ` ${target}` : ''}: ${d.code}${d.status ? ` (HTTP ${d.status})` : ''}${d.serverMessage ? `: ${d.serverMessage}` : ''}`,
      d.cause === undefined ? undefined : { cause: d.cause });
    this.code = d.code;
    this.status = d.status;
    this.verb = d.verb;
    this.resource = d.resource;
    this.namespace = d.namespace;
    this.objectName = d.name;
    this.reason = d.reason;
    this.serverMessage = d.serverMessage;
  }

  /** Worth retrying: the server or the path to it had a bad moment (5xx, 429, timeout, connection). Never a 4xx verdict. */
  get transient(): boolean {
    return TRANSIENT.has(this.code);
  }
}

const TRANSIENT = new Set<KubeErrorCode>(['TooManyRequests', 'InternalError', 'Unavailable', 'Timeout']);

export const isKubeError = (err: unknown, code?: KubeErrorCode): err is KubeError =>
  err instanceof KubeError && (code === undefined || err.code === code);
export const isNotFound = (err: unknown): boolean => isKubeError(err, 'NotFound');
export const isConflict = (err: unknown): boolean => isKubeError(err, 'Conflict');
export const isTransient = (err: unknown): boolean => err instanceof KubeError && err.transient;

/** The code for an HTTP status (and the Status reason, which refines 409 and 504). */
export function codeForStatus(status: number, reason?: string): KubeErrorCode {
  switch (status) {
    case 400: return 'BadRequest';
    case 401: return 'Unauthorized';
    case 403: return 'Forbidden';
    case 404: return 'NotFound';
    case 405: return 'MethodNotAllowed';
    case 409: return reason === 'AlreadyExists' ? 'AlreadyExists' : 'Conflict';
    case 410: return 'Gone';
    case 422: return 'Invalid';
    case 429: return 'TooManyRequests';
    case 502: case 503: return 'Unavailable';
    case 504: return 'Timeout';
    default:
      if (status === 500 && (reason === 'Timeout' || reason === 'ServerTimeout')) return 'Timeout';
      if (status >= 500) return 'InternalError';
      return 'Unknown';
  }
}

// Transport-level errno codes (node-fetch FetchError.code / socket errors) that mean "no usable connection".
const CONNECTION_ERRNOS = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
  'ECONNABORTED', 'ERR_SOCKET_CONNECTION_TIMEOUT', 'UND_ERR_SOCKET', 'ERR_STREAM_PREMATURE_CLOSE',
]);

/** A transport error (no HTTP response) as a code; TLS failures count as Unavailable too. */
export function codeForTransport(err: unknown): KubeErrorCode {
  const e = err as { code?: unknown; errno?: unknown; type?: unknown; name?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : typeof e?.errno === 'string' ? e.errno : undefined;
  if (code === 'ETIMEDOUT' || e?.type === 'request-timeout') return 'Timeout';
  if (code && (CONNECTION_ERRNOS.has(code) || code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || /^(CERT_|UNABLE_TO_|DEPTH_ZERO|SELF_SIGNED)/.test(code))) return 'Unavailable';
  if (e?.type === 'system') return 'Unavailable';
  return 'Unknown';
}
