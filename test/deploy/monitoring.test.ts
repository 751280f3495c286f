// The chart's optional monitoring objects against what a real agent serves: the Grafana
// dashboard (files/grafana-dashboard.json, shipped in a ConfigMap) and the PrometheusRule, as
// real helm renders them; every metric either queries is one a real agent's /metrics carries
// (the agent in-process against the real control plane, real netns and nftables, with a pod
// enrolled so the histograms have samples), parsed by the independent Prometheus text parser.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Agent } from '../../lib/agent/agent.js';
import { createLogging } from '../../lib/util/log.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { Helm, type Rendered } from '../helpers/helm.js';
import { httpGet } from '../helpers/http.js';
import { agentClient, adminClient, describeKube, freshNamespace, removeNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';
import { parsePrometheusText } from '../helpers/prometheus.js';

type Obj = Record<string, any>;
let helm: Helm;
beforeAll(async () => { helm = await Helm.open(); }, 600_000);
afterAll(() => helm?.close());
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

const PROMQL_WORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset', 'inf', 'nan']);

/** The metric names a PromQL expression reads (not its functions, label names, keywords or numbers). */
function metricsOf(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')          // string literals (label values)
    .replace(/\{[^}]*\}/g, '')                     // label matchers
    .replace(/\[[^\]]*\]/g, '')                    // range selectors
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');  // grouping labels
  const out = new Set<string>();
  for (const m of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const after = stripped.slice(m.index! + m[0].length).trimStart();
    if (after.startsWith('(') || PROMQL_WORDS.has(m[0].toLowerCase())) continue;
    out.add(m[0]);
  }
  return [...out];
}

async function monitoringObjects(): Promise<{ dashboard: Obj; rule: Obj; rendered: Rendered }> {
  const rendered = await helm.template('podwire', 'istio-system', { grafanaDashboard: { enabled: true }, prometheusRule: { enabled: true, labels: { release: 'prom' } } });
  const cm = rendered.objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'podwire-dashboard');
  const rule = rendered.objects.find((o) => o.kind === 'PrometheusRule');
  expect(cm?.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
  expect(rule?.metadata.labels).toMatchObject({ release: 'prom' });
  return { dashboard: JSON.parse(cm!.data['podwire-agent.json']), rule: rule!, rendered };
}

function dashboardQueries(d: Obj): string[] {
  const panels: Obj[] = d.panels ?? [];
  const exprs = panels.flatMap((p) => (p.targets ?? []).map((t: Obj) => t.expr as string));
  for (const v of d.templating?.list ?? []) {
    const m = /^label_values\((\w+),\s*\w+\)$/.exec(v.query ?? '');
    if (m) exprs.push(m[1]!);
  }
  return exprs;
}

describe('the chart\'s monitoring objects', () => {
  it('are off by default; on, a dashboard ConfigMap and a PrometheusRule with the five alert families', async () => {
    const off = await helm.template('podwire', 'istio-system');
    expect(off.objects.some((o) => o.kind === 'PrometheusRule' || o.metadata.name === 'podwire-dashboard')).toBe(false);
    const { dashboard, rule } = await monitoringObjects();
    expect(dashboard).toMatchObject({ uid: 'podwire-agent', title: expect.any(String) });
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(10);
    const ids = dashboard.panels.map((p: Obj) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const alerts = rule.spec.groups.flatMap((g: Obj) => g.rules.map((r: Obj) => r.alert));
    expect(alerts).toEqual(expect.arrayContaining(['PodwireEnrollmentFailures', 'PodwireDriftFound', 'PodwireInstallNotReady', 'PodwireZtunnelDisconnected', 'PodwirePluginFallbacks']));
    for (const r of rule.spec.groups.flatMap((g: Obj) => g.rules)) {
      expect(r.annotations.summary, r.alert).toContain('{{ $labels.instance }}');  // Prometheus templating survives helm's
      expect(metricsOf(r.expr).length, r.alert).toBeGreaterThan(0);
    }
    // The extraction itself: functions, labels, keywords and ranges are not metrics.
    expect(metricsOf('histogram_quantile(0.99, sum by (le, instance) (rate(a_bucket{x="y"}[5m]))) > 0 or b == 0').sort()).toEqual(['a_bucket', 'b']);
  });
});

describeKube('every metric the dashboard and the alerts query is in a real agent\'s /metrics', () => {
  it.skipIf(!privileged('nft'))('dashboard panels, its variable and every alert expression', async () => {
    const { dashboard, rule } = await monitoringObjects();
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    const admin = adminClient();
    const ns = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
    cleanups.push(() => removeNamespace(admin, ns));
    const config = await node.config();
    const agent = new Agent({ config, client: agentClient(), hostRuleRetryMs: 100, logging: createLogging({ levels: { default: 'error' }, json: true, sink: { write: () => undefined } }) });
    cleanups.push(() => agent.stop({ cleanup: true }));
    const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 200 });
    cleanups.push(() => peer.stop());
    const pod = await node.addPod(ns, 'app');
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('pod enrolled', () => agent.node!.dataplane.cache.get(pod.uid)?.netns, 20_000);
    // The cache holds the pod before the enrollment (and its timer) completes: wait for the histogram too.
    await until('enrollment timed', async () => (await agent.metrics.registry.getSingleMetricAsString('podwire_enroll_duration_seconds')).includes('podwire_enroll_duration_seconds_count{backend="nftables"} 1'), 20_000);
    const res = await httpGet({ host: '127.0.0.1', port: config.monitoringPort }, '/metrics');
    expect(res.status).toBe(200);
    const served = parsePrometheusText(res.body);
    const queries = [...dashboardQueries(dashboard), ...rule.spec.groups.flatMap((g: Obj) => g.rules.map((r: Obj) => r.expr as string))];
    const wanted = [...new Set(queries.flatMap(metricsOf))].sort();
    expect(wanted.length).toBeGreaterThanOrEqual(15);
    expect(wanted.filter((m) => !served.has(m))).toEqual([]);
    // And they carry samples where the queries expect them (the label the dashboard groups by is there).
    expect(served.get('podwire_enroll_duration_seconds_bucket')!.some((s) => s.labels.backend === 'nftables' && s.value > 0)).toBe(true);
    expect(served.get('podwire_enroll_failures_total')!.map((s) => s.labels.stage).sort()).toEqual(['input', 'netns', 'probe-set', 'rules', 'unknown', 'ztunnel']);
  }, 120_000);
});
