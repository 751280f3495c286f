// Request bodies a server holds in memory, bounded three ways: per request (maxBytes), in time
// (the whole body within deadlineMs of the headers: the header deadline of http-guard.ts ends
// where the body starts, so a body trickling a byte a second would otherwise hold its connection
// and its bytes), and together (a ByteBudget shared by every request of a server: 40 concurrent
// bodies of the per-request size must not all be in memory at once). Bytes are charged as they
// arrive (a slow body holds only what it sent) and stay charged until the request is done with
// them (Lease.release(), after the handler), so the budget bounds what handlers hold too.
import type { IncomingMessage } from 'node:http';

function positiveInt(name: string, v: number): void {
  if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`${name} must be a positive integer, got ${String(v)}`);
}

/** Bytes that the requests of one server may hold at once. */
export class ByteBudget {
  #used = 0;
  constructor(readonly limit: number) {
    positiveInt('limit', limit);
  }

  /** Bytes charged now (0 once every lease is released). */
  get used(): number {
    return this.#used;
  }

  /** One request's share: charge() as bytes arrive, release() when done (idempotent). */
  lease(): Lease {
    let held = 0;
    return {
      charge: (n: number) => {
        if (this.#used + n > this.limit) return false;
        this.#used += n;
        held += n;
        return true;
      },
      release: () => {
        this.#used -= held;
        held = 0;
      },
      get held() {
        return held;
      },
    };
  }
}

export interface Lease {
  /** Charges n bytes if the budget has them; false (nothing charged) otherwise. */
  charge(n: number): boolean;
  /** Gives back everything this lease holds. */
  release(): void;
  readonly held: number;
}

export type BodyRead =
  | { ok: true; body: Buffer }
  /** too-large: over maxBytes (declared or sent); busy: the budget is spent; timeout: not complete in time; gone: the client went away. */
  | { ok: false; reason: 'too-large' | 'busy' | 'timeout' | 'gone' };

export interface ReadBodyOptions {
  maxBytes: number;
  /** The whole body must arrive within this many ms of the call. */
  deadlineMs: number;
  /** Where the bytes are charged; on a refusal the lease is released already. */
  lease: Lease;
}

/**
 * Reads `req`'s body within the bounds. On a refusal the request is paused and its bytes given
 * back; the caller answers (413, 503, 408) and closes the connection, whose unread rest is never
 * read into memory.
 */
export function readBoundedBody(req: IncomingMessage, opts: ReadBodyOptions): Promise<BodyRead> {
  positiveInt('maxBytes', opts.maxBytes);
  positiveInt('deadlineMs', opts.deadlineMs);
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > opts.maxBytes) return Promise.resolve({ ok: false, reason: 'too-large' });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (r: BodyRead) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('aborted', onGone);
      req.off('close', onClose);
      if (!r.ok) {
        req.pause();
        chunks.length = 0;
        opts.lease.release();
      }
      resolve(r);
    };
    const onData = (chunk: Buffer) => {
      if (size + chunk.length > opts.maxBytes) return finish({ ok: false, reason: 'too-large' });
      if (!opts.lease.charge(chunk.length)) return finish({ ok: false, reason: 'busy' });
      size += chunk.length;
      chunks.push(chunk);
    };
    const onEnd = () => finish({ ok: true, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) });
    const onGone = () => finish({ ok: false, reason: 'gone' });
    // 'close' before 'end': the connection went away mid-body.
    const onClose = () => { if (!req.complete) onGone(); };
    const timer = setTimeout(() => finish({ ok: false, reason: 'timeout' }), opts.deadlineMs);
    timer.unref();
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onGone);
    req.once('aborted', onGone);
    req.once('close', onClose);
  });
}
