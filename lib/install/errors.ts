// The installer's one error class. Callers branch on `code` (and `stage`), never on the text.
import type { InstallResult } from './results.js';

/** Which part of an installation (spec §3.1) or of the loop around it failed. */
export type InstallStage = 'copy-binaries' | 'kubeconfig' | 'cni-config' | 'watch' | 'cleanup';

export type InstallErrorCode =
  /** The plugin binary to install is missing or not a regular file. */
  | 'ERR_BINARY_SOURCE'
  /** A target directory for the binary does not exist or is not a directory. */
  | 'ERR_BINARY_TARGET'
  /** A file system operation failed (`cause` is the Node error, `errno` its code, e.g. EROFS). */
  | 'ERR_IO'
  /** KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is not set (kubeconfig option on). */
  | 'ERR_KUBECONFIG_SERVICE'
  /** The directory has no `.conf`/`.conflist` file at all (libcni: "no networks found"). */
  | 'ERR_NO_NETWORKS'
  /** It has some, but none is valid (libcni: "no valid networks found"). */
  | 'ERR_NO_VALID_NETWORKS'
  /** A CNI config file is not what it must be (not JSON, no `plugins`, a plugin without a string `type`, ...). */
  | 'ERR_CNI_CONFIG_INVALID'
  /** The primary config disappeared between choosing it and reading it. */
  | 'ERR_CNI_CONFIG_REMOVED'
  /** Istio-owned mode: no primary config other than the owned file itself. */
  | 'ERR_PRIMARY_UNKNOWN'
  /** The plugin entry given to merge is not a JSON object. */
  | 'ERR_ENTRY_INVALID'
  /** A file watch could not be set up or failed. */
  | 'ERR_WATCH'
  /** stop() was called while the installer was waiting (not a failure; never counted). */
  | 'ERR_STOPPED';

export class InstallError extends Error {
  /** The system error code of an ERR_IO (`EROFS`, `EACCES`, ...). */
  readonly errno: string | undefined;

  constructor(
    readonly code: InstallErrorCode,
    readonly stage: InstallStage,
    message: string,
    opts: { path?: string; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.path = opts.path;
    const c = opts.cause as { code?: unknown } | undefined;
    this.errno = typeof c?.code === 'string' ? c.code : undefined;
  }

  /** The file or directory concerned, when there is one. */
  readonly path: string | undefined;

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'InstallError', enumerable: false });
  }
}

/** The `istio_cni_installs_total{result}` a failed stage counts as (spec §3.1); undefined: not counted. */
export function failureResult(stage: InstallStage): InstallResult | undefined {
  switch (stage) {
    case 'copy-binaries': return 'COPY_BINARIES_FAILURE';
    case 'kubeconfig': return 'CREATE_KUBECONFIG_FAILURE';
    case 'cni-config': return 'CREATE_CNI_CONFIG_FAILURE';
    default: return undefined;
  }
}

/** Wraps a Node fs error as ERR_IO of `stage` (an InstallError passes through). */
export function ioError(stage: InstallStage, what: string, path: string, err: unknown): InstallError {
  if (err instanceof InstallError) return err;
  return new InstallError('ERR_IO', stage, `${what} ${path}: ${(err as Error)?.message ?? String(err)}`, { path, cause: err });
}
