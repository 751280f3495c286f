// The node readiness gate (issue 14; Istio issue 52073 asks for it): while the
// agent is not ready it keeps a NoSchedule taint on its own Node, so nothing
// without the toleration is scheduled there before traffic redirection works.
//
// How a taint is written. spec.taints has no patch merge key (NodeSpec.Taints
// carries no patchStrategy tag), so a strategic merge patch — like a JSON merge
// patch — replaces the whole list: a blind patch would clobber a taint another
// writer (kubelet, node controller, an operator's `kubectl taint`) added a
// moment before. So every change is read-modify-write under optimistic
// concurrency: GET the Node, compute the new list from what it holds, and send
// a JSON merge patch that carries metadata.resourceVersion. The apiserver
// applies the patch and then refuses the update with 409 Conflict if the Node
// changed in between; we then re-read and recompute (a few times). A JSON Patch
// `test` op on /metadata/resourceVersion would do the same, but a failed test
// comes back as a generic 422 that cannot be told apart from a real Invalid,
// whereas the resourceVersion precondition is a proper 409 Conflict.
//
// Failure mode (document it): the taint outlives an agent that is gone for
// good (DaemonSet removed, node unlabelled). Remove it by hand with
// `kubectl taint nodes <node> cni.podwire.io/not-ready:NoSchedule-`.
import type { V1Node, V1Taint } from '@kubernetes/client-node';
import { nodePath } from '../kube/paths.js';
import { MERGE_PATCH } from '../kube/rest.js';
import { missingAccess } from '../kube/access.js';
import { accessOf } from '../kube/permissions.js';
import type { KubeClient } from '../kube/client.js';
import { isKubeError, KubeError } from '../kube/errors.js';
import { sleep, withRetry } from '../kube/retry.js';
import type { Logger } from '../util/log.js';

export const DEFAULT_GATE_TAINT_KEY = 'cni.podwire.io/not-ready';

export type NodeGateErrorCode =
  /** The agent may not get or patch its Node; `missing` names the permissions (`nodes/get`, `nodes/patch`). */
  | 'ERR_NODE_GATE_RBAC'
  /** The agent's Node does not exist (NODE_NAME wrong, or the Node was deleted). */
  | 'ERR_NODE_GATE_NO_NODE'
  /** The Node kept changing under us: every read-modify-write attempt got 409 Conflict. */
  | 'ERR_NODE_GATE_CONFLICT';

export class NodeGateError extends Error {
  constructor(
    readonly code: NodeGateErrorCode,
    message: string,
    /** For ERR_NODE_GATE_RBAC: the missing permissions as `resource/verb`, e.g. `nodes/patch`. */
    readonly missing: readonly string[] = [],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'NodeGateError', enumerable: false });
  }
}

export interface NodeGateOptions {
  client: KubeClient;
  nodeName: string;
  /** Default DEFAULT_GATE_TAINT_KEY. */
  taintKey?: string;
  /** Only NoSchedule for now: NoExecute would evict running pods, which is not what a readiness gate is for. */
  effect?: 'NoSchedule';
  log?: Pick<Logger, 'debug' | 'info' | 'warn'>;
  /** Read-modify-write attempts on 409 Conflict (default 5). */
  conflictAttempts?: number;
}

export class NodeGate {
  readonly client: KubeClient;
  readonly nodeName: string;
  readonly taintKey: string;
  readonly effect: 'NoSchedule';
  private readonly log: NodeGateOptions['log'];
  private readonly conflictAttempts: number;

  constructor(opts: NodeGateOptions) {
    if (!opts.nodeName) throw new TypeError('NodeGate: nodeName is required');
    const key = opts.taintKey ?? DEFAULT_GATE_TAINT_KEY;
    if (!key) throw new TypeError('NodeGate: taintKey must not be empty');
    if (opts.effect !== undefined && opts.effect !== 'NoSchedule') throw new TypeError(`NodeGate: effect ${String(opts.effect)} is not supported (NoSchedule only)`);
    this.client = opts.client;
    this.nodeName = opts.nodeName;
    this.taintKey = key;
    this.effect = 'NoSchedule';
    this.log = opts.log;
    this.conflictAttempts = Math.max(1, opts.conflictAttempts ?? 5);
  }

  /**
   * At start: the agent may get and patch its own Node, and the Node exists.
   * Asks the apiserver with SelfSubjectAccessReviews (every authenticated
   * identity may create them); if even that is refused, falls back to a GET
   * and a dry-run patch.
   */
  async check(): Promise<void> {
    let missing: string[];
    try {
      missing = await this.reviewAccess();
    } catch (err) {
      if (!isKubeError(err, 'Forbidden') && !isKubeError(err, 'NotFound')) throw err;
      this.log?.debug('node gate: SelfSubjectAccessReview unavailable, probing with a GET and a dry-run patch', { node: this.nodeName });
      missing = await this.probeAccess();
    }
    if (missing.length) throw this.rbacError(missing);
    await this.getNode();
  }

  /** Adds our taint unless the Node already has it; other taints are kept. Idempotent. */
  async taint(): Promise<void> {
    const changed = await this.update((taints) => {
      if (taints.some((t) => t.key === this.taintKey && t.effect === this.effect)) return undefined;
      return [...taints, { key: this.taintKey, effect: this.effect }];
    });
    if (changed) this.log?.info('node gate: tainted the node until the agent is ready', { node: this.nodeName, taint: `${this.taintKey}:${this.effect}` });
  }

  /** Removes every taint with our key (whatever its effect); other taints are kept. Idempotent. */
  async untaint(): Promise<void> {
    const changed = await this.update((taints) => {
      const kept = taints.filter((t) => t.key !== this.taintKey);
      return kept.length === taints.length ? undefined : kept;
    });
    if (changed) this.log?.info('node gate: removed the not-ready taint', { node: this.nodeName, taint: this.taintKey });
  }

  /** Read-modify-write of spec.taints under the read's resourceVersion; `next` returns undefined for "nothing to do". */
  private async update(next: (taints: V1Taint[]) => V1Taint[] | undefined): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const node = await this.getNode();
      const want = next(node.spec?.taints ?? []);
      if (!want) return false;
      const rv = node.metadata?.resourceVersion;
      // `null` drops the field: a Node without taints has none, not an empty list.
      const body = { metadata: { resourceVersion: rv }, spec: { taints: want.length ? want : null } };
      try {
        await this.client.call({ verb: 'patch', resource: 'nodes', name: this.nodeName },
          (o) => this.client.send({ method: 'PATCH', path: nodePath(this.nodeName), body }, o), { contentType: MERGE_PATCH });
        return true;
      } catch (err) {
        if (isKubeError(err, 'Conflict')) {
          if (attempt >= this.conflictAttempts) {
            throw new NodeGateError('ERR_NODE_GATE_CONFLICT', `node gate: node ${this.nodeName} changed during each of ${attempt} attempts to update its taints`, [], { cause: err });
          }
          this.log?.debug('node gate: node changed since read, retrying', { node: this.nodeName, attempt });
          await sleep(20 * attempt * (0.5 + Math.random()));
          continue;
        }
        throw this.mapError(err, 'patch');
      }
    }
  }

  private async getNode(): Promise<V1Node> {
    try {
      return await withRetry(() => this.client.call({ verb: 'get', resource: 'nodes', name: this.nodeName },
        (o) => this.client.send<V1Node>({ method: 'GET', path: nodePath(this.nodeName), kind: 'Node' }, o)));
    } catch (err) {
      throw this.mapError(err, 'get');
    }
  }

  private mapError(err: unknown, verb: 'get' | 'patch'): unknown {
    if (isKubeError(err, 'NotFound')) {
      return new NodeGateError('ERR_NODE_GATE_NO_NODE', `node gate: node ${this.nodeName} does not exist (is NODE_NAME right?)`, [], { cause: err });
    }
    if (isKubeError(err, 'Forbidden')) return this.rbacError([`nodes/${verb}`], err);
    return err;
  }

  private rbacError(missing: string[], cause?: unknown): NodeGateError {
    const verbs = missing.map((m) => m.split('/')[1]).join(', ');
    return new NodeGateError('ERR_NODE_GATE_RBAC',
      `node gate: the agent lacks RBAC permission ${missing.join(' and ')} on node ${this.nodeName} ` +
      `(grant verbs ${verbs} on resource "nodes" in API group "" to the agent's ServiceAccount, or turn the node gate off)`,
      missing, cause === undefined ? undefined : { cause });
  }

  private reviewAccess(): Promise<string[]> {
    return missingAccess(this.client, accessOf('nodeTaint', this.nodeName));
  }

  private async probeAccess(): Promise<string[]> {
    const missing: string[] = [];
    const probe = async (verb: 'get' | 'patch', fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        if (isKubeError(err, 'Forbidden')) missing.push(`nodes/${verb}`);
        else if (!(err instanceof KubeError && err.code === 'NotFound')) throw err;
      }
    };
    await probe('get', () => this.client.call({ verb: 'get', resource: 'nodes', name: this.nodeName },
      (o) => this.client.send({ method: 'GET', path: nodePath(this.nodeName) }, o)));
    await probe('patch', () => this.client.call({ verb: 'patch', resource: 'nodes', name: this.nodeName },
      (o) => this.client.send({ method: 'PATCH', path: nodePath(this.nodeName), query: { dryRun: 'All' }, body: {} }, o), { contentType: MERGE_PATCH }));
    return missing;
  }
}
