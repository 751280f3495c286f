// Resource exhaustion (out of fds, memory, kernel buffers, processes) is a state of the node, not
// of the pod or the request that met it: the same work succeeds once the pressure is gone. Every
// retry/drop decision asks this first, so such a failure is retried and never dropped as
// permanent. Decided by the errno (`code`, or `errno` as a name or number: NetError carries the
// positive errno, Node's own errors the negative one, some of ours the name), on the error and
// along its `cause` chain (and an AggregateError's `errors`), never by the message text.
//
// EAGAIN is counted: a would-block EAGAIN is handled where non-blocking I/O happens and never
// reaches a caller; one that does is a resource limit (fork/clone, a full listen backlog, locked
// memory) that clears by itself.
import { constants } from 'node:os';

const NAMES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'ENOMEM', 'ENOBUFS', 'EAGAIN']);

/** How deep the cause chain is followed (a cycle or a pathological chain ends there). */
const MAX_DEPTH = 8;

const NAME_OF: ReadonlyMap<number, string> = new Map([...NAMES].map((n) => [(constants.errno as Record<string, number>)[n]!, n]));

/** The error's own errno name, when it is one of NAMES. */
function own(err: object): string | undefined {
  const { code, errno } = err as { code?: unknown; errno?: unknown };
  if (typeof code === 'string' && NAMES.has(code)) return code;
  if (typeof errno === 'string') return NAMES.has(errno) ? errno : undefined;
  return typeof errno === 'number' && Number.isInteger(errno) ? NAME_OF.get(Math.abs(errno)) : undefined;
}

/** The errno name when `err` (or an error it wraps) is resource exhaustion, else undefined. */
export function resourceExhaustionCode(err: unknown): string | undefined {
  const seen = new Set<object>();
  const walk = (e: unknown, depth: number): string | undefined => {
    if (typeof e !== 'object' || e === null || depth > MAX_DEPTH || seen.has(e)) return undefined;
    seen.add(e);
    const name = own(e);
    if (name !== undefined) return name;
    const inner = (e as { errors?: unknown }).errors;
    if (Array.isArray(inner)) {
      for (const x of inner.slice(0, 16)) {
        const c = walk(x, depth + 1);
        if (c !== undefined) return c;
      }
    }
    return walk((e as { cause?: unknown }).cause, depth + 1);
  };
  return walk(err, 0);
}

/** Whether `err` (or an error it wraps) is EMFILE, ENFILE, ENOMEM, ENOBUFS or EAGAIN: retry it, never drop it. */
export function isResourceExhaustion(err: unknown): boolean {
  return resourceExhaustionCode(err) !== undefined;
}
