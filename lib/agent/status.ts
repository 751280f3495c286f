// The node's state as `podwire status` shows it, and one pod's story as `podwire explain` tells
// it, built from what the agent holds (informer caches, the dataplane's cache and probe index,
// the ZDS server, the pod status book, readiness). Read-only and synchronous: nothing here calls
// the API or the kernel, so answering costs the agent no more than a walk over its maps.
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { CacheEntry } from '../dataplane/pod-cache.js';
import { decideAmbient, type AmbientDecision, type SelectionPolicy } from '../mesh/decision.js';
import type { EnablementSelector } from '../mesh/enablement.js';
import { DATAPLANE_MODE_LABEL, REDIRECTION_ANNOTATION, SIDECAR_STATUS_ANNOTATION } from '../mesh/constants.js';
import type { ZdsConnectionInfo } from '../zds/server.js';
import type { PodRecord, PodStatusBook } from './pod-status.js';
import { READINESS_CONDITIONS, type Readiness } from './readiness.js';

/** Bumped when a field changes meaning; the CLI refuses a version it does not know. */
export const STATUS_VERSION = 1;

/** What the status is built from (the agent provides it; tests may too). */
export interface StatusSources {
  nodeName: string;
  readiness: Readiness;
  policy: SelectionPolicy;
  enablementSelectors: readonly EnablementSelector[];
  backend: { backend?: string; iptablesVariant?: string; kubeletUid?: number };
  zds: { socket: string; connections: () => ZdsConnectionInfo[] };
  install: { enabled: boolean; ready: () => boolean; configPath: () => string };
  queue: () => { queued: number; waiting: number; inFlight: number; retries: number; dropped: number } | undefined;
  driftCheckIntervalMs: number;
  /** This node's pods and the namespaces (the synced informers); empty before they synced. */
  pods: () => V1Pod[];
  namespace: (name: string) => V1Namespace | undefined;
  /** The dataplane's entries (enrolled, placeholders, leaving). */
  entries: () => CacheEntry[];
  probeIps: (uid: string) => string[];
  book: PodStatusBook;
}

export type PodState =
  /** In the mesh: rules in its netns, ztunnel holds it. */
  | 'enrolled'
  /** Held without a netns (ztunnel is told to keep it; its netns was not found yet). */
  | 'pending'
  /** Being taken out (or an unenroll that failed half-way, to be finished). */
  | 'leaving'
  /** Held with a netns, but its last enrollment failed after its rules were last found right (e.g. ztunnel refused it): retried. */
  | 'failing'
  | 'not-enrolled';

export interface PodStatus {
  namespace: string;
  name: string;
  uid: string;
  phase?: string;
  ips: string[];
  state: PodState;
  /** The enrollment decision now (lib/mesh/decision.ts); absent when the namespace is not in the cache. */
  decision?: { enroll: boolean; reason: string; message: string; selector?: number };
  /** The pod's redirection annotation as the informer last saw it. */
  annotation?: string;
  netnsInode?: number;
  rulesVerifiedAt?: string;
  rulesVerifiedBy?: string;
  ztunnelAck?: PodRecord['ztunnelAck'];
  probeSet: string[];
  lastFailure?: PodRecord['lastFailure'];
  lastDrift?: PodRecord['lastDrift'];
}

export interface NodeStatus {
  version: typeof STATUS_VERSION;
  node: string;
  at: string;
  ready: boolean;
  readiness: Array<{ condition: string; met: boolean }>;
  backend: StatusSources['backend'];
  ztunnel: { socket: string; connections: Array<Omit<ZdsConnectionInfo, 'connectedAt'> & { connectedAt: string }> };
  install: { enabled: boolean; ready: boolean; configPath?: string };
  queue?: ReturnType<StatusSources['queue']>;
  driftCheck: { intervalMs: number; lastRound?: PodStatusBook['lastDriftRound'] };
  pods: PodStatus[];
}

function stateOf(e: CacheEntry | undefined, rec: PodRecord | undefined): PodState {
  if (!e) return 'not-enrolled';
  if (e.leaving) return 'leaving';
  if (!e.netns || e.netns.released) return 'pending';
  const failedAt = rec?.lastFailure ? Date.parse(rec.lastFailure.at) : undefined;
  if (failedAt !== undefined && (!rec?.rulesVerifiedAt || failedAt >= Date.parse(rec.rulesVerifiedAt))) return 'failing';
  return 'enrolled';
}

function decisionOf(pod: V1Pod, s: StatusSources): AmbientDecision | undefined {
  const ns = s.namespace(pod.metadata?.namespace ?? '');
  if (!ns) return undefined;
  try {
    return decideAmbient(pod, ns, s.policy);
  } catch {
    return undefined;  // a namespace that is not the pod's cannot happen from the informers; say nothing rather than guess
  }
}

function podStatus(pod: V1Pod | undefined, entry: CacheEntry | undefined, s: StatusSources): PodStatus {
  const m = pod?.metadata;
  const uid = m?.uid ?? entry?.pod.uid ?? '';
  const rec = s.book.get(uid);
  const d = pod ? decisionOf(pod, s) : undefined;
  const out: PodStatus = {
    namespace: m?.namespace ?? entry?.pod.namespace ?? '',
    name: m?.name ?? entry?.pod.name ?? '',
    uid,
    ips: pod ? (pod.status?.podIPs ?? []).map((p) => p.ip).filter((ip): ip is string => !!ip) : [...(entry?.pod.ips ?? [])],
    state: stateOf(entry, rec),
    probeSet: s.probeIps(uid),
  };
  if (pod?.status?.phase) out.phase = pod.status.phase;
  if (d) out.decision = { enroll: d.enroll, reason: d.reason, message: d.message, ...(d.enroll ? { selector: d.selector } : {}) };
  const ann = m?.annotations?.[REDIRECTION_ANNOTATION];
  if (ann !== undefined) out.annotation = ann;
  if (entry?.netns && !entry.netns.released) out.netnsInode = entry.netns.ino;
  if (rec?.rulesVerifiedAt) {
    out.rulesVerifiedAt = rec.rulesVerifiedAt;
    if (rec.rulesVerifiedBy) out.rulesVerifiedBy = rec.rulesVerifiedBy;
  }
  if (rec?.ztunnelAck) out.ztunnelAck = { ...rec.ztunnelAck };
  if (rec?.lastFailure) out.lastFailure = { ...rec.lastFailure };
  if (rec?.lastDrift) out.lastDrift = { ...rec.lastDrift };
  return out;
}

/** Every pod of the node the informer knows, and every pod the dataplane holds that it does not (deleted while held). */
export function nodeStatus(s: StatusSources, now = new Date()): NodeStatus {
  const entries = new Map(s.entries().map((e) => [e.pod.uid, e]));
  const pods: PodStatus[] = [];
  const seen = new Set<string>();
  for (const p of s.pods()) {
    const uid = p.metadata?.uid ?? '';
    seen.add(uid);
    pods.push(podStatus(p, entries.get(uid), s));
  }
  for (const [uid, e] of entries) if (!seen.has(uid)) pods.push(podStatus(undefined, e, s));
  pods.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name) || a.uid.localeCompare(b.uid));
  const unmet = new Set<string>(s.readiness.unmet());
  const out: NodeStatus = {
    version: STATUS_VERSION,
    node: s.nodeName,
    at: now.toISOString(),
    ready: s.readiness.ready,
    readiness: READINESS_CONDITIONS.map((condition) => ({ condition, met: !unmet.has(condition) })),
    backend: { ...s.backend },
    ztunnel: { socket: s.zds.socket, connections: s.zds.connections().map((c) => ({ ...c, connectedAt: c.connectedAt.toISOString() })) },
    install: { enabled: s.install.enabled, ready: s.install.ready(), ...(s.install.configPath() ? { configPath: s.install.configPath() } : {}) },
    driftCheck: { intervalMs: s.driftCheckIntervalMs, ...(s.book.lastDriftRound ? { lastRound: { ...s.book.lastDriftRound } } : {}) },
    pods,
  };
  const q = s.queue();
  if (q) out.queue = q;
  return out;
}

export interface Explanation {
  version: typeof STATUS_VERSION;
  pod: string;
  /** Whether the pod is in the mesh now. */
  inMesh: boolean;
  /** One paragraph a person can act on. */
  text: string;
  /** The facts it was built from (absent when the agent does not know the pod). */
  status?: PodStatus;
}

const q = (s: string) => `"${s}"`;
const labelText = (labels: Record<string, string> | undefined, key: string) =>
  labels?.[key] === undefined ? `no ${key} label` : `${key}=${labels[key]}`;

/** What to do about a decision that keeps a pod out (the first sentence says why). */
function advice(reason: string, pod: V1Pod, nsName: string, s: StatusSources): string {
  const name = pod.metadata?.name ?? '';
  switch (reason) {
    case 'ztunnel-pod': return 'ztunnel is never redirected into itself; nothing to do.';
    case 'agent-pod': return 'The node agent never enrolls itself; nothing to do.';
    case 'namespace-excluded': return `To mesh it, remove ${nsName} from the chart value excludeNamespaces (EXCLUDE_NAMESPACES) and upgrade the release.`;
    case 'host-network': return 'A pod in the host network namespace has no netns of its own to redirect; run it without hostNetwork to mesh it.';
    case 'sidecar-injected': return 'Its sidecar redirects its traffic; to move it to ambient, disable injection (label sidecar.istio.io/inject=false) and restart it.';
    case 'pod-terminal': return 'It will not run again; nothing to do.';
    case 'no-selectors': return 'Set ambient.enablementSelectors (AMBIENT_ENABLEMENT_SELECTOR) to select pods.';
    case 'pod-not-selected':
      return `Its namespace enables ambient; the pod opts out (${labelText(pod.metadata?.labels, DATAPLANE_MODE_LABEL)}): remove that label (kubectl -n ${nsName} label pod ${name} ${DATAPLANE_MODE_LABEL}-) to mesh it.`;
    case 'not-selected': {
      const sel = s.enablementSelectors.length ? ` (selectors: ${JSON.stringify(s.enablementSelectors)})` : '';
      return `To mesh it, label its namespace (kubectl label namespace ${nsName} ${DATAPLANE_MODE_LABEL}=ambient) or the pod itself${sel}.`;
    }
    case 'pod-deleting': return 'It is being deleted; an enrolled pod stays in the mesh until it is gone.';
    default: return '';
  }
}

/** Why `namespace/name` is or is not in the mesh, from this agent's point of view. */
export function explainPod(s: StatusSources, namespace: string, name: string): Explanation {
  const ref = `${namespace}/${name}`;
  const pod = s.pods().find((p) => p.metadata?.namespace === namespace && p.metadata?.name === name);
  const entry = s.entries().find((e) => e.pod.namespace === namespace && e.pod.name === name && (!pod || e.pod.uid === pod.metadata?.uid));
  if (!pod && !entry) {
    return {
      version: STATUS_VERSION, pod: ref, inMesh: false,
      text: `The agent on node ${s.nodeName} knows no pod ${ref}: it watches only the pods scheduled to this node. `
        + 'Check the pod exists and which node runs it (kubectl get pod -o wide), and run podwire explain on that node.',
    };
  }
  const st = podStatus(pod, entry, s);
  const parts: string[] = [];
  const inMesh = st.state === 'enrolled';
  const nsObj = s.namespace(namespace);
  if (pod) {
    const nsLabels = nsObj?.metadata?.labels;
    const facts = [`namespace ${namespace} has ${nsObj ? labelText(nsLabels, DATAPLANE_MODE_LABEL) : 'not been seen by the agent yet'}`,
      `the pod has ${labelText(pod.metadata?.labels, DATAPLANE_MODE_LABEL)}`];
    if (pod.metadata?.annotations?.[SIDECAR_STATUS_ANNOTATION] !== undefined) facts.push(`annotation ${SIDECAR_STATUS_ANNOTATION} (an injected sidecar)`);
    if (pod.spec?.hostNetwork) facts.push('spec.hostNetwork=true');
    const d = st.decision;
    if (!d) parts.push(`Pod ${ref} (uid ${st.uid}) cannot be decided yet: its namespace is not in the agent's cache (${facts.slice(1).join(', ')}).`);
    else if (d.enroll) {
      const sel = s.enablementSelectors[d.selector ?? -1];
      parts.push(`Pod ${ref} (uid ${st.uid}) is selected for ambient: ${facts.join(', ')}, which matches AMBIENT_ENABLEMENT_SELECTOR entry ${d.selector}${sel ? ` ${JSON.stringify(sel)}` : ''}.`);
    } else {
      parts.push(`Pod ${ref} (uid ${st.uid}) is not selected for ambient (${d.reason}): ${d.message}; ${facts.join(', ')}.`);
      const a = advice(d.reason, pod, namespace, s);
      if (a) parts.push(a);
    }
  } else {
    parts.push(`Pod ${ref} (uid ${st.uid}) is no longer in the API (deleted), but the agent still holds it (${st.state}); it is taken out once its sandbox's CNI DEL or the next check arrives.`);
  }
  if (inMesh) {
    const verified = st.rulesVerifiedAt ? ` Its in-pod rules were last verified at ${st.rulesVerifiedAt} (${st.rulesVerifiedBy}).` : '';
    const zt = st.ztunnelAck ? ` ztunnel connection ${st.ztunnelAck.connection} acked its ${st.ztunnelAck.type} at ${st.ztunnelAck.at}.` : ' No ztunnel has acked it since this agent started.';
    parts.push(`It is in the mesh: redirected in netns inode ${st.netnsInode}, host probe set ${st.probeSet.length ? st.probeSet.join(', ') : 'empty'}.${verified}${zt}`);
  } else if (st.state === 'pending') {
    parts.push('It is held but not redirected yet: its netns was not found (the agent retries; ztunnel keeps it).');
  } else if (st.state === 'failing') {
    parts.push(`Its rules are in its netns (inode ${st.netnsInode}) but its enrollment has not completed; the agent retries it.`);
  } else if (st.state === 'leaving') {
    parts.push('It is being taken out of the mesh (or a removal failed half-way and will be finished).');
  } else if (st.decision?.enroll) {
    const phase = st.phase ?? 'unknown';
    parts.push(phase === 'Running'
      ? 'It is Running but not enrolled yet.'
      : `It is not enrolled: the agent enrolls a pod through the CNI plugin at sandbox creation or once it is Running (phase ${phase}).`);
  }
  if (st.lastFailure) {
    const f = st.lastFailure;
    parts.push(`Its last enrollment failed at ${f.at} in stage ${f.stage} (${f.retryable ? 'retried' : 'not retried: the sandbox must be recreated'}): ${f.error}. `
      + `The agent posted Warning Event ${f.event.reason} on the pod (kubectl -n ${namespace} describe pod ${name}).`);
  }
  if (st.lastDrift) {
    const dr = st.lastDrift;
    const fixed = dr.failed.length === 0;
    parts.push(`The drift check found its redirection changed at ${dr.at} (${dr.drift.join('; ')}) and ${fixed ? `repaired ${dr.repaired.join(', ')}` : `could not repair ${dr.failed.map((f) => `${f.part}: ${f.error}`).join('; ')}`}; Event ${dr.event.reason}.`);
  }
  if (st.annotation !== undefined && st.annotation !== (inMesh ? 'enabled' : '')) {
    parts.push(`Its ${REDIRECTION_ANNOTATION} annotation reads ${q(st.annotation)}.`);
  }
  return { version: STATUS_VERSION, pod: ref, inMesh, text: parts.join(' '), status: st };
}
