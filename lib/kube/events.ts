// core/v1 Events about a pod — what `kubectl describe pod` shows, so an
// operator sees why a pod was not enrolled or was repaired. The legacy
// core/v1 shape (firstTimestamp/lastTimestamp/count/source) is what kubelet
// and client-go's legacy recorder write, and what the agent's role allows
// (create events, core group).
import { randomBytes } from 'node:crypto';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import type { CallOptions, KubeClient } from './client.js';
import { namespacePath } from './paths.js';

export interface PodEvent {
  type: 'Normal' | 'Warning';
  /** UpperCamelCase machine-readable cause, e.g. `EnrollFailed`. */
  reason: string;
  /** Human text (truncated to 1 024 characters, the apiserver's note limit for events.k8s.io). */
  message: string;
  /** Reporting component, e.g. `istio-cni-node`. */
  component: string;
  /** The node we run on (source.host / reportingInstance). */
  host?: string;
}

export type PodIdentity = Pick<V1Pod, 'metadata'>;

/** Creates an Event whose involvedObject is `pod` (with its uid, so it is not shown on a later pod of the same name). */
export async function createPodEvent(client: KubeClient, pod: PodIdentity, ev: PodEvent, opts: Omit<CallOptions, 'contentType'> = {}): Promise<CoreV1Event> {
  const m = pod.metadata;
  if (!m?.name || !m.namespace || !m.uid) throw new TypeError('createPodEvent: the pod needs metadata.name, namespace and uid');
  if (!/^[A-Z][A-Za-z0-9]*$/.test(ev.reason)) throw new TypeError(`createPodEvent: reason must be UpperCamelCase, got ${JSON.stringify(ev.reason)}`);
  const now = new Date();
  // client-go names events <object>.<hex nanoseconds>; a random suffix keeps two in one ms apart.
  const name = `${m.name}.${(BigInt(now.getTime()) * 1_000_000n).toString(16)}${randomBytes(2).toString('hex')}`;
  const body: CoreV1Event = {
    metadata: { name, namespace: m.namespace },
    involvedObject: { kind: 'Pod', apiVersion: 'v1', name: m.name, namespace: m.namespace, uid: m.uid, ...(m.resourceVersion ? { resourceVersion: m.resourceVersion } : {}) },
    type: ev.type,
    reason: ev.reason,
    message: ev.message.length > 1024 ? `${ev.message.slice(0, 1021)}...` : ev.message,
    source: { component: ev.component, ...(ev.host ? { host: ev.host } : {}) },
    reportingComponent: ev.component,
    reportingInstance: ev.host ?? '',
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
  };
  return client.call({ verb: 'create', resource: 'events', namespace: m.namespace, name },
    (o) => client.send<CoreV1Event>({ method: 'POST', path: `${namespacePath(m.namespace!)}/events`, body, kind: 'Event' }, o), opts);
}
