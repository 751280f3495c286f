// Every branch of decideAmbient, and the precedence between reasons (spec §2.4, §5.3, §5.4).
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  compileEnablementSelectors, decideAmbient, DEFAULT_ENABLEMENT_SELECTORS, hasSidecar, isAgentPod, isDeleting,
  isHostNetworkPod, isNamespaceExcluded, isTerminal, isZtunnelPod,
  type MeshNamespace, type MeshPod, type SelectionPolicy, type SkipReason,
} from '../../lib/mesh/index.js';

// Compile-time: the client's objects are accepted as they are.
const _pod: MeshPod = {} as V1Pod;
const _ns: MeshNamespace = {} as V1Namespace;
void _pod;
void _ns;

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
const policy: SelectionPolicy = {
  selectors: compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS),
  excludeNamespaces: new Set(['kube-system', 'excluded']),
  systemNamespace: 'istio-system',
  podNamespace: 'istio-system',
};

interface PodOpts {
  name?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  hostNetwork?: boolean;
  phase?: string;
  deletionTimestamp?: Date | string;
}
const pod = (ns: string, o: PodOpts = {}): MeshPod => ({
  metadata: {
    name: o.name ?? 'app-1', namespace: ns, uid: 'u1', labels: o.labels ?? {}, annotations: o.annotations ?? {},
    ...(o.deletionTimestamp !== undefined ? { deletionTimestamp: o.deletionTimestamp } : {}),
  },
  spec: { ...(o.hostNetwork !== undefined ? { hostNetwork: o.hostNetwork } : {}) },
  status: { phase: o.phase ?? 'Running' },
});
const namespace = (name: string, labels: Record<string, string> = {}): MeshNamespace => ({ metadata: { name, labels } });

describe('decideAmbient', () => {
  const cases: [string, MeshPod, MeshNamespace, SkipReason | 'selected', boolean?][] = [
    ['pod labelled ambient', pod('default', { labels: AMBIENT }), namespace('default'), 'selected'],
    ['pod in an ambient namespace', pod('apps'), namespace('apps', AMBIENT), 'selected'],
    ['ztunnel in the system namespace', pod('istio-system', { name: 'ztunnel-x', labels: { app: 'ztunnel', ...AMBIENT } }), namespace('istio-system', AMBIENT), 'ztunnel-pod', true],
    ['the agent itself', pod('istio-system', { name: 'istio-cni-node-abcde', labels: AMBIENT }), namespace('istio-system', AMBIENT), 'agent-pod', true],
    ['excluded namespace', pod('excluded', { labels: AMBIENT }), namespace('excluded', AMBIENT), 'namespace-excluded', true],
    ['hostNetwork pod', pod('apps', { hostNetwork: true }), namespace('apps', AMBIENT), 'host-network', true],
    ['sidecar-injected pod', pod('apps', { annotations: { 'sidecar.istio.io/status': '{}' } }), namespace('apps', AMBIENT), 'sidecar-injected', true],
    ['sidecar annotation with an empty value still counts', pod('apps', { annotations: { 'sidecar.istio.io/status': '' } }), namespace('apps', AMBIENT), 'sidecar-injected', true],
    ['Succeeded pod', pod('apps', { phase: 'Succeeded' }), namespace('apps', AMBIENT), 'pod-terminal', true],
    ['Failed pod', pod('apps', { phase: 'Failed' }), namespace('apps', AMBIENT), 'pod-terminal', true],
    ['pod opting out with none', pod('apps', { labels: { 'istio.io/dataplane-mode': 'none' } }), namespace('apps', AMBIENT), 'pod-not-selected', true],
    ['plain pod in a plain namespace', pod('apps'), namespace('apps'), 'not-selected', true],
    ['selected pod being deleted (Date)', pod('apps', { deletionTimestamp: new Date(0) }), namespace('apps', AMBIENT), 'pod-deleting', false],
    ['selected pod being deleted (string)', pod('apps', { deletionTimestamp: '2026-01-01T00:00:00Z' }), namespace('apps', AMBIENT), 'pod-deleting', false],
    ['deleting pod no longer selected is taken out', pod('apps', { deletionTimestamp: '2026-01-01T00:00:00Z' }), namespace('apps'), 'not-selected', true],
  ];
  it.each(cases)('%s → %s', (_name, p, ns, reason, unenroll) => {
    const d = decideAmbient(p, ns, policy);
    expect(d.reason).toBe(reason);
    expect(d.enroll).toBe(reason === 'selected');
    expect(typeof d.message).toBe('string');
    if (!d.enroll) expect(d.unenroll).toBe(unenroll);
  });

  it('names the matching selector', () => {
    expect(decideAmbient(pod('default', { labels: AMBIENT }), namespace('default'), policy)).toMatchObject({ enroll: true, selector: 0 });
    expect(decideAmbient(pod('apps'), namespace('apps', AMBIENT), policy)).toMatchObject({ enroll: true, selector: 1 });
  });

  it('an empty selector list selects nothing, and says so', () => {
    const none = { ...policy, selectors: compileEnablementSelectors([]) };
    expect(decideAmbient(pod('apps', { labels: AMBIENT }), namespace('apps', AMBIENT), none)).toMatchObject({ enroll: false, reason: 'no-selectors', unenroll: true });
  });

  it('accepts the exclusion list as an array', () => {
    expect(decideAmbient(pod('x', { labels: AMBIENT }), namespace('x'), { ...policy, excludeNamespaces: ['x'] }).reason).toBe('namespace-excluded');
  });

  it('app=ztunnel outside the system namespace is an ordinary pod', () => {
    expect(decideAmbient(pod('apps', { labels: { app: 'ztunnel' } }), namespace('apps', AMBIENT), policy).reason).toBe('selected');
  });

  it('istio-cni-node-* outside POD_NAMESPACE, or with POD_NAMESPACE unset, is an ordinary pod', () => {
    const agentLike = pod('apps', { name: 'istio-cni-node-x' });
    expect(decideAmbient(agentLike, namespace('apps', AMBIENT), policy).reason).toBe('selected');
    const p = pod('istio-system', { name: 'istio-cni-node-x' });
    expect(decideAmbient(p, namespace('istio-system', AMBIENT), { ...policy, podNamespace: '' }).reason).toBe('selected');
  });

  it('hostNetwork: false and a Pending phase do not exclude', () => {
    expect(decideAmbient(pod('apps', { hostNetwork: false, phase: 'Pending' }), namespace('apps', AMBIENT), policy).enroll).toBe(true);
  });

  it('reports the first reason that applies', () => {
    const everything = pod('excluded', {
      hostNetwork: true, phase: 'Failed', annotations: { 'sidecar.istio.io/status': '{}' }, deletionTimestamp: '2026-01-01T00:00:00Z',
    });
    expect(decideAmbient(everything, namespace('excluded', AMBIENT), policy).reason).toBe('namespace-excluded');
    const hostAndSidecar = pod('apps', { hostNetwork: true, annotations: { 'sidecar.istio.io/status': '{}' } });
    expect(decideAmbient(hostAndSidecar, namespace('apps', AMBIENT), policy).reason).toBe('host-network');
    const sidecarTerminal = pod('apps', { phase: 'Succeeded', annotations: { 'sidecar.istio.io/status': '{}' } });
    expect(decideAmbient(sidecarTerminal, namespace('apps', AMBIENT), policy).reason).toBe('sidecar-injected');
  });

  it('works on bare objects (no labels, annotations, spec or status)', () => {
    expect(decideAmbient({ metadata: { name: 'p', namespace: 'apps' } }, namespace('apps', AMBIENT), policy).enroll).toBe(true);
    expect(decideAmbient({}, { metadata: { name: 'apps', labels: AMBIENT } }, policy).enroll).toBe(true);
    expect(decideAmbient({}, {}, policy).reason).toBe('not-selected');
    expect(decideAmbient({ metadata: { labels: null, annotations: null } }, { metadata: { labels: null } }, policy).reason).toBe('not-selected');
  });

  it('rejects a namespace that is not the pod\'s, and non-objects', () => {
    expect(() => decideAmbient(pod('a'), namespace('b', AMBIENT), policy)).toThrow(TypeError);
    expect(() => decideAmbient(null as unknown as MeshPod, namespace('b'), policy)).toThrow(TypeError);
    expect(() => decideAmbient(pod('b'), null as unknown as MeshNamespace, policy)).toThrow(TypeError);
  });
});

describe('exclusion predicates', () => {
  it('isZtunnelPod', () => {
    expect(isZtunnelPod(pod('istio-system', { labels: { app: 'ztunnel' } }), 'istio-system')).toBe(true);
    expect(isZtunnelPod(pod('istio-system', { labels: { app: 'ztunnel' } }), 'other')).toBe(false);
    expect(isZtunnelPod(pod('istio-system', { labels: { app: 'istiod' } }), 'istio-system')).toBe(false);
  });
  it('isAgentPod', () => {
    expect(isAgentPod(pod('ns', { name: 'istio-cni-node-1' }), 'ns')).toBe(true);
    expect(isAgentPod(pod('ns', { name: 'istio-cni-node' }), 'ns')).toBe(false);
    expect(isAgentPod(pod('ns', { name: 'istio-cni-node-1' }), undefined)).toBe(false);
    expect(isAgentPod({ metadata: { namespace: 'ns' } }, 'ns')).toBe(false);
  });
  it('isNamespaceExcluded is exact', () => {
    expect(isNamespaceExcluded('kube-system', ['kube-system'])).toBe(true);
    expect(isNamespaceExcluded('kube-system-2', new Set(['kube-system']))).toBe(false);
    expect(isNamespaceExcluded(undefined, ['kube-system'])).toBe(false);
  });
  it('isHostNetworkPod / hasSidecar / isTerminal / isDeleting', () => {
    expect(isHostNetworkPod({ spec: { hostNetwork: null } })).toBe(false);
    expect(isHostNetworkPod({ spec: { hostNetwork: true } })).toBe(true);
    expect(hasSidecar({ metadata: { annotations: { 'sidecar.istio.io/inject': 'true' } } })).toBe(false);
    expect(isTerminal({ status: { phase: 'Unknown' } })).toBe(false);
    expect(isTerminal({})).toBe(false);
    expect(isDeleting({ metadata: { deletionTimestamp: null } })).toBe(false);
    expect(isDeleting({ metadata: { deletionTimestamp: '' } })).toBe(false);
  });
});
