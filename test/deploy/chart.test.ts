// The Helm chart (deploy/chart/podwire) through real helm: lint, what it renders for the value
// sets an operator would use (read back by the agent's own config parsers, RBAC compared with
// scripts/kube/rbac.mjs), and the rendered manifests applied to the real test kube-apiserver,
// where the chart's ServiceAccount gets a token and does what the agent does, and is refused
// what the chart does not grant; then helm install/upgrade/uninstall against that apiserver.
// No pod runs (no kubelet), so the image and the agent's start on a node are not covered here.
import { dumpYaml, KubernetesObjectApi, loadYaml, PatchStrategy, RbacAuthorizationV1Api, type KubernetesObject } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { parseAgentConfig, SETTINGS, type Env } from '../../lib/agent/config.js';
import { INSTALL_SETTINGS, parseInstallConfig } from '../../lib/install/config.js';
import { parseRepairConfig, REPAIR_SETTINGS } from '../../lib/repair/config.js';
import { DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/enablement.js';
import { namespaceInformer, podInformer } from '../../lib/kube/resources.js';
import { annotatePodViaStatus, deletePod, patchPodMetadata } from '../../lib/kube/pods.js';
import { createPodEvent } from '../../lib/kube/events.js';
import { AGENT_CLUSTER_ROLE, NODE_TAINT_CLUSTER_ROLE, REPAIR_DELETE_CLUSTER_ROLE } from '../../scripts/kube/rbac.mjs';
import { RepairRbacError } from '../../lib/repair/controller.js';
import { adminClient, createPod, describeKube, freshNamespace, kubeEnv, until, within } from '../helpers/kube.js';
import { CHART_DIR, Helm, HelmError, type Rendered } from '../helpers/helm.js';
import { clientAs, kubeFailure } from '../helpers/rbac.js';
import { RUNTIME_ENV as IMAGE_RUNTIME_ENV } from '../../deploy/image/runtime.mjs';

type Obj = Record<string, any>;

let helm: Helm;
let seq = 0;
const release = () => `pwt-${process.pid}-chart-${++seq}`;

function only(r: Rendered, kind: string): Obj {
  const found = r.objects.filter((o) => o.kind === kind);
  expect(found.map((o) => o.metadata.name), `one ${kind}`).toHaveLength(1);
  return found[0]!;
}

function agentContainer(r: Rendered): Obj {
  const ds = only(r, 'DaemonSet');
  expect(ds.spec.template.spec.containers).toHaveLength(1);
  return ds.spec.template.spec.containers[0];
}

/** The container's environment as the kubelet would build it: envFrom first, env over it. */
function containerEnv(r: Rendered, pod = { nodeName: 'node-a', name: 'istio-cni-node-x1', namespace: 'istio-system' }): Env {
  const c = agentContainer(r);
  const cm = only(r, 'ConfigMap');
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    expect(from.configMapRef?.name).toBe(cm.metadata.name);
    Object.assign(env, cm.data);
  }
  const field: Record<string, string> = { 'spec.nodeName': pod.nodeName, 'metadata.name': pod.name, 'metadata.namespace': pod.namespace };
  for (const e of c.env ?? []) {
    if (e.valueFrom) {
      const path = e.valueFrom.fieldRef?.fieldPath as string;
      expect(field[path], `downward API field ${path}`).toBeDefined();
      env[e.name] = field[path]!;
    } else {
      env[e.name] = e.value;
    }
  }
  return env;
}

/** What `podwire agent` would parse in that container (as lib/cli/agent.ts does). */
function agentView(r: Rendered) {
  const env = containerEnv(r);
  const c = agentContainer(r);
  expect(c.command).toEqual(['podwire', 'agent']);
  const argv: string[] = c.args ?? [];
  return {
    env,
    agent: parseAgentConfig(env, argv, { foreign: [...INSTALL_SETTINGS, ...REPAIR_SETTINGS] }),
    install: parseInstallConfig(env, argv, { foreign: [...SETTINGS, ...REPAIR_SETTINGS] }),
    repair: parseRepairConfig(env, argv),
  };
}

/** ClusterRoles by name → rules; and each binding's role → subjects. */
function rbacOf(r: Rendered) {
  const roles = Object.fromEntries(r.objects.filter((o) => o.kind === 'ClusterRole').map((o) => [o.metadata.name, o.rules]));
  const bindings = Object.fromEntries(r.objects.filter((o) => o.kind === 'ClusterRoleBinding').map((o) => {
    expect(o.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: o.roleRef.name });
    return [o.roleRef.name, o.subjects];
  }));
  return { roles, bindings };
}

const KNOWN_ENV = new Set([...SETTINGS, ...INSTALL_SETTINGS, ...REPAIR_SETTINGS].flatMap((s) => [s.env, ...(s.envAliases ?? [])]).filter((e): e is string => !!e));
/** Read by Node and glibc, not the agent: the memory settings, the same as the image's (docs/benchmarks.md). */
const RUNTIME_ENV = Object.fromEntries(IMAGE_RUNTIME_ENV.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));

async function renderFails(values: object): Promise<HelmError> {
  try {
    await helm.template(release(), 'istio-system', values);
  } catch (err) {
    expect(err).toBeInstanceOf(HelmError);
    return err as HelmError;
  }
  throw new Error(`expected helm template to fail for ${JSON.stringify(values)}`);
}

// The first run on a machine builds helm (about a minute here); a failed build fails the tests.
beforeAll(async () => {
  helm = await Helm.open();
}, 600_000);
afterAll(() => helm?.close());

describe('Helm chart deploy/chart/podwire: lint and render', () => {
  it('is helm v3.22.0 and passes helm lint --strict, with the defaults and with every option on', async () => {
    const { stdout: version } = await helm.run(['version', '--short']);
    expect(version.trim()).toBe('v3.22.0');
    const { stdout } = await helm.run(['lint', '--strict', CHART_DIR]);
    expect(stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
    const all = helm.valuesFile({ repair: { deletePods: true }, nodeReadinessTaint: { enabled: true }, metricsService: { enabled: true }, ambient: { shareHostNetworkNamespace: false } });
    const r2 = await helm.run(['lint', '--strict', CHART_DIR, '-f', all]);
    expect(r2.stdout).toContain('0 chart(s) failed');
  });

  it('renders Istio\'s DaemonSet shape with the defaults: name, host netns, capabilities, probes, mounts, tolerations', async () => {
    const r = await helm.template('podwire', 'istio-system');
    expect(r.objects.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ClusterRole/podwire-agent', 'ClusterRoleBinding/podwire-agent', 'ConfigMap/istio-cni-config', 'DaemonSet/istio-cni-node', 'ServiceAccount/podwire',
    ]);
    for (const o of r.objects.filter((x) => x.metadata.namespace !== undefined)) expect(o.metadata.namespace).toBe('istio-system');
    const ds = only(r, 'DaemonSet');
    const pod = ds.spec.template.spec;
    expect(ds.spec.selector.matchLabels).toEqual({ 'k8s-app': 'istio-cni-node' });
    expect(ds.spec.template.metadata.labels).toMatchObject({ 'k8s-app': 'istio-cni-node', 'sidecar.istio.io/inject': 'false', 'istio.io/dataplane-mode': 'none' });
    expect(ds.spec.template.metadata.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '15014', 'prometheus.io/path': '/metrics' });
    expect(ds.spec.template.metadata.annotations['checksum/config']).toMatch(/^[0-9a-f]{64}$/);
    expect(ds.spec.updateStrategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } });
    expect(pod).toMatchObject({ serviceAccountName: 'podwire', hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet', priorityClassName: 'system-node-critical', terminationGracePeriodSeconds: 30 });
    expect(pod.tolerations).toEqual([{ operator: 'Exists', effect: 'NoSchedule' }, { operator: 'Exists', effect: 'NoExecute' }]);
    const c = agentContainer(r);
    expect(c.image).toBe('localhost/podwire:0.1.0');  // what `npm run image` builds
    expect(c.args).toEqual(['--log_output_level=default:info', '--log_as_json=false']);
    expect(c.ports).toEqual([{ name: 'metrics', containerPort: 15014, protocol: 'TCP' }]);
    expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 8000 });
    expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 8000 });
    expect(c.resources).toEqual({ requests: { cpu: '100m', memory: '100Mi' } });
    expect(c.securityContext).toEqual({
      privileged: false, allowPrivilegeEscalation: false, runAsUser: 0, runAsGroup: 0, runAsNonRoot: false,
      capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'SYS_ADMIN', 'SYS_PTRACE', 'NET_RAW'] },
      // useAppArmorAnnotation=false (podwire's default): the field, not Istio's annotation.
      appArmorProfile: { type: 'Unconfined' },
    });
    // Each mount with its host path (as the agent's defaults expect them).
    const volumes = Object.fromEntries(pod.volumes.map((v: Obj) => [v.name, v.hostPath]));
    const mounts = Object.fromEntries(c.volumeMounts.map((m: Obj) => [m.mountPath, { host: volumes[m.name]?.path, readOnly: m.readOnly, propagation: m.mountPropagation }]));
    expect(mounts).toEqual({
      '/host/opt/cni/bin': { host: '/opt/cni/bin' },
      '/host/etc/cni/net.d': { host: '/etc/cni/net.d' },
      '/var/run/istio-cni': { host: '/var/run/istio-cni' },
      '/var/run/ztunnel': { host: '/var/run/ztunnel' },
      '/host/proc': { host: '/proc', readOnly: true },
      '/host/var/run/netns': { host: '/var/run/netns', propagation: 'HostToContainer' },
      '/run/xtables.lock': { host: '/run/xtables.lock' },
    });
    // The agent's defaults point at exactly those mounts.
    const { agent, install } = agentView(r);
    expect(mounts[agent.hostProcRoot]).toBeDefined();
    expect(mounts[agent.cniAgentRunDir]).toBeDefined();
    expect(mounts[agent.ztunnelUdsAddress.replace(/\/[^/]+$/, '')]).toBeDefined();
    expect(mounts[install.mountedCniNetDir]).toBeDefined();
    for (const d of install.cniBinTargetDirs) expect(mounts[d]).toBeDefined();
    expect(mounts[`${agent.hostMountsRoot}/var/run/netns`]).toBeDefined();
  });

  it('every field it writes is one of the Kubernetes API (no misspelt field is silently dropped)', async () => {
    for (const values of [{}, { repair: { deletePods: true }, nodeReadinessTaint: { enabled: true }, metricsService: { enabled: true }, seccompProfile: { type: 'RuntimeDefault' }, tolerations: [{ key: 'k', operator: 'Exists' }] }]) {
      const r = await helm.template('podwire', 'istio-system', values);
      for (const raw of r.objects) {
        // client-node's model keeps only the API's fields: what goes through it unchanged has no other.
        const typed = loadYaml<KubernetesObject>(JSON.stringify(raw));
        expect(load(dumpYaml(typed)), `${raw.kind}/${raw.metadata.name}`).toEqual(raw);
      }
    }
  });

  it('sets only environment variables the agent reads, and with the defaults the agent runs as with no settings at all', async () => {
    const r = await helm.template('podwire', 'istio-system');
    const { env, agent, install, repair } = agentView(r);
    for (const name of Object.keys(env)) expect(KNOWN_ENV.has(name) || name in RUNTIME_ENV, `${name} is a setting of podwire agent`).toBe(true);
    // The measured memory settings are the chart's defaults whatever the image; `env` replaces them.
    expect(env).toMatchObject(RUNTIME_ENV);
    const own = containerEnv(await helm.template('podwire', 'istio-system', { env: { NODE_OPTIONS: '--max-old-space-size=256', MALLOC_ARENA_MAX: '4' } }));
    expect(own).toMatchObject({ NODE_OPTIONS: '--max-old-space-size=256', MALLOC_ARENA_MAX: '4' });
    expect(agent).toMatchObject({ nodeName: 'node-a', podName: 'istio-cni-node-x1', podNamespace: 'istio-system', ambientEnabled: true });
    expect(agent.enablementSelectors).toEqual(DEFAULT_ENABLEMENT_SELECTORS);
    // The chart's defaults are the agent's own (they follow Istio's chart), except the log format.
    const bare: Env = { NODE_NAME: 'node-a', POD_NAME: 'istio-cni-node-x1', POD_NAMESPACE: 'istio-system', AMBIENT_ENABLED: 'true' };
    const { selectors: _a, ...chartAgent } = agent;
    const { selectors: _b, ...bareAgent } = parseAgentConfig(bare, [], { foreign: [...INSTALL_SETTINGS, ...REPAIR_SETTINGS] });
    expect(chartAgent).toEqual({ ...bareAgent, logAsJson: false });
    expect(install).toEqual(parseInstallConfig(bare, [], { foreign: [...SETTINGS, ...REPAIR_SETTINGS] }));
    expect(repair).toEqual(parseRepairConfig(bare, []));
  });

  it('maps every value to the setting the agent reads', async () => {
    const r = await helm.template('podwire', 'istio-system', {
      cniConfFileName: '10-calico.conflist', chained: true, istioOwnedCNIConfig: true, istioOwnedCNIConfigFileName: '01-podwire.conflist',
      excludeNamespaces: ['kube-system', 'infra'],
      ambient: {
        enablementSelectors: [{ podSelector: { matchLabels: { mesh: 'yes' } } }], dnsCapture: false, ipv6: false,
        reconcileIptablesOnStartup: false, enableAmbientDetectionRetry: true, disableSafeUpgrade: true, driftCheckInterval: '5m',
      },
      repair: {
        enabled: true, repairPods: false, deletePods: false, labelPods: true, brokenPodLabelKey: 'example.com/broken', brokenPodLabelValue: 'yes',
        initContainerName: 'init-check', deleteRate: 3, resyncInterval: '2m', ambientGrace: '30s',
      },
      nodeReadinessTaint: { enabled: true, key: 'example.com/cni-not-ready' },
      forceIptablesBinary: 'nft',
      global: { nativeNftables: true, logAsJson: true, logging: { level: 'default:info' } },
      logging: { level: 'cni-agent:debug,cni-plugin:warn' },
      env: { HOST_PROBE_SNAT_IP: '169.254.7.1', AMBIENT_IPV6: 'true' },
    });
    const { env, agent, install, repair } = agentView(r);
    for (const name of Object.keys(env)) expect(KNOWN_ENV.has(name) || name in RUNTIME_ENV, `${name} is a setting of podwire agent`).toBe(true);
    expect(install).toMatchObject({ cniConfName: '10-calico.conflist', chainedCniPlugin: true, istioOwnedCniConfig: true, istioOwnedCniConfigFilename: '01-podwire.conflist', istioOwned: true });
    expect(agent).toMatchObject({
      excludeNamespaces: ['kube-system', 'infra'], enablementSelectors: [{ podSelector: { matchLabels: { mesh: 'yes' } } }],
      dnsCapture: false, reconcilePodRulesOnStartup: false, disableSafeUpgrade: true, driftCheckIntervalMs: 300_000,
      nativeNftables: true, forceIptablesBinary: 'nft', nodeReadinessTaint: true, nodeReadinessTaintKey: 'example.com/cni-not-ready',
      logAsJson: true, logOutputLevel: { 'cni-agent': 'debug', 'cni-plugin': 'warn' },
      // .Values.env replaces a chart setting (one key in the ConfigMap, not two) and adds any other.
      ipv6: true, hostProbeSnatIp: '169.254.7.1',
    });
    expect(install.entry).toMatchObject({ enableAmbientDetectionRetry: true, pluginLogLevel: 'warn', nativeNftables: true, excludeNamespaces: ['kube-system', 'infra'] });
    expect(repair).toMatchObject({
      enabled: true, repairPods: false, deletePods: false, labelPods: true, labelKey: 'example.com/broken', labelValue: 'yes',
      initContainerName: 'init-check', deleteRatePerMinute: 3, resyncMs: 120_000, ambientGraceMs: 30_000,
    });
    expect(r.text.match(/^\s+AMBIENT_IPV6:/gm)).toHaveLength(1);
  });

  it('grants exactly the rules of scripts/kube/rbac.mjs: the base role always, pod delete with repair.deletePods, node patch with the readiness gate', async () => {
    const cases: { values: object; extra: (typeof AGENT_CLUSTER_ROLE)[] }[] = [
      { values: {}, extra: [] },
      { values: { repair: { repairPods: false, labelPods: true } }, extra: [] },
      { values: { repair: { repairPods: false, deletePods: true } }, extra: [REPAIR_DELETE_CLUSTER_ROLE] },
      { values: { nodeReadinessTaint: { enabled: true } }, extra: [NODE_TAINT_CLUSTER_ROLE] },
      { values: { repair: { deletePods: true }, nodeReadinessTaint: { enabled: true } }, extra: [REPAIR_DELETE_CLUSTER_ROLE, NODE_TAINT_CLUSTER_ROLE] },
    ];
    for (const { values, extra } of cases) {
      // Release "podwire" names the roles as rbac.mjs does.
      const r = await helm.template('podwire', 'istio-system', values);
      const { roles, bindings } = rbacOf(r);
      const want = [AGENT_CLUSTER_ROLE, ...extra];
      expect(roles, JSON.stringify(values)).toEqual(Object.fromEntries(want.map((w) => [w.metadata.name, w.rules])));
      expect(bindings).toEqual(Object.fromEntries(want.map((w) => [w.metadata.name, [{ kind: 'ServiceAccount', name: 'podwire', namespace: 'istio-system' }]])));
      expect(containerEnv(r).REPAIR_DELETE_PODS).toBe(String(extra.includes(REPAIR_DELETE_CLUSTER_ROLE)));
      expect(containerEnv(r).NODE_READINESS_TAINT).toBe(String(extra.includes(NODE_TAINT_CLUSTER_ROLE)));
    }
    // Cluster-scoped names carry the release, so two releases do not collide; the DaemonSet keeps its name.
    const other = rbacOf(await helm.template('edge', 'mesh', { repair: { deletePods: true } }));
    expect(Object.keys(other.roles).sort()).toEqual(['edge-podwire-agent', 'edge-podwire-agent-repair-delete']);
    // The repair controller's RBAC error names this value and this role: they must be the chart's.
    const byValue = rbacOf(await helm.template('podwire', 'istio-system', { repair: { [RepairRbacError.CHART_VALUE.split('.')[1]!]: true } }));
    expect(byValue.roles[`podwire-${RepairRbacError.CLUSTER_ROLE_SUFFIX}`]).toEqual(REPAIR_DELETE_CLUSTER_ROLE.rules);
    expect(other.bindings['edge-podwire-agent']).toEqual([{ kind: 'ServiceAccount', name: 'edge-podwire', namespace: 'mesh' }]);
  });

  it('variants: pod network with ALLOW_SWITCH_TO_HOST_NS, another netns dir, image, metrics Service; refuses ambient.enabled=false, a bad backend and mistyped values', async () => {
    const podNet = await helm.template('podwire', 'istio-system', { ambient: { shareHostNetworkNamespace: false }, cniNetnsDir: '/var/run/docker/netns' });
    const pod = only(podNet, 'DaemonSet').spec.template.spec;
    expect(pod.hostNetwork).toBeUndefined();
    expect(pod.dnsPolicy).toBeUndefined();
    const { agent } = agentView(podNet);
    expect(agent.allowSwitchToHostNs).toBe(true);
    const netns = agentContainer(podNet).volumeMounts.find((m: Obj) => m.name === 'cni-netns-dir');
    expect(netns).toEqual({ name: 'cni-netns-dir', mountPath: '/host/var/run/docker/netns', mountPropagation: 'HostToContainer' });
    expect(pod.volumes.find((v: Obj) => v.name === 'cni-netns-dir').hostPath.path).toBe('/var/run/docker/netns');

    const img = await helm.template('podwire', 'istio-system', { global: { hub: 'registry.example/mesh', tag: '1.2.3', imagePullPolicy: 'IfNotPresent', imagePullSecrets: ['regcred'] } });
    expect(agentContainer(img)).toMatchObject({ image: 'registry.example/mesh/podwire:1.2.3', imagePullPolicy: 'IfNotPresent' });
    expect(only(img, 'DaemonSet').spec.template.spec.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    const own = await helm.template('podwire', 'istio-system', { hub: 'a.example', image: 'b.example/podwire-custom', tag: 't', pullPolicy: 'Always' });
    expect(agentContainer(own)).toMatchObject({ image: 'b.example/podwire-custom:t', imagePullPolicy: 'Always' });

    const svc = only(await helm.template('podwire', 'istio-system', { metricsService: { enabled: true } }), 'Service');
    expect(svc.metadata.annotations).toMatchObject({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '15014' });
    expect(svc.spec).toEqual({ selector: { 'k8s-app': 'istio-cni-node' }, ports: [{ name: 'metrics', port: 15014, targetPort: 'metrics', protocol: 'TCP' }] });

    // A changed setting changes the pod template (so the DaemonSet rolls).
    const sum = (x: Rendered) => only(x, 'DaemonSet').spec.template.metadata.annotations['checksum/config'];
    expect(sum(await helm.template('podwire', 'istio-system', { global: { nativeNftables: true } }))).not.toBe(sum(img));

    expect((await renderFails({ ambient: { enabled: false } })).stderr).toContain('podwire\'s agent runs ambient mode only');
    expect((await renderFails({ forceIptablesBinary: 'iptables' })).stderr).toContain('forceIptablesBinary="iptables"');
    // values.schema.json: a string "false" would be true to the template's `if` (and grant pod delete).
    expect((await renderFails({ repair: { deletePods: 'false' } })).stderr).toContain('/repair/deletePods');
    expect((await renderFails({ ambient: { driftCheckInterval: '5 minutes' } })).stderr).toContain('/ambient/driftCheckInterval');
  });

});

describeKube('Helm chart deploy/chart/podwire on the test kube-apiserver', () => {
  it('applies to the real kube-apiserver (dry run, then for real); its ServiceAccount can do what the agent does and no more', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const name = release();
    const objects = KubernetesObjectApi.makeApiClient(admin.kubeConfig);
    const created: KubernetesObject[] = [];
    onTestFinished(async () => {
      for (const o of created.reverse()) {
        await objects.delete(o, undefined, undefined, 0).catch((err: { code?: number }) => { if (err.code !== 404) throw err; });
      }
    });
    // Server-side apply (as `kubectl apply --server-side`): creates on install, updates on upgrade.
    const apply = async (r: Rendered, dryRun?: 'All') => {
      for (const o of r.objects) {
        const typed = loadYaml<KubernetesObject>(JSON.stringify(o));
        if (!dryRun && !created.some((c) => c.kind === o.kind && c.metadata?.name === o.metadata.name)) created.push(typed);
        await objects.patch(typed, undefined, dryRun, 'podwire-chart-test', true, PatchStrategy.ServerSideApply);
      }
    };

    const base = await helm.template(name, ns, { metricsService: { enabled: true } });
    // A dry run: the server validates and admits every object, and stores nothing.
    await apply(base, 'All');
    const rbac = rbacOf(base);
    const roleName = Object.keys(rbac.roles)[0]!;
    const missing = await objects.read({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: roleName } }).then(() => 'exists', (err: { code?: number }) => err.code);
    expect(missing).toBe(404);
    await apply(base);
    const ds = await admin.apps.readNamespacedDaemonSet({ namespace: ns, name: 'istio-cni-node' });
    expect(ds.spec?.template.spec?.serviceAccountName).toBe(`${name}-podwire`);
    expect(ds.spec?.template.spec?.containers[0]?.volumeMounts?.find((m) => m.name === 'cni-netns-dir')?.mountPropagation).toBe('HostToContainer');
    expect((await admin.core.readNamespacedConfigMap({ namespace: ns, name: 'istio-cni-config' })).data?.AMBIENT_ENABLED).toBe('true');

    const node = `${name}-node`;
    await admin.core.createNode({ body: { metadata: { name: node } } });
    onTestFinished(() => admin.core.deleteNode({ name: node }).then(() => undefined));
    const pod = await createPod(admin, ns, 'app', node);
    const sa = await clientAs(ns, `${name}-podwire`);

    // What the agent does at start and per pod. A fresh binding takes a moment to be in force.
    const pods = podInformer(sa, { nodeName: node });
    const namespaces = namespaceInformer(sa);
    try {
      await within('the informers sync as the chart\'s ServiceAccount', Promise.all([pods.start().synced, namespaces.start().synced]), 20_000);
      expect(pods.get('app', ns)?.metadata?.uid).toBe(pod.metadata!.uid);
      expect(namespaces.get(ns)).toBeDefined();
    } finally {
      await Promise.all([pods.stop(), namespaces.stop()]);
    }
    const patched = await annotatePodViaStatus(sa, { namespace: ns, name: 'app' }, { annotations: { 'ambient.istio.io/redirection': 'enabled' } });
    expect(patched.metadata?.annotations?.['ambient.istio.io/redirection']).toBe('enabled');
    const ev = await createPodEvent(sa, pod, { type: 'Warning', reason: 'EnrollFailed', message: 'chart test', component: 'istio-cni-node', host: node });
    expect(ev.metadata?.name).toBeTruthy();
    const own = await sa.call({ verb: 'get', resource: 'daemonsets', namespace: ns, name: 'istio-cni-node' }, (o) => sa.apps.readNamespacedDaemonSet({ namespace: ns, name: 'istio-cni-node' }, o));
    expect(own.metadata?.uid).toBe(ds.metadata?.uid);

    // And no more: not without repair.deletePods / the gate, and never main-resource patches or secrets.
    const patchNode = () => sa.call({ verb: 'patch', resource: 'nodes', name: node },
      (o) => sa.core.patchNode({ name: node, body: { spec: { taints: [{ key: 'cni.podwire.io/not-ready', effect: 'NoSchedule' }] } } }, o), { contentType: PatchStrategy.MergePatch });
    expect(await kubeFailure(deletePod(sa, { namespace: ns, name: 'app' }, { uid: pod.metadata!.uid!, gracePeriodSeconds: 0 }))).toMatchObject({ code: 'Forbidden', verb: 'delete', resource: 'pods' });
    expect(await kubeFailure(patchNode())).toMatchObject({ code: 'Forbidden', verb: 'patch', resource: 'nodes' });
    expect(await kubeFailure(patchPodMetadata(sa, { namespace: ns, name: 'app' }, { labels: { x: 'y' } }))).toMatchObject({ code: 'Forbidden', resource: 'pods' });
    expect(await kubeFailure(sa.call({ verb: 'list', resource: 'secrets', namespace: ns }, (o) => sa.core.listNamespacedSecret({ namespace: ns }, o)))).toMatchObject({ code: 'Forbidden' });
    expect(await kubeFailure(sa.call({ verb: 'get', resource: 'daemonsets', namespace: ns, name: 'other' }, (o) => sa.apps.readNamespacedDaemonSet({ namespace: ns, name: 'other' }, o)))).toMatchObject({ code: 'Forbidden' });
    // Nor what upstream's role has and podwire's code never asks (test/kube/rbac-derived.test.ts): nodes list, pods/status update, events patch.
    expect(await kubeFailure(sa.call({ verb: 'list', resource: 'nodes' }, (o) => sa.core.listNode({}, o)))).toMatchObject({ code: 'Forbidden', verb: 'list' });
    const current = await admin.core.readNamespacedPod({ namespace: ns, name: 'app' });
    expect(await kubeFailure(sa.call({ verb: 'update', resource: 'pods/status', namespace: ns, name: 'app' },
      (o) => sa.core.replaceNamespacedPodStatus({ namespace: ns, name: 'app', body: current }, o)))).toMatchObject({ code: 'Forbidden', verb: 'update' });
    const evName = ev.metadata!.name!;
    expect(await kubeFailure(sa.call({ verb: 'patch', resource: 'events', namespace: ns, name: evName },
      (o) => sa.core.patchNamespacedEvent({ namespace: ns, name: evName, body: { count: 2 } }, o), { contentType: PatchStrategy.MergePatch }))).toMatchObject({ code: 'Forbidden', verb: 'patch' });

    // Upgrade with repair.deletePods and the readiness gate: the two extra roles come, and with them the two calls.
    const upgrade = await helm.template(name, ns, { metricsService: { enabled: true }, repair: { deletePods: true }, nodeReadinessTaint: { enabled: true } });
    await apply(upgrade, 'All');
    await apply(upgrade);
    expect((await admin.core.readNamespacedConfigMap({ namespace: ns, name: 'istio-cni-config' })).data?.REPAIR_DELETE_PODS).toBe('true');
    const tainted = await until('patch nodes allowed after the upgrade', () => patchNode(), 15_000);
    expect(tainted.spec?.taints?.map((t) => t.key)).toEqual(['cni.podwire.io/not-ready']);
    await until('delete pods allowed after the upgrade', () => deletePod(sa, { namespace: ns, name: 'app' }, { uid: pod.metadata!.uid!, gracePeriodSeconds: 0 }).then(() => true), 15_000);
    const gone = await admin.core.readNamespacedPod({ namespace: ns, name: 'app' }).then(() => 'still there', (err: { code?: number }) => err.code);
    expect(gone).toBe(404);
  });
  it('helm install, upgrade and uninstall against the apiserver: the extra roles come and go with their values', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const name = release();
    const kubeconfig = kubeEnv().adminKubeconfig;
    const rbac = admin.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const roleExists = (role: string) => rbac.readClusterRole({ name: role }).then(() => true, (err: { code?: number }) => { if (err.code === 404) return false; throw err; });
    let installed = false;
    onTestFinished(async () => {
      if (installed) await helm.run(['uninstall', name, '--namespace', ns], { kubeconfig });
    });
    // helm validates every manifest against the server's OpenAPI schema before it creates anything.
    await helm.run(['install', name, CHART_DIR, '--namespace', ns], { kubeconfig, timeoutMs: 60_000 });
    installed = true;
    expect((await admin.apps.readNamespacedDaemonSet({ namespace: ns, name: 'istio-cni-node' })).metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('Helm');
    expect(await roleExists(`${name}-podwire-agent`)).toBe(true);
    expect(await roleExists(`${name}-podwire-agent-repair-delete`)).toBe(false);

    await helm.run(['upgrade', name, CHART_DIR, '--namespace', ns, '--reuse-values', '--set', 'repair.deletePods=true'], { kubeconfig, timeoutMs: 60_000 });
    expect(await roleExists(`${name}-podwire-agent-repair-delete`)).toBe(true);
    expect((await admin.core.readNamespacedConfigMap({ namespace: ns, name: 'istio-cni-config' })).data?.REPAIR_DELETE_PODS).toBe('true');
    await helm.run(['upgrade', name, CHART_DIR, '--namespace', ns, '--reuse-values', '--set', 'repair.deletePods=false'], { kubeconfig, timeoutMs: 60_000 });
    expect(await roleExists(`${name}-podwire-agent-repair-delete`)).toBe(false);

    // Uninstall takes the DaemonSet away (what the agent reads as "uninstall, clean up") and the cluster-scoped objects.
    await helm.run(['uninstall', name, '--namespace', ns], { kubeconfig, timeoutMs: 60_000 });
    installed = false;
    expect(await admin.apps.readNamespacedDaemonSet({ namespace: ns, name: 'istio-cni-node' }).then(() => 'still there', (err: { code?: number }) => err.code)).toBe(404);
    expect(await roleExists(`${name}-podwire-agent`)).toBe(false);
  });

  it('leaves no cluster-scoped object behind', async () => {
    const admin = adminClient();
    const prefix = `pwt-${process.pid}-chart-`;
    const objects = KubernetesObjectApi.makeApiClient(admin.kubeConfig);
    for (const kind of ['ClusterRole', 'ClusterRoleBinding', 'Node']) {
      const apiVersion = kind === 'Node' ? 'v1' : 'rbac.authorization.k8s.io/v1';
      const list = await objects.list(apiVersion, kind);
      expect(list.items.map((o) => o.metadata?.name).filter((n) => n?.startsWith(prefix)), kind).toEqual([]);
    }
    // The check itself sees such objects: the apply test made some under this prefix.
    expect(seq).toBeGreaterThan(0);
  });
});
