// Enrollment failures carry upstream's error classes: invalid pod info, a netns or rule failure
// is non-retryable (nothing is left behind; the CNI ADD fails and kubelet
// re-creates the sandbox), a ztunnel or probe-set failure is retryable (the
// pod stays cached, so the next ztunnel snapshot delivers it).
export type EnrollStage = 'input' | 'netns' | 'rules' | 'ztunnel' | 'probe-set';

export class EnrollError extends Error {
  readonly retryable: boolean;
  readonly stage: EnrollStage;
  readonly uid: string;
  /** The underlying error's code (NetError code, ...), when it had one. */
  readonly code?: string;

  constructor(uid: string, stage: EnrollStage, retryable: boolean, cause: unknown) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    super(`pod ${uid}: ${stage} failed${retryable ? ' (retryable)' : ''}: ${detail}`, { cause });
    this.uid = uid;
    this.stage = stage;
    this.retryable = retryable;
    const code = (cause as { code?: unknown } | null)?.code;
    if (typeof code === 'string') this.code = code;
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'EnrollError', enumerable: false });
  }
}
