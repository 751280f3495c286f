// What the end-to-end tests apply with kubectl: namespaces and workloads on busybox, whose
// first act is a connection to TEST_NET:80 — an address nothing on the node routes. Only a pod
// whose redirection was in place before its container started gets that connection accepted
// (by the node's ztunnel stand-in on 15001, which records it): the proof that it never ran
// unredirected. The app then serves HTTP on 8080, which the kubelet's readiness and liveness
// probes (and the tests' pod → pod traffic) use.
import { BUSYBOX_REF } from '../helpers/oci-image.js';

export const TEST_NET = '203.0.113.1';
export const APP_PORT = 8080;

export function namespace(name: string, labels: Record<string, string> = {}): object {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } };
}

const APP_COMMAND = ['sh', '-c', `nc -w 2 ${TEST_NET} 80 </dev/null; exec httpd -f -p ${APP_PORT} -h /www`];

function appContainer(): object {
  const probe = { httpGet: { path: '/', port: APP_PORT }, periodSeconds: 2, timeoutSeconds: 2, failureThreshold: 3 };
  return {
    name: 'app', image: BUSYBOX_REF, imagePullPolicy: 'Never', command: APP_COMMAND,
    ports: [{ containerPort: APP_PORT }],
    readinessProbe: { ...probe },
    livenessProbe: { ...probe, failureThreshold: 5 },
  };
}

/** A pod spec of the app; `nodeName` pins it (no scheduling), `extra` is merged into the spec. */
export function appPodSpec(opts: { nodeName?: string; extraContainers?: object[] } = {}): object {
  return {
    ...(opts.nodeName ? { nodeName: opts.nodeName } : {}),
    terminationGracePeriodSeconds: 1,
    automountServiceAccountToken: false,
    containers: [appContainer(), ...(opts.extraContainers ?? [])],
  };
}

export function deployment(namespace: string, name: string, replicas: number, labels: Record<string, string> = {}): object {
  return {
    apiVersion: 'apps/v1', kind: 'Deployment', metadata: { namespace, name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: '100%', maxUnavailable: '100%' } },
      template: { metadata: { labels: { app: name, ...labels } }, spec: appPodSpec() },
    },
  };
}

export function pod(namespace: string, name: string, opts: { nodeName?: string; labels?: Record<string, string>; annotations?: Record<string, string>; extraContainers?: object[] } = {}): object {
  return {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { namespace, name, labels: { app: name, ...opts.labels }, annotations: opts.annotations ?? {} },
    spec: appPodSpec(opts),
  };
}

/**
 * A sidecar-mode pod as Istio's injector leaves it: the `sidecar.istio.io/status` annotation and
 * an `istio-proxy` container (a stand-in that only sleeps).
 */
export function sidecarPod(namespace: string, name: string, nodeName: string): object {
  return pod(namespace, name, {
    nodeName,
    annotations: {
      'sidecar.istio.io/status': JSON.stringify({ initContainers: null, containers: ['istio-proxy'], volumes: ['istio-envoy'], imagePullSecrets: null, revision: 'default' }),
      // No Envoy behind 15006 here: the kubelet's probes of the app must not be redirected.
      'traffic.sidecar.istio.io/excludeInboundPorts': String(APP_PORT),
    },
    extraContainers: [{ name: 'istio-proxy', image: BUSYBOX_REF, imagePullPolicy: 'Never', command: ['sleep', '100000'] }],
  });
}

/** Objects as a `kubectl apply -f -` input (a List). */
export function list(...items: object[]): string {
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}
