// The decision file's content (lib/cni/decision-file.ts renderDecisionFile) for every kind of pod
// and namespace the shim must tell apart while the agent is down, byte for byte; and the
// namespace scope helpers it is built on (lib/mesh/namespace-scope.ts).
import { describe, expect, it } from 'vitest';
import { decisionEntries, podNeedsPlugin, renderDecisionFile } from '../../lib/cni/decision-file.js';
import { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/enablement.js';
import { namespaceInjectsSidecars, namespaceMayEnroll } from '../../lib/mesh/namespace-scope.js';
import type { SelectionPolicy } from '../../lib/mesh/decision.js';
import type { MeshNamespace, MeshPod } from '../../lib/mesh/types.js';

const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
const NONE = { 'istio.io/dataplane-mode': 'none' };
const policy: SelectionPolicy = {
  selectors: compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS),
  excludeNamespaces: new Set(['kube-system', 'excluded']),
  systemNamespace: 'istio-system',
  podNamespace: 'istio-system',
};

let uidSeq = 0;
const pod = (namespace: string, name: string, o: { labels?: Record<string, string>; annotations?: Record<string, string>; phase?: string; deleting?: boolean } = {}): MeshPod => ({
  metadata: {
    namespace, name, uid: `uid-${++uidSeq}`, labels: o.labels ?? {}, annotations: o.annotations ?? {},
    ...(o.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
  },
  spec: {},
  status: { phase: o.phase ?? 'Pending' },
});
const ns = (name: string, labels: Record<string, string> = {}): MeshNamespace => ({ metadata: { name, labels } });
const render = (pods: MeshPod[], namespaces: MeshNamespace[], p: SelectionPolicy = policy) =>
  renderDecisionFile({ generation: 3, writtenAtMs: 1764636000000, node: 'node-a', policy: p, pods, namespaces });
const parsed = (pods: MeshPod[], namespaces: MeshNamespace[], p?: SelectionPolicy) =>
  JSON.parse(render(pods, namespaces, p)) as { meshNamespaces: string[]; pods: Array<{ namespace: string; name: string; uid: string; mesh: boolean }> };
const entry = (f: ReturnType<typeof parsed>, namespace: string, name: string) => f.pods.find((e) => e.namespace === namespace && e.name === name);

describe('renderDecisionFile', () => {
  it('is compact JSON with the keys in the agreed order and every list sorted', () => {
    const pods = [pod('shop', 'web-1'), pod('payments', 'api-0'), pod('shop', 'batch-1', { labels: NONE }), pod('shop', 'web-0')];
    const text = render(pods, [ns('shop', AMBIENT), ns('payments', AMBIENT), ns('plain')]);
    const u = (p: MeshPod) => p.metadata!.uid!;
    expect(text).toBe('{"version":1,"generation":3,"writtenAtMs":1764636000000,"node":"node-a",'
      + '"excludeNamespaces":["excluded","kube-system"],"meshNamespaces":["payments","shop"],"pods":['
      + `{"namespace":"payments","name":"api-0","uid":"${u(pods[1]!)}","mesh":true},`
      + `{"namespace":"shop","name":"batch-1","uid":"${u(pods[2]!)}","mesh":false},`
      + `{"namespace":"shop","name":"web-0","uid":"${u(pods[3]!)}","mesh":true},`
      + `{"namespace":"shop","name":"web-1","uid":"${u(pods[0]!)}","mesh":true}]}`);
    expect(Object.keys(JSON.parse(text))).toEqual(['version', 'generation', 'writtenAtMs', 'node', 'excludeNamespaces', 'meshNamespaces', 'pods']);
  });

  it('a pod in an ambient namespace is meshed and the namespace is listed', () => {
    const f = parsed([pod('apps', 'a')], [ns('apps', AMBIENT)]);
    expect(f.meshNamespaces).toEqual(['apps']);
    expect(entry(f, 'apps', 'a')!.mesh).toBe(true);
  });

  it('an ambient namespace is listed even with no pod of this node in it (an unknown pod there fails closed)', () => {
    expect(parsed([], [ns('apps', AMBIENT), ns('plain')]).meshNamespaces).toEqual(['apps']);
  });

  it('a pod opted out with istio.io/dataplane-mode=none in an ambient namespace: listed with mesh:false', () => {
    const f = parsed([pod('apps', 'out', { labels: NONE }), pod('apps', 'in')], [ns('apps', AMBIENT)]);
    expect(entry(f, 'apps', 'out')).toMatchObject({ mesh: false });
    expect(entry(f, 'apps', 'in')).toMatchObject({ mesh: true });
    expect(f.meshNamespaces).toEqual(['apps']);
  });

  it('a pod opting in by its own label in a plain namespace: mesh:true, and its namespace listed', () => {
    const f = parsed([pod('plain', 'opted-in', { labels: AMBIENT }), pod('plain', 'other')], [ns('plain'), ns('quiet')]);
    expect(entry(f, 'plain', 'opted-in')).toMatchObject({ mesh: true });
    expect(entry(f, 'plain', 'other')).toMatchObject({ mesh: false });
    expect(f.meshNamespaces).toEqual(['plain']);
  });

  it('a plain pod in a plain namespace: mesh:false, nothing listed', () => {
    const f = parsed([pod('plain', 'p')], [ns('plain')]);
    expect(f.meshNamespaces).toEqual([]);
    expect(entry(f, 'plain', 'p')).toMatchObject({ mesh: false });
  });

  it('a sidecar-annotated pod is meshed wherever it is, its namespace listed', () => {
    const f = parsed([pod('plain', 'sc', { annotations: { 'sidecar.istio.io/status': '{}' } })], [ns('plain')]);
    expect(entry(f, 'plain', 'sc')).toMatchObject({ mesh: true });
    expect(f.meshNamespaces).toEqual(['plain']);
  });

  it('a namespace labelled for sidecar injection is listed (istio-injection=enabled, any istio.io/rev), a disabled one is not', () => {
    const f = parsed([pod('inj', 'p')], [ns('inj', { 'istio-injection': 'enabled' }), ns('rev', { 'istio.io/rev': 'canary' }), ns('off', { 'istio-injection': 'disabled' })]);
    expect(f.meshNamespaces).toEqual(['inj', 'rev']);
    // The pod itself, without the injector's annotation, is not known to need the plugin.
    expect(entry(f, 'inj', 'p')).toMatchObject({ mesh: false });
  });

  it('an excluded namespace: its pods are mesh:false and it is not listed even when labelled ambient', () => {
    const f = parsed([pod('kube-system', 'coredns'), pod('kube-system', 'labelled', { labels: AMBIENT })], [ns('kube-system', AMBIENT)]);
    expect(f.meshNamespaces).toEqual([]);
    expect(f.pods.map((e) => e.mesh)).toEqual([false, false]);
    expect(JSON.parse(render([], [])).excludeNamespaces).toEqual(['excluded', 'kube-system']);
  });

  it('the agent and ztunnel are never meshed; a terminal pod is not; a selected pod being deleted still is', () => {
    const f = parsed([
      pod('istio-system', 'istio-cni-node-x'), pod('istio-system', 'ztunnel-y', { labels: { app: 'ztunnel' } }),
      pod('apps', 'done', { phase: 'Succeeded' }), pod('apps', 'leaving', { deleting: true }),
    ], [ns('istio-system', AMBIENT), ns('apps', AMBIENT)]);
    expect(entry(f, 'istio-system', 'istio-cni-node-x')!.mesh).toBe(false);
    expect(entry(f, 'istio-system', 'ztunnel-y')!.mesh).toBe(false);
    expect(entry(f, 'apps', 'done')!.mesh).toBe(false);
    expect(entry(f, 'apps', 'leaving')!.mesh).toBe(true);
  });

  it('a pod whose namespace the agent does not hold counts as meshed (that namespace may be ambient)', () => {
    expect(podNeedsPlugin(pod('unknown', 'p'), undefined, policy)).toBe(true);
    expect(podNeedsPlugin(pod('kube-system', 'p'), undefined, policy)).toBe(false);
    expect(parsed([pod('unknown', 'p')], []).meshNamespaces).toEqual(['unknown']);
  });

  it('no selectors: only sidecar pods and injection namespaces count', () => {
    const none = { ...policy, selectors: compileEnablementSelectors([]) };
    const f = parsed([pod('apps', 'a', { labels: AMBIENT }), pod('apps', 'sc', { annotations: { 'sidecar.istio.io/status': '{}' } })], [ns('apps', AMBIENT), ns('inj', { 'istio-injection': 'enabled' })], none);
    expect(f.pods.map((e) => [e.name, e.mesh])).toEqual([['a', false], ['sc', true]]);
    expect(f.meshNamespaces).toEqual(['apps', 'inj']);
  });

  it('names are quoted as JSON whatever they hold', () => {
    const text = renderDecisionFile({ generation: 1, writtenAtMs: 0, node: 'n"\\\u2028', policy: { ...policy, excludeNamespaces: ['a"b'] }, pods: [pod('x\ny', 'p"q')], namespaces: [] });
    const f = JSON.parse(text) as { node: string; excludeNamespaces: string[]; pods: Array<{ namespace: string; name: string }> };
    expect(f.node).toBe('n"\\\u2028');
    expect(f.excludeNamespaces).toEqual(['a"b']);
    expect(f.pods[0]).toMatchObject({ namespace: 'x\ny', name: 'p"q' });
  });

  it('sorts by namespace first, then name (not by the joined key)', () => {
    // "a-b/c" < "a/z" as joined strings ('-' < '/'), but namespace "a" < "a-b".
    const { pods } = decisionEntries({ policy, pods: [pod('a-b', 'c'), pod('a', 'z')], namespaces: [] });
    expect(pods.map((p) => `${p.namespace}/${p.name}`)).toEqual(['a/z', 'a-b/c']);
  });
});

describe('namespace scope', () => {
  const sel = compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS);
  it('the default selectors: an ambient namespace may enroll any pod; a plain one only pods that opt in themselves', () => {
    expect(namespaceMayEnroll(AMBIENT, sel)).toBe(true);
    expect(namespaceMayEnroll({}, sel)).toBe(false);
    expect(namespaceMayEnroll(undefined, sel)).toBe(false);
    expect(namespaceMayEnroll(NONE, sel)).toBe(false);
  });
  it('a pair with no podSelector or a podSelector an unlabelled pod matches makes its namespaces count', () => {
    expect(namespaceMayEnroll({}, compileEnablementSelectors([{}]))).toBe(true);
    const notNone = compileEnablementSelectors([{ podSelector: { matchExpressions: [{ key: 'istio.io/dataplane-mode', operator: 'NotIn', values: ['none'] }] } }]);
    expect(namespaceMayEnroll({ team: 'x' }, notNone)).toBe(true);
    const teamOnly = compileEnablementSelectors([{ podSelector: { matchLabels: { mesh: 'yes' } }, namespaceSelector: { matchLabels: { team: 'a' } } }]);
    expect(namespaceMayEnroll({ team: 'a' }, teamOnly)).toBe(true);  // over-inclusive: an unknown pod may carry mesh=yes
    expect(namespaceMayEnroll({ team: 'b' }, teamOnly)).toBe(false);
    expect(namespaceMayEnroll(AMBIENT, compileEnablementSelectors([]))).toBe(false);
  });
  it('sidecar injection labels', () => {
    expect(namespaceInjectsSidecars({ 'istio-injection': 'enabled' })).toBe(true);
    expect(namespaceInjectsSidecars({ 'istio.io/rev': '' })).toBe(true);
    expect(namespaceInjectsSidecars({ 'istio-injection': 'disabled' })).toBe(false);
    expect(namespaceInjectsSidecars(null)).toBe(false);
  });
});
