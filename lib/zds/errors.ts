// The one error class of the ZDS layer. Branch on `code`, never on the text.
// Transport failures keep the underlying NetError as `cause`.
export type ZdsErrorCode =
  /** Bytes that are not a valid ZDS message (bad varint, wire type, length, UTF-8). */
  | 'ZDS_DECODE'
  /** podAdded with no ztunnel connected (retryable, as upstream's "no ztunnel connection"). */
  | 'ZDS_NO_CONNECTION'
  /** ztunnel answered with a non-empty Ack.error; the text is in `nack`. */
  | 'ZDS_NACK'
  /** A write, ack, hello or admission deadline passed (the connection is closed). */
  | 'ZDS_TIMEOUT'
  /** The connection went away before the request was answered. */
  | 'ZDS_CONNECTION_CLOSED'
  /** The server was closed. */
  | 'ZDS_SERVER_CLOSED'
  /** The peer broke the protocol (unsolicited data, fds on a response, no ack payload). */
  | 'ZDS_PROTOCOL'
  /** A request would encode to more than 1024 bytes (ztunnel's receive buffer). */
  | 'ZDS_TOO_LARGE'
  /** A connection that had not said hello was closed to make room for newer ones (maxPendingHellos). */
  | 'ZDS_EVICTED'
  /**
   * A connection was closed at once because a bound was reached: the admission queue
   * (maxAdmissionQueue) or the routable connections (maxConnections). The peer may retry.
   */
  | 'ZDS_OVERLOAD'
  /**
   * A snapshot entry's add could not be encoded (bad workload info, too large): it was sent as
   * `keep`, or left out when not even a keep can name it (no uid).
   */
  | 'ZDS_BAD_ENTRY'
  /**
   * A pod's netns could not be passed in a snapshot (dup failed: EMFILE/ENFILE, a closed handle
   * still in the cache, a bad fd). The connection was closed instead of sending a snapshot with a
   * hole; retryable (ztunnel reconnects and gets a fresh snapshot). The errno is in `cause`.
   */
  | 'ZDS_SNAPSHOT_INCOMPLETE';

export class ZdsError extends Error {
  readonly code: ZdsErrorCode;
  /** ztunnel's error text, for ZDS_NACK. */
  declare readonly nack?: string;
  /** The connection id the failure happened on, when there was one. */
  declare readonly connection?: number;

  constructor(code: ZdsErrorCode, message: string, opts: { cause?: unknown; nack?: string; connection?: number } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    const self = this as { -readonly [K in 'nack' | 'connection']?: ZdsError[K] };
    if (opts.nack !== undefined) self.nack = opts.nack;
    if (opts.connection !== undefined) self.connection = opts.connection;
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'ZdsError', enumerable: false });
  }
}

export const isZdsError = (err: unknown, code?: ZdsErrorCode): err is ZdsError =>
  err instanceof ZdsError && (code === undefined || err.code === code);
