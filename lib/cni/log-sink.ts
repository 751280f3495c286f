// Istio's plugin log socket (§2.8), so upstream's plugin can log into the
// agent: HTTP over `<run dir>/log.sock`, `POST /log` with a JSON array of
// strings, each a JSON log entry (`level`, `time`, `msg`, labels). Entries
// are replayed in scope `cni-plugin` at their level with their own time;
// anything else is dropped. The answer is 200, as upstream's, except for a
// body refused by its bounds (below), which is answered and the connection closed.
//
// Bounded like pluginevent.sock (a flood must not cost the agent its fds or
// its memory): a connection cap, headers within 5 s of accept, 10 s without
// traffic closes (lib/util/http-guard.ts); a body of at most 1 MiB (413),
// complete within 5 s of its headers (408), and 2 MiB of bodies held at once
// across connections (503) (lib/util/http-body.ts).
import { createServer, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { guardHttpServer, type HttpGuardOptions } from '../util/http-guard.js';
import { ByteBudget, readBoundedBody } from '../util/http-body.js';
import type { EmitLevel, Logger } from '../util/log.js';
import { listenUnix } from './unix-listener.js';

export const LOG_SOCKET = 'log.sock';
/** The plugin sends a few lines per invocation; a few dozen plugins log at once. */
export const DEFAULT_LOG_SINK_GUARD: Readonly<HttpGuardOptions> = Object.freeze({ maxConnections: 32, headerDeadlineMs: 5_000, idleMs: 10_000 });
const MAX_BODY = 1 << 20;
const BODY_BUDGET = 2 << 20;
const BODY_DEADLINE_MS = 5_000;
const LEVELS: ReadonlySet<string> = new Set(['debug', 'info', 'warn', 'error']);

/** Replays one batch; returns how many entries were logged. */
export function replayPluginLogs(body: string, log: Logger): number {
  let batch: unknown;
  try {
    batch = JSON.parse(body);
  } catch {
    return 0;
  }
  if (!Array.isArray(batch)) return 0;
  let n = 0;
  for (const item of batch) {
    if (typeof item !== 'string') continue;
    let e: unknown;
    try {
      e = JSON.parse(item);
    } catch {
      continue;
    }
    if (typeof e !== 'object' || e === null) continue;
    const { level, time, msg, ...labels } = e as Record<string, unknown>;
    if (typeof level !== 'string' || !LEVELS.has(level) || typeof time !== 'string' || typeof msg !== 'string') continue;
    log.log(level as EmitLevel, msg.trim(), labels, time);
    n++;
  }
  return n;
}

export interface LogSink {
  readonly socketPath: string;
  /** Body bytes held now (0 whenever no request is being read). */
  readonly bodyBytesInFlight: number;
  close(): Promise<void>;
}

export interface LogSinkOptions {
  /** DEFAULT_LOG_SINK_GUARD for what is not given. */
  guard?: Partial<HttpGuardOptions>;
  /** Per body (default 1 MiB). */
  maxBodyBytes?: number;
  /** All bodies at once (default 2 MiB; at least maxBodyBytes). */
  bodyBudgetBytes?: number;
  /** Default 5000 ms. */
  bodyDeadlineMs?: number;
}

function refuse(res: ServerResponse, status: number): void {
  res.statusCode = status;
  res.setHeader('Connection', 'close');
  res.once('finish', () => res.socket?.destroy());
  res.end();
}

/**
 * Serves `<runDir>/log.sock` (mode 0600), set up like pluginevent.sock
 * (unix-listener.ts); rejects with UnixListenerError (a RangeError for bad options).
 */
export async function startLogSink(runDir: string, log: Logger, opts: LogSinkOptions = {}): Promise<LogSink> {
  const socketPath = join(runDir, LOG_SOCKET);
  const maxBytes = opts.maxBodyBytes ?? MAX_BODY;
  const budget = new ByteBudget(opts.bodyBudgetBytes ?? Math.max(BODY_BUDGET, maxBytes));
  if (budget.limit < maxBytes) throw new RangeError(`bodyBudgetBytes must be >= maxBodyBytes (${maxBytes}), got ${budget.limit}`);
  const deadlineMs = opts.bodyDeadlineMs ?? BODY_DEADLINE_MS;
  const server: Server = createServer((req, res) => {
    const lease = budget.lease();
    void readBoundedBody(req, { maxBytes, deadlineMs, lease }).then((r) => {
      try {
        if (!r.ok) {
          if (r.reason === 'gone') res.destroy();
          else refuse(res, r.reason === 'too-large' ? 413 : r.reason === 'busy' ? 503 : 408);
          return;
        }
        if (req.method === 'POST' && req.url === '/log') replayPluginLogs(r.body.toString('utf8'), log);
        res.statusCode = 200;
        res.end();
      } finally {
        lease.release();
      }
    });
  });
  server.headersTimeout = 5000;
  server.requestTimeout = 10_000;
  guardHttpServer(server, { ...DEFAULT_LOG_SINK_GUARD, ...opts.guard });
  const listener = await listenUnix(server, runDir, LOG_SOCKET);
  return {
    socketPath,
    get bodyBytesInFlight() {
      return budget.used;
    },
    close: () => new Promise<void>((resolve) => {
      // A newer agent's socket at the path is left alone.
      server.close(() => { void listener.unlinkIfOurs().then(resolve); });
      server.closeAllConnections();
    }),
  };
}
