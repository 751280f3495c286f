// Unary gRPC over HTTP/2 on a unix socket, with node:http2 — all a test
// "kubelet" needs to talk CRI to containerd (test/helpers/cri.ts), without
// @grpc/grpc-js. The wire protocol (grpc/PROTOCOL-HTTP2.md): a POST to
// /<package>.<Service>/<Method> with content-type application/grpc and
// `te: trailers`; request and response are length-prefixed messages (1 byte
// compressed flag, 4 bytes big-endian length); the status is `grpc-status` /
// `grpc-message` (percent-encoded) in the trailers, or in the headers of a
// trailers-only response. We never offer compression, so the server sends none.
import * as http2 from 'node:http2';
import * as net from 'node:net';

/** gRPC status codes by number (google.rpc.Code). */
export const GRPC_CODES = ['OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND',
  'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE',
  'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'] as const;

export class GrpcError extends Error {
  /** The numeric gRPC status (2 UNKNOWN, 5 NOT_FOUND, 14 UNAVAILABLE, ...). */
  readonly code: number;
  /** Its name, e.g. 'UNKNOWN'. */
  readonly codeName: string;
  /** The server's grpc-message, decoded (or our own description for transport failures). */
  readonly details: string;
  readonly method: string;
  constructor(method: string, code: number, details: string) {
    const codeName = GRPC_CODES[code] ?? `CODE_${code}`;
    super(`${method}: ${codeName}: ${details}`);
    this.name = 'GrpcError';
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.method = method;
  }
}

/** grpc-message is percent-encoded UTF-8; a malformed escape is kept as is. */
function decodeGrpcMessage(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s.replace(/%([0-9A-Fa-f]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  }
}

function frame(msg: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(msg.length, 1);
  return Buffer.concat([head, msg]);
}

export class GrpcUnixClient {
  private session: http2.ClientHttp2Session | undefined;
  private closed = false;

  constructor(readonly socketPath: string, readonly defaultTimeoutMs = 60_000) {}

  private connect(): http2.ClientHttp2Session {
    if (this.closed) throw new Error(`gRPC client for ${this.socketPath} is closed`);
    const s = this.session;
    if (s && !s.closed && !s.destroyed) return s;
    const session = http2.connect('http://localhost', { createConnection: () => net.connect(this.socketPath) });
    session.on('error', () => {
      // surfaced through the streams; a broken session is replaced on the next call
    });
    session.on('close', () => {
      if (this.session === session) this.session = undefined;
    });
    session.unref(); // an idle client never keeps the process alive; a call's timer does
    this.session = session;
    return session;
  }

  /** One unary call: `path` is `/runtime.v1.RuntimeService/Version`; resolves the response bytes. */
  unary(path: string, request: Buffer, opts: { timeoutMs?: number } = {}): Promise<Buffer> {
    const timeoutMs = opts.timeoutMs ?? this.defaultTimeoutMs;
    const method = path.slice(path.lastIndexOf('/') + 1);
    return new Promise((resolve, reject) => {
      let session: http2.ClientHttp2Session;
      try {
        session = this.connect();
      } catch (err) {
        reject(err);
        return;
      }
      const stream = session.request({
        ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers',
        'grpc-timeout': `${Math.max(1, Math.ceil(timeoutMs))}m`,
      });
      const chunks: Buffer[] = [];
      let status: number | undefined;
      let message = '';
      let httpStatus: number | undefined;
      let done = false;
      const finish = (err: Error | undefined, value?: Buffer): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve(value!);
      };
      const timer = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        finish(new GrpcError(method, 4, `no answer in ${timeoutMs} ms`));
      }, timeoutMs + 1000); // the server's own deadline (grpc-timeout) normally fires first
      const takeStatus = (h: http2.IncomingHttpHeaders): void => {
        if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']);
        if (typeof h['grpc-message'] === 'string') message = decodeGrpcMessage(h['grpc-message']);
      };
      stream.on('response', (h) => {
        httpStatus = Number(h[':status']);
        takeStatus(h);
      });
      stream.on('trailers', takeStatus);
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', (err) => finish(new GrpcError(method, 14, `transport: ${err.message}`)));
      stream.on('close', () => {
        if (done) return;
        if (httpStatus !== undefined && httpStatus !== 200) {
          finish(new GrpcError(method, 13, `HTTP status ${httpStatus}${message ? `: ${message}` : ''}`));
          return;
        }
        if (status === undefined) {
          finish(new GrpcError(method, 14, `stream closed without a grpc-status (rst code ${stream.rstCode ?? '?'})`));
          return;
        }
        if (status !== 0) {
          finish(new GrpcError(method, status, message));
          return;
        }
        const body = Buffer.concat(chunks);
        if (body.length < 5) {
          finish(new GrpcError(method, 13, `response of ${body.length} bytes has no message`));
          return;
        }
        if (body[0] !== 0) {
          finish(new GrpcError(method, 13, 'compressed response (none was offered)'));
          return;
        }
        const n = body.readUInt32BE(1);
        if (n + 5 !== body.length) {
          finish(new GrpcError(method, 13, `response framing: ${n} + 5 bytes declared, ${body.length} received`));
          return;
        }
        finish(undefined, body.subarray(5));
      });
      stream.end(frame(request));
    });
  }

  close(): void {
    this.closed = true;
    this.session?.close();
    this.session = undefined;
  }
}
