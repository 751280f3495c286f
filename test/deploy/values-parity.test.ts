// An istio-cni operator's values file and platform, against upstream's own chart: every key of
// upstream's values.yaml (read from the istio.io/istio module in the Go module cache) is either
// honoured by deploy/chart/podwire with the same meaning — set to the same probe value, both
// charts rendered by real helm give the same manifest effect, and one different from podwire's
// default — or refused by values.schema.json naming the key and why. Both READMEs list both sets.
// A realistic operator file renders the equivalent DaemonSet; every upstream profile and platform
// gives the same host paths, Multus handling and privileges.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { dumpYaml, loadYaml, type KubernetesObject } from '@kubernetes/client-node';
import { load, loadAll } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { CHART_DIR, Helm, HelmError } from '../helpers/helm.js';
import { leafPaths, upstreamChartDir, upstreamProfiles, upstreamValues } from '../helpers/istio-chart.js';
import { adminClient, describeKube, freshNamespace, kubeEnv } from '../helpers/kube.js';

type Obj = Record<string, any>;
let helm: Helm;
let upstreamDir: string;

beforeAll(async () => {
  upstreamDir = upstreamChartDir();
  helm = await Helm.open();
}, 600_000);
afterAll(() => helm?.close());

async function render(chart: string, values: object, extra: readonly string[] = []): Promise<Obj[]> {
  const { stdout } = await helm.run(['template', 'r', chart, '--namespace', 'istio-system', '-f', helm.valuesFile(values), ...extra]);
  return (loadAll(stdout) as unknown[]).filter((o): o is Obj => o !== null && typeof o === 'object');
}

const find = (objs: Obj[], kind: string) => objs.find((o) => o.kind === kind && (kind !== 'ConfigMap' || o.metadata.name === 'istio-cni-config'));

/** The settings upstream's and podwire's ConfigMaps share, under one name each, empties dropped (upstream omits them). */
function settings(objs: Obj[]): Record<string, string> {
  const cm = find(objs, 'ConfigMap')?.data ?? {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries<string>(cm)) if (v !== '') out[k === 'ISTIO_OWNED_CNI_CONF_FILENAME' ? 'ISTIO_OWNED_CNI_CONFIG_FILENAME' : k] = v;
  // Upstream sets ALLOW_SWITCH_TO_HOST_NS and `env` on the container too; podwire in the ConfigMap only.
  const c = find(objs, 'DaemonSet')?.spec.template.spec.containers[0];
  for (const e of c?.env ?? []) if (e.value !== undefined && !['REPAIR_RUN_AS_DAEMON', 'REPAIR_SIDECAR_ANNOTATION'].includes(e.name)) out[e.name] = e.value;
  return out;
}

/** What a value can change, normalised so the two charts' spellings compare. */
function view(objs: Obj[]) {
  const ds = find(objs, 'DaemonSet');
  const pod = ds?.spec.template.spec;
  const c = pod?.containers[0];
  const image: string = c?.image ?? '';
  const slash = image.lastIndexOf('/');
  const colon = image.lastIndexOf(':');
  const args: string[] = c?.args ?? [];
  const vols = Object.fromEntries((pod?.volumes ?? []).map((v: Obj) => [v.name, v.hostPath?.path]));
  const annotations = { ...(ds?.spec.template.metadata.annotations ?? {}) };
  const sc = c?.securityContext ?? {};
  const cr = objs.filter((o) => o.kind === 'ClusterRole').flatMap((o) => o.rules ?? []);
  return {
    image, hub: image.slice(0, slash), tag: colon > slash ? image.slice(colon + 1) : '', pullPolicy: c?.imagePullPolicy,
    logLevel: args.find((a) => a.startsWith('--log_output_level='))?.split('=')[1],
    logJson: args.includes('--log_as_json') || args.includes('--log_as_json=true'),
    binDir: vols['cni-bin-dir'], confDir: vols['cni-net-dir'], netnsDir: vols['cni-netns-dir'],
    settings: settings(objs),
    selectors: load(settings(objs).AMBIENT_ENABLEMENT_SELECTOR ?? 'null'),
    affinity: pod?.affinity, dsLabels: ds?.metadata.labels ?? {}, podLabels: ds?.spec.template.metadata.labels ?? {}, annotations,
    tolerations: pod?.tolerations ?? [], updateStrategy: ds?.spec.updateStrategy, grace: pod?.terminationGracePeriodSeconds,
    resources: c?.resources, seccomp: sc.seccompProfile, selinux: sc.seLinuxOptions, privileged: sc.privileged,
    apparmor: annotations['container.apparmor.security.beta.kubernetes.io/install-cni'] === 'unconfined' ? 'annotation' : sc.appArmorProfile?.type === 'Unconfined' ? 'field' : 'none',
    hostNetwork: pod?.hostNetwork === true,
    pullSecrets: find(objs, 'ServiceAccount')?.imagePullSecrets,
    nad: objs.filter((o) => o.kind === 'NetworkAttachmentDefinition').map((o) => `${o.metadata.namespace}/${o.metadata.name} ${JSON.stringify(o.spec ?? {})}`),
    quota: find(objs, 'ResourceQuota')?.spec,
    netpol: find(objs, 'NetworkPolicy')?.spec,
    scc: cr.filter((r: Obj) => (r.apiGroups ?? []).includes('security.openshift.io')).map((r: Obj) => ({ resources: r.resources, resourceNames: r.resourceNames, verbs: r.verbs })),
    kinds: [...new Set(objs.map((o) => o.kind))].sort(),
  };
}
type View = ReturnType<typeof view>;

/**
 * Every key of upstream's values.yaml podwire honours: a probe value (merged over
 * `ambient.enabled=true`, podwire's only mode, for both charts) and what it must change, read the
 * same way from both renders. `sameAsDefault`: the probe cannot differ from podwire's own render
 * (documented per key).
 */
const HONOURED: Record<string, { probe: object; pick: (v: View) => unknown; sameAsDefault?: string }> = {
  hub: { probe: { hub: 'hub.example/mesh' }, pick: (v) => v.hub },
  tag: { probe: { tag: '9.9.9' }, pick: (v) => v.tag },
  image: { probe: { image: 'registry.example/mesh/cni:1.2.3' }, pick: (v) => v.image },
  pullPolicy: { probe: { pullPolicy: 'Always' }, pick: (v) => v.pullPolicy },
  'logging.level': { probe: { logging: { level: 'cni-agent:debug' } }, pick: (v) => v.logLevel },
  cniBinDir: { probe: { cniBinDir: '/srv/cni/bin' }, pick: (v) => v.binDir },
  cniConfDir: { probe: { cniConfDir: '/srv/cni/net.d' }, pick: (v) => v.confDir },
  cniConfFileName: { probe: { cniConfFileName: '10-calico.conflist' }, pick: (v) => v.settings.CNI_CONF_NAME },
  cniNetnsDir: { probe: { cniNetnsDir: '/var/run/docker/netns' }, pick: (v) => v.netnsDir },
  istioOwnedCNIConfigFileName: { probe: { istioOwnedCNIConfig: true, istioOwnedCNIConfigFileName: '01-mesh.conflist' }, pick: (v) => v.settings.ISTIO_OWNED_CNI_CONFIG_FILENAME },
  istioOwnedCNIConfig: { probe: { istioOwnedCNIConfig: true }, pick: (v) => v.settings.ISTIO_OWNED_CNI_CONFIG },
  excludeNamespaces: { probe: { excludeNamespaces: ['kube-system', 'infra'] }, pick: (v) => v.settings.EXCLUDE_NAMESPACES },
  affinity: { probe: { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'mesh', operator: 'In', values: ['yes'] }] }] } } } }, pick: (v) => v.affinity },
  daemonSetLabels: { probe: { daemonSetLabels: { team: 'mesh' } }, pick: (v) => v.dsLabels.team },
  podAnnotations: { probe: { podAnnotations: { 'example.com/owner': 'mesh-team' } }, pick: (v) => v.annotations['example.com/owner'] },
  podLabels: { probe: { podLabels: { team: 'mesh' } }, pick: (v) => v.podLabels.team },
  chained: { probe: { chained: false }, pick: (v) => v.settings.CHAINED_CNI_PLUGIN },
  provider: { probe: { provider: 'multus' }, pick: (v) => v.nad },
  'ambient.enabled': { probe: { ambient: { enabled: true } }, pick: (v) => v.settings.AMBIENT_ENABLED, sameAsDefault: 'podwire runs ambient mode only: true is its default, false fails the render' },
  'ambient.enablementSelectors': { probe: { ambient: { enablementSelectors: [{ podSelector: { matchLabels: { mesh: 'yes' } } }] } }, pick: (v) => v.selectors },
  'ambient.dnsCapture': { probe: { ambient: { dnsCapture: false } }, pick: (v) => v.settings.AMBIENT_DNS_CAPTURE },
  'ambient.ipv6': { probe: { ambient: { ipv6: false } }, pick: (v) => v.settings.AMBIENT_IPV6 },
  'ambient.reconcileIptablesOnStartup': { probe: { ambient: { reconcileIptablesOnStartup: false } }, pick: (v) => v.settings.AMBIENT_RECONCILE_POD_RULES_ON_STARTUP },
  'ambient.shareHostNetworkNamespace': { probe: { ambient: { shareHostNetworkNamespace: false } }, pick: (v) => [v.hostNetwork, v.settings.ALLOW_SWITCH_TO_HOST_NS] },
  'ambient.enableAmbientDetectionRetry': { probe: { ambient: { enableAmbientDetectionRetry: true } }, pick: (v) => v.settings.ENABLE_AMBIENT_DETECTION_RETRY },
  'repair.enabled': { probe: { repair: { enabled: false } }, pick: (v) => v.settings.REPAIR_ENABLED },
  'repair.labelPods': { probe: { repair: { labelPods: true } }, pick: (v) => v.settings.REPAIR_LABEL_PODS },
  'repair.deletePods': { probe: { repair: { deletePods: true } }, pick: (v) => v.settings.REPAIR_DELETE_PODS },
  'repair.repairPods': { probe: { repair: { repairPods: false } }, pick: (v) => v.settings.REPAIR_REPAIR_PODS },
  'repair.initContainerName': { probe: { repair: { initContainerName: 'mesh-check' } }, pick: (v) => v.settings.REPAIR_INIT_CONTAINER_NAME },
  'repair.brokenPodLabelKey': { probe: { repair: { brokenPodLabelKey: 'example.com/broken' } }, pick: (v) => v.settings.REPAIR_BROKEN_POD_LABEL_KEY },
  'repair.brokenPodLabelValue': { probe: { repair: { brokenPodLabelValue: 'yes' } }, pick: (v) => v.settings.REPAIR_BROKEN_POD_LABEL_VALUE },
  seccompProfile: { probe: { seccompProfile: { type: 'RuntimeDefault' } }, pick: (v) => v.seccomp },
  seLinuxOptions: { probe: { seLinuxOptions: { level: 's0:c123,c456' } }, pick: (v) => v.selinux },
  useAppArmorAnnotation: { probe: { useAppArmorAnnotation: true }, pick: (v) => v.apparmor },
  resources: { probe: { resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } } }, pick: (v) => v.resources },
  'resourceQuotas.enabled': { probe: { resourceQuotas: { enabled: true } }, pick: (v) => v.quota },
  'resourceQuotas.pods': { probe: { resourceQuotas: { enabled: true, pods: 77 } }, pick: (v) => v.quota },
  tolerations: { probe: { tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'mesh', effect: 'NoSchedule' }] }, pick: (v) => v.tolerations.some((t: Obj) => t.key === 'dedicated' && t.value === 'mesh') },
  updateStrategy: { probe: { updateStrategy: { type: 'OnDelete' } }, pick: (v) => v.updateStrategy },
  terminationGracePeriodSeconds: { probe: { terminationGracePeriodSeconds: 90 }, pick: (v) => v.grace },
  ownerName: { probe: { ownerName: 'mesh-operator' }, pick: (v) => v.dsLabels['install.operator.istio.io/owning-resource'] },
  'global.hub': { probe: { global: { hub: 'global.example/mesh' } }, pick: (v) => v.hub },
  'global.tag': { probe: { global: { tag: '8.8.8' } }, pick: (v) => v.tag },
  'global.imagePullPolicy': { probe: { global: { imagePullPolicy: 'IfNotPresent' } }, pick: (v) => v.pullPolicy },
  'global.logging.level': { probe: { global: { logging: { level: 'default:warn' } } }, pick: (v) => v.logLevel },
  'global.logAsJson': { probe: { global: { logAsJson: true } }, pick: (v) => v.logJson },
  'global.networkPolicy.enabled': { probe: { global: { networkPolicy: { enabled: true } } }, pick: (v) => v.netpol },
  'global.imagePullSecrets': { probe: { global: { imagePullSecrets: ['regcred'] } }, pick: (v) => v.pullSecrets },
  'global.defaultResources': {
    probe: { global: { defaultResources: { requests: { cpu: '7m' } } } }, pick: (v) => v.resources,
    sameAsDefault: 'used only when resources is empty, and a values file cannot empty a default map (in either chart)',
  },
  'global.nativeNftables': { probe: { global: { nativeNftables: true } }, pick: (v) => v.settings.NATIVE_NFTABLES },
  'global.resourceScope': { probe: { global: { resourceScope: 'cluster' } }, pick: (v) => v.kinds },
  env: { probe: { env: { MESH_TEAM: 'platform' } }, pick: (v) => v.settings.MESH_TEAM },
};

/** Maps passed through whole: leaves of the key list. */
const WHOLE = new Set(['affinity', 'daemonSetLabels', 'podAnnotations', 'podLabels', 'seccompProfile', 'seLinuxOptions', 'resources', 'tolerations', 'updateStrategy', 'env', 'global.defaultResources', 'global.imagePullSecrets']);

function merge(a: Obj, b: Obj): Obj {
  const out: Obj = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = v && typeof v === 'object' && !Array.isArray(v) && out[k] && typeof out[k] === 'object' ? merge(out[k], v) : v;
  return out;
}

/** Sets `path` to `value` in a fresh values tree. */
function at(path: string, value: unknown): Obj {
  return path.split('.').reverse().reduce<unknown>((v, k) => ({ [k]: v }), value) as Obj;
}

function schemaAt(path: string): Obj | undefined {
  let node: Obj | undefined = JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8'));
  for (const part of path.split('.')) node = node?.properties?.[part];
  return node;
}
const REFUSAL = '^$|$^ refused by podwire: ';
const refusalOf = (path: string) => { const p = schemaAt(path)?.pattern; return typeof p === 'string' && p.startsWith(REFUSAL) ? p.slice(REFUSAL.length) : undefined; };

/** An operator's istio-cni values file: ambient, custom CNI dirs, exclusions, resources, tolerations, annotations, privileged, repair, logging. */
const OPERATOR_FILE = {
  cniBinDir: '/opt/custom/cni/bin', cniConfDir: '/etc/custom/cni/net.d',
  excludeNamespaces: ['kube-system', 'monitoring', 'infra'],
  resources: { requests: { cpu: '200m', memory: '128Mi' }, limits: { memory: '512Mi' } },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'infra', effect: 'NoSchedule' }, { key: 'CriticalAddonsOnly', operator: 'Exists' }],
  podAnnotations: { 'cluster-autoscaler.kubernetes.io/safe-to-evict': 'false' },
  privileged: true,
  ambient: { enabled: true, shareHostNetworkNamespace: true, dnsCapture: false, reconcileIptablesOnStartup: true },
  repair: { enabled: true, repairPods: false, deletePods: true, brokenPodLabelKey: 'example.com/cni-broken' },
  logging: { level: 'cni-agent:debug' },
  global: { hub: 'registry.example/istio', tag: '1.29.0', logAsJson: true },
};

const BASE = { ambient: { enabled: true } };
const defaults = () => upstreamValues()._internal_defaults_do_not_set as Obj;
const upstreamKeys = () => leafPaths(defaults(), WHOLE);

describe('values parity with upstream\'s istio-cni chart (istio.io/istio module)', () => {
  it('every key of upstream\'s values.yaml is honoured or refused by the schema, none both, none neither', () => {
    const keys = upstreamKeys();
    expect(keys.length).toBeGreaterThan(50);  // the walk found upstream's keys at all
    const unclassified = keys.filter((k) => !HONOURED[k] && !refusalOf(k));
    expect(unclassified).toEqual([]);
    expect(keys.filter((k) => HONOURED[k] && refusalOf(k))).toEqual([]);
    // Nothing here that upstream does not have (a key dropped upstream must leave this list).
    expect(Object.keys(HONOURED).filter((k) => !keys.includes(k))).toEqual([]);
    // Every honoured key has a default in podwire's values.yaml, at the same path.
    const ours = (load(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as Obj)._internal_defaults_do_not_set;
    const missing = Object.keys(HONOURED).filter((k) => k.split('.').reduce<any>((n, p) => n?.[p], ours) === undefined);
    expect(missing).toEqual([]);
  });

  it('a refused key fails the render naming the key and why; its no-op value "" renders', async () => {
    const refused = upstreamKeys().filter((k) => refusalOf(k));
    expect(refused.sort()).toEqual(['ambient.configDir', 'global.variant', 'repair.hub', 'repair.tag', 'revision', 'variant']);
    for (const key of refused) {
      let err: unknown;
      await render(CHART_DIR, merge(BASE, at(key, 'canary'))).catch((e: unknown) => { err = e; });
      expect(err, key).toBeInstanceOf(HelmError);
      const stderr = (err as HelmError).stderr;
      expect(stderr, key).toContain(`at '/${key.replaceAll('.', '/')}'`);
      expect(stderr, key).toContain(`refused by podwire: ${refusalOf(key)!.replaceAll("'", "\\'")}`);
      // Upstream's default ("") is what an operator's copied values file says: it loads.
      expect((await render(CHART_DIR, merge(BASE, at(key, '')))).some((o) => o.kind === 'DaemonSet'), key).toBe(true);
      // The same refusal under Istio's `cni:` prefix.
      await expect(render(CHART_DIR, { cni: at(key, 'canary') })).rejects.toBeInstanceOf(HelmError);
    }
  });

  it('an honoured key, set to the same value in both charts, has the same effect, and one podwire\'s default does not have', async () => {
    const ourDefault = view(await render(CHART_DIR, BASE));
    for (const [key, h] of Object.entries(HONOURED)) {
      const values = merge(BASE, h.probe);
      const [up, ours] = await Promise.all([render(upstreamDir, values), render(CHART_DIR, values)]);
      expect(h.pick(view(ours)), key).toEqual(h.pick(view(up)));
      if (!h.sameAsDefault) expect(h.pick(view(ours)), `${key} changes something`).not.toEqual(h.pick(ourDefault));
    }
  }, 120_000);

  it('both READMEs list every upstream key: the honoured ones in the values table, the refused ones with their reason', () => {
    for (const file of [join(CHART_DIR, 'README.md'), join(CHART_DIR, '../../../README.md')]) {
      const text = readFileSync(file, 'utf8');
      const rows = text.split('\n').filter((l) => l.startsWith('|'));
      for (const key of upstreamKeys()) {
        const row = rows.find((r) => r.includes(`\`${key}\``));
        expect(row, `${file}: ${key}`).toBeDefined();
        if (refusalOf(key)) expect(row, `${file}: ${key}`).toMatch(/refused/);
      }
    }
  });

  it('a realistic operator file renders the DaemonSet upstream\'s chart renders, plus privileged', async () => {
    const file = OPERATOR_FILE;
    const [up, ours] = await Promise.all([render(upstreamDir, file), render(CHART_DIR, file)]);
    const u = view(up);
    const o = view(ours);
    for (const f of ['hub', 'tag', 'logLevel', 'logJson', 'binDir', 'confDir', 'netnsDir', 'resources', 'hostNetwork', 'updateStrategy', 'grace', 'selinux', 'seccomp'] as const) expect(o[f], f).toEqual(u[f]);
    for (const k of ['EXCLUDE_NAMESPACES', 'AMBIENT_DNS_CAPTURE', 'AMBIENT_RECONCILE_POD_RULES_ON_STARTUP', 'REPAIR_ENABLED', 'REPAIR_REPAIR_PODS', 'REPAIR_DELETE_PODS', 'REPAIR_BROKEN_POD_LABEL_KEY', 'AMBIENT_ENABLED', 'CHAINED_CNI_PLUGIN']) {
      expect(o.settings[k], k).toEqual(u.settings[k]);
    }
    for (const t of file.tolerations) expect(o.tolerations, JSON.stringify(t)).toContainEqual(t);
    expect(o.annotations['cluster-autoscaler.kubernetes.io/safe-to-evict']).toBe('false');
    // Upstream's chart has no `privileged` (older Istio charts had it): podwire honours it.
    expect(o.privileged).toBe(true);
    expect(u.privileged).toBe(false);
    // repair.deletePods grants pod delete in both.
    const canDelete = (objs: Obj[]) => objs.filter((x) => x.kind === 'ClusterRole').some((r) => (r.rules ?? []).some((x: Obj) => x.resources?.includes('pods') && x.verbs?.includes('delete')));
    expect(canDelete(ours)).toBe(true);
    expect(canDelete(up)).toBe(true);
    // Every field podwire writes is one of the Kubernetes API.
    for (const raw of ours) expect(load(dumpYaml(loadYaml<KubernetesObject>(JSON.stringify(raw)))), `${raw.kind}/${raw.metadata.name}`).toEqual(raw);
  });
});

describe('profiles and platforms as upstream has them', () => {
  /** How each upstream profile file is selected. */
  const selectors = (name: string): object[] => {
    if (name.startsWith('platform-')) {
      const p = name.slice('platform-'.length);
      return [{ global: { platform: p } }, { platform: p }];
    }
    if (name.startsWith('compatibility-version-')) return [{ compatibilityVersion: name.slice('compatibility-version-'.length) }];
    return [{ profile: name }, { global: { profile: name } }];
  };
  /** What a profile may change, compared between the charts. */
  const profileView = (v: View) => ({
    binDir: v.binDir, confDir: v.confDir, netnsDir: v.netnsDir, nad: v.nad, quota: v.quota, selinux: v.selinux, scc: v.scc, resources: v.resources,
    settings: Object.fromEntries(['CHAINED_CNI_PLUGIN', 'CNI_CONF_NAME', 'AMBIENT_RECONCILE_POD_RULES_ON_STARTUP', 'AMBIENT_DNS_CAPTURE', 'AMBIENT_IPV6', 'EXCLUDE_NAMESPACES', 'ALLOW_SWITCH_TO_HOST_NS'].map((k) => [k, v.settings[k]])),
    hostNetwork: v.hostNetwork,
  });

  it('podwire has every upstream profile file, and each renders what upstream\'s does (host paths, Multus, quota, SELinux, SCC, settings)', async () => {
    const profiles = upstreamProfiles();
    expect([...profiles.keys()].filter((n) => n.startsWith('platform-')).sort()).toEqual(
      ['platform-gke', 'platform-k3d', 'platform-k3s', 'platform-microk8s', 'platform-minikube', 'platform-openshift']);
    for (const name of profiles.keys()) {
      for (const sel of selectors(name)) {
        // podwire's default is the host netns; upstream's is a pod network: compared with the profile's choice only.
        const values = merge({ ambient: { enabled: true, shareHostNetworkNamespace: false } }, sel);
        const hostNetFromProfile = profiles.get(name)?.ambient?.shareHostNetworkNamespace ?? profiles.get(name)?.cni?.ambient?.shareHostNetworkNamespace;
        if (hostNetFromProfile !== undefined) delete (values.ambient as Obj).shareHostNetworkNamespace;
        const [up, ours] = await Promise.all([render(upstreamDir, values), render(CHART_DIR, values)]);
        const want = profileView(view(up));
        const got = profileView(view(ours));
        if (hostNetFromProfile === undefined) {
          delete (want as Obj).hostNetwork;
          delete (got as Obj).hostNetwork;
        }
        expect(got, `${name} via ${JSON.stringify(sel)}`).toEqual(want);
      }
    }
    const unknown = await render(CHART_DIR, { platform: 'nonesuch' }).catch((e: HelmError) => e.stderr);
    expect(unknown).toContain('platform="nonesuch": no such platform');
  }, 180_000);

  it.each(['gke', 'k3d', 'k3s', 'microk8s', 'minikube', 'openshift'])('platform %s: the host paths of upstream\'s profile file, mounted where the agent looks', async (platform) => {
    const file = upstreamProfiles().get(`platform-${platform}`)!;
    const cni: Obj = file.cni ?? {};
    const d = defaults();
    const v = view(await render(CHART_DIR, { platform }));
    // gke leaves cniBinDir empty for the cluster-version detection (a "-gke" version: /home/kubernetes/bin); helm template has none.
    expect(v.binDir).toBe(cni.cniBinDir === '' ? '/opt/cni/bin' : (cni.cniBinDir ?? d.cniBinDir));
    expect(v.confDir).toBe(cni.cniConfDir ?? d.cniConfDir);
    expect(v.netnsDir).toBe(cni.cniNetnsDir ?? d.cniNetnsDir);
    expect(v.settings.CHAINED_CNI_PLUGIN).toBe(String(cni.chained ?? d.chained));
    // Only OpenShift (provider multus) gets the NetworkAttachmentDefinition and the privileged SCC; GKE the quota.
    expect(v.nad.length > 0).toBe(cni.provider === 'multus');
    expect(v.scc.length > 0).toBe(platform === 'openshift');
    expect(v.quota !== undefined).toBe(cni.resourceQuotas?.enabled === true);
    if (platform === 'openshift') {
      expect(v.nad).toEqual(['default/istio-cni {}']);
      expect(v.settings.CNI_CONF_NAME).toBe(cni.cniConfFileName);
      expect(v.selinux).toEqual({ type: 'spc_t' });
      expect(v.scc).toEqual([{ resources: ['securitycontextconstraints'], resourceNames: ['privileged'], verbs: ['use'] }]);
    }
    // A value the operator sets wins over the platform's.
    expect(view(await render(CHART_DIR, { platform, cniConfDir: '/etc/mine' })).confDir).toBe('/etc/mine');
  });
});

describeKube('the operator file through helm install on the test kube-apiserver', () => {
  it('installs, and the DaemonSet the API server stores is the one rendered', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const name = `pwt-${process.pid}-parity`;
    const kubeconfig = kubeEnv().adminKubeconfig;
    let installed = false;
    onTestFinished(async () => { if (installed) await helm.run(['uninstall', name, '--namespace', ns], { kubeconfig, timeoutMs: 60_000 }); });
    // The test apiserver runs without --allow-privileged: privileged=true reaches it and is refused there.
    const refused = await helm.run(['install', name, CHART_DIR, '--namespace', ns, '-f', helm.valuesFile(OPERATOR_FILE)], { kubeconfig, timeoutMs: 60_000 }).catch((e: HelmError) => e);
    expect(refused).toBeInstanceOf(HelmError);
    expect((refused as HelmError).stderr).toContain('securityContext.privileged');
    await helm.run(['uninstall', name, '--namespace', ns], { kubeconfig, timeoutMs: 60_000 }).catch(() => undefined);
    const file = { ...OPERATOR_FILE, privileged: false };
    await helm.run(['install', name, CHART_DIR, '--namespace', ns, '-f', helm.valuesFile(file)], { kubeconfig, timeoutMs: 60_000 });
    installed = true;
    const ds = await admin.apps.readNamespacedDaemonSet({ namespace: ns, name: 'istio-cni-node' });
    const rendered = view(await helm.run(['template', name, CHART_DIR, '--namespace', ns, '-f', helm.valuesFile(file)])
      .then(({ stdout }) => (loadAll(stdout) as unknown[]).filter((o): o is Obj => o !== null && typeof o === 'object')));
    const pod = ds.spec!.template.spec!;
    const c = pod.containers[0]!;
    expect(pod.volumes!.find((v) => v.name === 'cni-bin-dir')?.hostPath?.path).toBe(rendered.binDir);
    expect(pod.volumes!.find((v) => v.name === 'cni-net-dir')?.hostPath?.path).toBe('/etc/custom/cni/net.d');
    expect(c.securityContext?.privileged).toBe(false);
    expect(c.securityContext?.capabilities?.add).toEqual(['NET_ADMIN', 'SYS_ADMIN', 'SYS_PTRACE', 'NET_RAW']);
    expect(c.resources).toEqual(OPERATOR_FILE.resources);
    expect(pod.tolerations).toEqual(expect.arrayContaining(OPERATOR_FILE.tolerations.map((t) => expect.objectContaining(t))));
    expect(ds.spec!.template.metadata!.annotations).toMatchObject(OPERATOR_FILE.podAnnotations);
    const cm = await admin.core.readNamespacedConfigMap({ namespace: ns, name: 'istio-cni-config' });
    expect(cm.data).toMatchObject({ EXCLUDE_NAMESPACES: 'kube-system,monitoring,infra', AMBIENT_DNS_CAPTURE: 'false', REPAIR_DELETE_PODS: 'true', REPAIR_REPAIR_PODS: 'false' });
  });
});
