// Bounds for a node:http server that anyone on the node (or the network, with hostNetwork) can
// reach. Node's own headersTimeout/requestTimeout are not enough here: on Node 20 a connection
// that sends nothing, or half a request line, is never expired by them (measured: 5 such
// connections were still open after 4 s with headersTimeout 500 ms), so every listener of the
// agent puts these on top:
//  - a connection cap (server.maxConnections: the kernel accepts, Node closes at once);
//  - a header deadline: from accept, and again after each answered request, the next request's
//    headers must be complete within headerDeadlineMs, however slowly bytes trickle in;
//  - an idle timeout: a connection with no traffic for idleMs is closed.
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface HttpGuardOptions {
  /** Open connections at most; more are closed as they arrive. */
  maxConnections: number;
  /** A request's headers must be complete this long after accept (or the previous answer). */
  headerDeadlineMs: number;
  /** A connection without any traffic for this long is closed. */
  idleMs: number;
}

export const DEFAULT_HTTP_GUARD: Readonly<HttpGuardOptions> = Object.freeze({ maxConnections: 64, headerDeadlineMs: 5_000, idleMs: 10_000 });

const deadlines = new WeakMap<Socket, NodeJS.Timeout>();

function arm(socket: Socket, ms: number): void {
  clearTimeout(deadlines.get(socket));
  const t = setTimeout(() => socket.destroy(), ms);
  t.unref();
  deadlines.set(socket, t);
}

function disarm(socket: Socket): void {
  clearTimeout(deadlines.get(socket));
  deadlines.delete(socket);
}

/** Applies the bounds to `server` (before it listens); returns it. */
export function guardHttpServer<S extends Server>(server: S, opts: HttpGuardOptions = DEFAULT_HTTP_GUARD): S {
  for (const [k, v] of Object.entries(opts)) {
    if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`${k} must be a positive integer, got ${String(v)}`);
  }
  server.maxConnections = opts.maxConnections;
  server.on('connection', (socket: Socket) => {
    socket.setTimeout(opts.idleMs, () => socket.destroy());
    arm(socket, opts.headerDeadlineMs);
    socket.once('close', () => disarm(socket));
  });
  // Headers complete: the deadline is over for this request; the answer re-arms it for the next.
  server.on('request', (req, res) => {
    const socket = req.socket;
    disarm(socket);
    res.once('finish', () => { if (!socket.destroyed) arm(socket, opts.headerDeadlineMs); });
  });
  return server;
}
