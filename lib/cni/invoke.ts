// One `POST /v1/cni` under the agent's deadline. The plugin gets one
// AbortSignal that fires when the request goes away or the deadline passes;
// it reaches the pod lookup and the enrollment (addPodToMesh), which undo
// what they did when it fires. The answer then is code 11 (the runtime tears
// the sandbox down and retries), after the work settled or a short grace,
// so nothing of a cancelled ADD is left enrolled behind a "try again".
import type { CniPlugin, CniReply } from './plugin.js';
import { AgentNotReadyError, CNI_CODES, CniError } from './errors.js';
import { parseInvocation } from './invocation.js';
import { CURRENT_VERSION } from './version.js';
import { checkTimeout } from '../util/timeout.js';

/**
 * How long one CNI invocation may take in the agent: with the grace below,
 * under the shim's default agent_timeout_ms (30 s), so the runtime gets our
 * "try again" rather than a cut connection.
 */
export const DEFAULT_CNI_DEADLINE_MS = 25_000;
/**
 * An ADD that finds no ztunnel connected waits this long for one (within the deadline) before
 * failing retryably: right after the agent, ztunnel or the node restarted, ztunnel connects within
 * a second or two, and the pod's sandbox then needs no retry by the kubelet. Upstream fails at once.
 */
export const ZTUNNEL_CONNECT_WAIT_MS = 5_000;
/** How long a cancelled invocation gets to undo its work before the answer goes out anyway. */
export const DEFAULT_CANCEL_GRACE_MS = 2_000;

export interface InvokeOptions {
  deadlineMs?: number;
  graceMs?: number;
}

/** Why an invocation's signal fired: the deadline (the request may still be waiting). */
export class CniDeadlineError extends Error {
  readonly code = 'ERR_CNI_DEADLINE';
  constructor(readonly command: string, readonly deadlineMs: number) {
    super(`podwire: CNI ${command} did not finish within ${deadlineMs} ms`);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'CniDeadlineError', enumerable: false });
  }
}

const reply = (e: CniError): CniReply => ({ exitCode: 1, stdout: `${JSON.stringify(e.toJSON(CURRENT_VERSION))}\n` });

type Settled = { ok: CniReply } | { err: unknown };

/**
 * Parses one shim request and runs it on `plugin` until it settles, the
 * request's `signal` fires or `deadlineMs` passes. 'not-ready': the endpoint answers 503.
 */
export async function invokeCni(
  plugin: Pick<CniPlugin, 'handle'>,
  body: Buffer | string,
  signal: AbortSignal,
  opts: InvokeOptions = {},
): Promise<CniReply | 'not-ready'> {
  const deadlineMs = checkTimeout(opts.deadlineMs ?? DEFAULT_CNI_DEADLINE_MS, 'deadlineMs');
  const graceMs = checkTimeout(opts.graceMs ?? DEFAULT_CANCEL_GRACE_MS, 'graceMs', { allowZero: true });
  let inv;
  try {
    inv = parseInvocation(body);
  } catch (err) {
    if (err instanceof CniError) return reply(err);
    throw err;
  }
  const ac = new AbortController();
  const onGone = () => ac.abort(signal.reason);
  if (signal.aborted) onGone();
  else signal.addEventListener('abort', onGone, { once: true });
  const timer = setTimeout(() => ac.abort(new CniDeadlineError(inv.command, deadlineMs)), deadlineMs);
  let graceTimer: NodeJS.Timeout | undefined;
  const onAbort = new Promise<'aborted'>((resolve) => {
    if (ac.signal.aborted) resolve('aborted');
    else ac.signal.addEventListener('abort', () => resolve('aborted'), { once: true });
  });
  const work: Promise<Settled> = plugin.handle(inv, ac.signal).then((ok) => ({ ok }), (err: unknown) => ({ err }));
  const settle = (s: Settled): CniReply | 'not-ready' => {
    if ('ok' in s) return s.ok;
    if (s.err instanceof AgentNotReadyError) return 'not-ready';
    throw s.err;
  };
  try {
    const first = await Promise.race([work, onAbort]);
    if (first !== 'aborted') return settle(first);
    // Cancelled: the work undoes what it did; its own answer (code 11 for a cancelled ADD) if it settles in the grace.
    const late = await Promise.race([work, new Promise<'grace'>((r) => { graceTimer = setTimeout(() => r('grace'), graceMs); })]);
    if (late !== 'grace') return settle(late);
    const why = ac.signal.reason instanceof Error ? ac.signal.reason.message : `podwire: CNI ${inv.command} cancelled`;
    return reply(new CniError(CNI_CODES.TRY_AGAIN, why));
  } finally {
    clearTimeout(timer);
    clearTimeout(graceTimer);
    signal.removeEventListener('abort', onGone);
  }
}
