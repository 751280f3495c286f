// The one error class of the ZDS layer. Branch on `code`, never on the text.
// Transport failures keep the underlying NetError as `cause`.
export type ZdsErrorCode =
  /** Bytes that are not a valid ZDS message (bad varint, wire type, length, UTF-8). */
  | 'ZDS_DECODE'
  /** podAdded with no ztunnel connected (retryable, as upstream's "no ztunnel connection"). */
  | 'ZDS_NO_CONNECTION'
  /** ztunnel answered with a non-empty Ack.error; the text is in `nack`. */
  | 'ZDS_NACK'
  /** A write, ack or hello deadline passed (the connection is closed). */
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
  /** A snapshot entry was skipped (bad uid or workload info, too large, closed netns); the rest was sent. */
  | 'ZDS_BAD_ENTRY';

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
