// The node-local decision file (docs/cni.md "While the agent is down"): what podwire-cni needs
// to pass at once a pod that cannot need the mesh, and to fail closed one that might, when it
// cannot reach the agent. The agent owns it: rendered from its informer caches (this node's
// pods, every namespace) with the same SelectionPolicy the agent enrolls with, written
// atomically to `<run dir>/cni-decisions.json` (root, 0600) once the informers synced, rewritten
// (debounced) when its content changes, and left in place when the agent stops: a stopped agent
// is exactly when the shim reads it.
import { readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { Informer } from '../kube/informer.js';
import { decideAmbient, type SelectionPolicy } from '../mesh/decision.js';
import { hasSidecar, isNamespaceExcluded } from '../mesh/exclusions.js';
import { namespaceInjectsSidecars, namespaceMayEnroll } from '../mesh/namespace-scope.js';
import type { MeshNamespace, MeshPod } from '../mesh/types.js';
import { writeFileAtomicSync } from '../util/atomic-write.js';
import type { Logger } from '../util/log.js';
import { DECISION_FILE, DECISION_FILE_VERSION } from './constants.js';

/** Largest file the shim reads (a larger one counts as no file: it fails closed). */
export const DECISION_FILE_MAX_BYTES = 1 << 20;

/** One pod of this node as the file lists it. */
export interface DecisionFilePod {
  namespace: string;
  name: string;
  uid: string;
  /** The pod needs the plugin (ambient enrollment or sidecar rules). */
  mesh: boolean;
}

export interface DecisionFileInput {
  node: string;
  policy: SelectionPolicy;
  /** This node's pods (the informer's cache). */
  pods: Iterable<MeshPod>;
  /** Every namespace the agent knows. */
  namespaces: Iterable<MeshNamespace>;
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Whether `pod` needs the plugin: the ambient decision selects it (also while it is being
 * deleted: a sandbox it still gets must not start unredirected), or it has a sidecar. A pod
 * whose namespace is not cached is judged without the namespace's labels, and counts as
 * meshed unless something other than the selectors rules it out: that namespace may be ambient.
 */
export function podNeedsPlugin(pod: MeshPod, namespace: MeshNamespace | undefined, policy: SelectionPolicy): boolean {
  if (hasSidecar(pod)) return true;
  const ns = namespace ?? { metadata: { name: pod.metadata?.namespace ?? '' } };
  const d = decideAmbient(pod, ns, policy);
  if (d.enroll || d.reason === 'pod-deleting') return true;
  return namespace === undefined && (d.reason === 'not-selected' || d.reason === 'pod-not-selected');
}

function namespaceListed(ns: MeshNamespace, policy: SelectionPolicy): boolean {
  const labels = ns.metadata?.labels;
  // The plugin checks only its conf's exclude_namespaces before the sidecar path: injection counts even here.
  if (namespaceInjectsSidecars(labels)) return true;
  return !isNamespaceExcluded(ns.metadata?.name, policy.excludeNamespaces) && namespaceMayEnroll(labels, policy.selectors);
}

/** The lists the file holds, sorted (pods by namespace, then name). */
export function decisionEntries(input: Omit<DecisionFileInput, 'node'>): { meshNamespaces: string[]; pods: DecisionFilePod[] } {
  const { policy } = input;
  const byName = new Map<string, MeshNamespace>();
  const mesh = new Set<string>();
  for (const ns of input.namespaces) {
    const name = ns.metadata?.name;
    if (!name) continue;
    byName.set(name, ns);
    if (namespaceListed(ns, policy)) mesh.add(name);
  }
  const pods: DecisionFilePod[] = [];
  for (const p of input.pods) {
    const m = p.metadata;
    if (!m?.namespace || !m.name) continue;
    const needs = podNeedsPlugin(p, byName.get(m.namespace), policy);
    if (needs) mesh.add(m.namespace);
    pods.push({ namespace: m.namespace, name: m.name, uid: m.uid ?? '', mesh: needs });
  }
  pods.sort((a, b) => byString(a.namespace, b.namespace) || byString(a.name, b.name));
  return { meshNamespaces: [...mesh].sort(byString), pods };
}

const list = (items: readonly string[]) => `[${items.map((s) => JSON.stringify(s)).join(',')}]`;

/** Everything after `writtenAtMs`: what decides whether a write is needed. */
function renderBody(input: DecisionFileInput): string {
  const { meshNamespaces, pods } = decisionEntries(input);
  const ex = input.policy.excludeNamespaces;
  const exclude = [...new Set<string>(ex instanceof Set ? ex : (ex as readonly string[]))].sort(byString);
  const podList = pods.map((p) => `{"namespace":${JSON.stringify(p.namespace)},"name":${JSON.stringify(p.name)},"uid":${JSON.stringify(p.uid)},"mesh":${p.mesh}}`);
  return `"node":${JSON.stringify(input.node)},"excludeNamespaces":${list(exclude)},"meshNamespaces":${list(meshNamespaces)},"pods":[${podList.join(',')}]}`;
}

const head = (generation: number, writtenAtMs: number) => `{"version":${DECISION_FILE_VERSION},"generation":${generation},"writtenAtMs":${writtenAtMs},`;

/** The file's exact bytes (compact JSON, keys in the agreed order, lists sorted; no newline). */
export function renderDecisionFile(input: DecisionFileInput & { generation: number; writtenAtMs: number }): string {
  return head(input.generation, input.writtenAtMs) + renderBody(input);
}

export const decisionFilePath = (runDir: string) => join(runDir, DECISION_FILE);

export interface DecisionFileWriterOptions {
  pods: Pick<Informer<V1Pod>, 'on' | 'list'>;
  namespaces: Pick<Informer<V1Namespace>, 'on' | 'list' | 'get'>;
  policy: SelectionPolicy;
  nodeName: string;
  runDir: string;
  log: Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;
  /** A change is written at most this long after it (and writes are at least this far apart). Default 200. */
  debounceMs?: number;
  /** First retry after a failed write (doubling to 30 s while it keeps failing). Default 1000. */
  retryMs?: number;
}

const RETRY_MAX_MS = 30_000;

// Temporaries of lib/util/atomic-write.ts for the file: `.<name>.<16 hex>.tmp`.
const TMP = new RegExp(`^\\.${DECISION_FILE.replace(/\./g, '\\.')}\\.[0-9a-f]{16}\\.tmp$`);

/**
 * Keeps `<run dir>/cni-decisions.json` in step with the informers. Events only mark it dirty
 * (and arm one timer); the file is rendered and compared when the timer fires, so a burst of
 * pod churn costs one render. Nothing here throws into an informer handler.
 */
export class DecisionFileWriter {
  /** The last write's generation (writes done by this writer). */
  generation = 0;
  /** Renders (one per debounced flush), writes, failed renders or writes. */
  readonly stats = { renders: 0, writes: 0, failures: 0 };
  readonly path: string;
  private readonly o: DecisionFileWriterOptions;
  private readonly debounceMs: number;
  private readonly retryMs: number;
  private readonly unsubscribe: Array<() => void> = [];
  private started = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelay: number;
  /** The body last written (or found too large); undefined: write at the next flush. */
  private lastBody: string | undefined;
  private failing = false;

  constructor(opts: DecisionFileWriterOptions) {
    this.o = opts;
    this.path = decisionFilePath(opts.runDir);
    this.debounceMs = opts.debounceMs ?? 200;
    this.retryMs = opts.retryMs ?? 1000;
    this.retryDelay = this.retryMs;
    const changed = () => this.changed();
    this.unsubscribe.push(
      opts.pods.on('add', changed),
      opts.pods.on('delete', changed),
      opts.pods.on('update', (pod, old) => { if (this.entryChanged(pod, old)) this.changed(); }),
      opts.namespaces.on('add', changed),
      opts.namespaces.on('delete', changed),
      opts.namespaces.on('update', (ns, old) => {
        if (JSON.stringify(ns.metadata?.labels ?? {}) !== JSON.stringify(old.metadata?.labels ?? {})) this.changed();
      }),
    );
  }

  /** Writes the file now (the informers have synced) and keeps it current from then on. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.removeTemporaries();
    this.flush();
  }

  /** Whether a change is waiting for the debounce timer. */
  get pending(): boolean {
    return this.timer !== undefined;
  }

  /**
   * Stops listening and cancels the timers; the file stays where it is. A change still waiting
   * for its timer is written first, so the file the shim reads next is not one change behind.
   */
  stop(): void {
    if (this.stopped) return;
    if (this.started && (this.timer || this.retryTimer)) this.flush();
    this.stopped = true;
    for (const u of this.unsubscribe.splice(0)) u();
    clearTimeout(this.timer);
    clearTimeout(this.retryTimer);
    this.timer = this.retryTimer = undefined;
  }

  /** An update changes the file only if the pod's entry does (most updates are status churn). */
  private entryChanged(pod: V1Pod, old: V1Pod): boolean {
    if (pod === old) return false;  // a resync
    const a = pod.metadata;
    const b = old.metadata;
    if (a?.uid !== b?.uid || a?.name !== b?.name || a?.namespace !== b?.namespace) return true;
    try {
      const ns = this.o.namespaces.get(a?.namespace ?? '');
      return podNeedsPlugin(pod, ns, this.o.policy) !== podNeedsPlugin(old, ns, this.o.policy);
    } catch {
      return true;  // let the flush find out (and log) what is wrong
    }
  }

  private changed(): void {
    if (!this.started || this.stopped || this.timer) return;
    this.timer = setTimeout(() => this.flush(), this.debounceMs);
    this.timer.unref();
  }

  private flush(): void {
    this.timer = undefined;
    if (this.stopped) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    let body: string;
    this.stats.renders++;
    try {
      body = renderBody({ node: this.o.nodeName, policy: this.o.policy, pods: this.o.pods.list(), namespaces: this.o.namespaces.list() });
    } catch (err) {
      return this.failed('rendering', err);
    }
    if (body === this.lastBody) return;
    const generation = this.generation + 1;
    const text = head(generation, Date.now()) + body;
    try {
      if (Buffer.byteLength(text) > DECISION_FILE_MAX_BYTES) {
        // The shim would ignore it; an older file left in place would be wrong: remove it.
        this.removeFile();
        this.o.log.error(`decision file not written: ${Buffer.byteLength(text)} bytes is over ${DECISION_FILE_MAX_BYTES} (the shim fails closed for every pod while the agent is down)`, { path: this.path });
        this.lastBody = body;
        return;
      }
      writeFileAtomicSync(this.path, text, { mode: 0o600, mkdir: false });
    } catch (err) {
      return this.failed('writing', err);
    }
    this.generation = generation;
    this.stats.writes++;
    this.lastBody = body;
    this.retryDelay = this.retryMs;
    if (this.failing) this.o.log.info(`decision file written again (generation ${generation})`, { path: this.path });
    else this.o.log.debug(`decision file written (generation ${generation}, ${text.length} bytes)`, { path: this.path });
    this.failing = false;
  }

  /** Logged, then tried again on the next change or after a bounded, growing delay. */
  private failed(what: string, err: unknown): void {
    const code = (err as { code?: unknown })?.code;
    this.stats.failures++;
    this.o.log.warn(`decision file: ${what} failed${typeof code === 'string' ? ` (${code})` : ''}: ${(err as Error)?.message ?? String(err)}; retrying in ${this.retryDelay} ms`, { path: this.path });
    this.failing = true;
    this.lastBody = undefined;
    this.retryTimer = setTimeout(() => this.flush(), this.retryDelay);
    this.retryTimer.unref();
    this.retryDelay = Math.min(RETRY_MAX_MS, this.retryDelay * 2);
  }

  private removeFile(): void {
    try {
      unlinkSync(this.path);  // a link is removed itself, never its target
    } catch (err) {
      if ((err as { code?: string }).code !== 'ENOENT') throw err;
    }
  }

  /** Temporaries an interrupted write of an earlier agent left (no write of ours is in flight: writes are synchronous). */
  private removeTemporaries(): void {
    let names: string[];
    try {
      names = readdirSync(this.o.runDir);
    } catch {
      return;  // the write reports what is wrong with the dir
    }
    for (const name of names) {
      if (!TMP.test(name)) continue;
      try {
        unlinkSync(join(this.o.runDir, name));  // never follows a link; a directory fails and stays
      } catch (err) {
        this.o.log.debug(`decision file: leftover ${name} not removed: ${(err as Error).message}`);
      }
    }
  }
}
