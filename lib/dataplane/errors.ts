// Enrollment failures carry upstream's error classes: invalid pod info, a netns or rule failure
// is non-retryable (nothing is left behind; the CNI ADD fails and kubelet
// re-creates the sandbox), a ztunnel or probe-set failure is retryable (the
// pod stays cached, so the next ztunnel snapshot delivers it). Whatever the
// stage, a failure for lack of fds or memory (EMFILE, ENFILE, ENOMEM, ...:
// lib/util/resource-errors.ts) is retryable: the node's state, not the pod's.
import { isResourceExhaustion } from '../util/resource-errors.js';

export type EnrollStage = 'input' | 'netns' | 'rules' | 'ztunnel' | 'probe-set';

/**
 * The caller's signal fired (the CNI ADD deadline): the enrollment stopped at
 * a step boundary and what it had done was undone. Retryable: the runtime
 * retries the ADD.
 */
export const ERR_ENROLL_ABORTED = 'ERR_ENROLL_ABORTED';
/**
 * The netns given as the pod's is the node's own (the host's, or the agent's):
 * refused before anything is written in it. Not retryable.
 */
export const ERR_NETNS_IS_HOST = 'ERR_NETNS_IS_HOST';

export class EnrollError extends Error {
  readonly retryable: boolean;
  readonly stage: EnrollStage;
  readonly uid: string;
  /** ERR_ENROLL_ABORTED, ERR_NETNS_IS_HOST, or the underlying error's code (NetError code, ...) when it had one. */
  readonly code?: string;

  constructor(uid: string, stage: EnrollStage, retryable: boolean, cause: unknown, code?: string) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    const retry = retryable || isResourceExhaustion(cause);
    super(`pod ${uid}: ${stage} failed${retry ? ' (retryable)' : ''}: ${detail}`, { cause });
    this.uid = uid;
    this.stage = stage;
    this.retryable = retry;
    const own = (cause as { code?: unknown } | null)?.code;
    if (code !== undefined) this.code = code;
    else if (typeof own === 'string') this.code = own;
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'EnrollError', enumerable: false });
  }
}

/** An EnrollError of an enrollment the caller aborted. */
export function isEnrollAborted(err: unknown): err is EnrollError {
  return err instanceof EnrollError && err.code === ERR_ENROLL_ABORTED;
}

export const ERR_OPERATION_ABORTED = 'ERR_OPERATION_ABORTED';

/**
 * An unenroll or a mesh removal the caller aborted at a step boundary: the
 * pod is left so that the next attempt finishes the job (`done`: the steps
 * already completed).
 */
export class OperationAbortedError extends Error {
  readonly code = ERR_OPERATION_ABORTED;

  constructor(readonly uid: string, readonly operation: 'unenroll' | 'remove', readonly done: readonly string[]) {
    super(`pod ${uid}: ${operation} aborted${done.length ? ` after ${done.join(', ')}` : ' before it started'}`);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'OperationAbortedError', enumerable: false });
  }
}
