// Istio's plugin log socket (§2.8), so upstream's plugin can log into the
// agent: HTTP over `<run dir>/log.sock`, `POST /log` with a JSON array of
// strings, each a JSON log entry (`level`, `time`, `msg`, labels). Entries
// are replayed in scope `cni-plugin` at their level with their own time;
// anything else is dropped. The answer is always 200, as upstream's.
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { EmitLevel, Logger } from '../util/log.js';
import { listenUnix } from './unix-listener.js';

export const LOG_SOCKET = 'log.sock';
const MAX_BODY = 1 << 20;
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
  close(): Promise<void>;
}

/**
 * Serves `<runDir>/log.sock` (mode 0600), set up like pluginevent.sock
 * (unix-listener.ts); rejects with UnixListenerError.
 */
export async function startLogSink(runDir: string, log: Logger): Promise<LogSink> {
  const socketPath = join(runDir, LOG_SOCKET);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/log' && size <= MAX_BODY) replayPluginLogs(Buffer.concat(chunks).toString('utf8'), log);
      res.statusCode = 200;
      res.end();
    });
    req.on('error', () => res.destroy());
  });
  server.headersTimeout = 5000;
  server.requestTimeout = 10_000;
  const listener = await listenUnix(server, runDir, LOG_SOCKET);
  return {
    socketPath,
    close: () => new Promise<void>((resolve) => {
      // A newer agent's socket at the path is left alone.
      server.close(() => { void listener.unlinkIfOurs().then(resolve); });
      server.closeAllConnections();
    }),
  };
}
