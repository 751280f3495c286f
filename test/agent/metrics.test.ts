// The agent's metrics: names, types and labels as §9 gives them (plus podwire's own), one registry
// per instance, and /metrics in Prometheus text format checked by a strict parser below.
import { Gauge, register as globalRegistry, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { expectGetHeadOnly, httpGet } from '../helpers/http.js';
import { MonitorServerError, startMetricsServer, type RunningServer } from '../../lib/agent/health.js';
import { createAgentMetrics, METRIC_DEFINITIONS } from '../../lib/agent/metrics.js';

// ---------------------------------------------------------------------------------------------
// A strict Prometheus text exposition format (0.0.4) parser. Throws on anything it does not
// understand: bad names, bad label syntax or escapes, bad values, samples outside their family
// or before its TYPE, duplicate HELP/TYPE/series, non-cumulative histograms, +Inf ≠ count.

type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
interface Sample { name: string; labels: Record<string, string>; value: number }
interface Family { name: string; type: MetricType; help: string | undefined; samples: Sample[] }

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set<MetricType>(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(s: string, line: number): number {
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  // prom-client 15 writes an empty event-loop histogram's mean/stddev as `Nan`; Prometheus reads
  // values with Go's strconv.ParseFloat, which takes NaN in any case, so that spelling is accepted too.
  if (s === 'NaN' || s === 'Nan') return NaN;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s)) throw new Error(`line ${line}: bad value ${JSON.stringify(s)}`);
  return Number(s);
}

function parseLabels(src: string, line: number): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;  // after '{'
  for (;;) {
    if (src[i] === '}') return { labels, rest: src.slice(i + 1) };
    const m = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(src.slice(i));
    if (!m) throw new Error(`line ${line}: bad label name at ${JSON.stringify(src.slice(i))}`);
    const name = m[0];
    i += name.length;
    if (src[i] !== '=' || src[i + 1] !== '"') throw new Error(`line ${line}: expected ="`);
    i += 2;
    let value = '';
    for (;;) {
      const c = src[i];
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`);
      if (c === '"') break;
      if (c === '\\') {
        const e = src[i + 1];
        if (e === '\\') value += '\\';
        else if (e === '"') value += '"';
        else if (e === 'n') value += '\n';
        else throw new Error(`line ${line}: bad escape \\${e ?? ''}`);
        i += 2;
      } else {
        value += c;
        i += 1;
      }
    }
    i += 1;  // closing quote
    if (Object.hasOwn(labels, name)) throw new Error(`line ${line}: duplicate label ${name}`);
    labels[name] = value;
    if (src[i] === ',') i += 1;
    else if (src[i] !== '}') throw new Error(`line ${line}: expected , or }`);
  }
}

function familyOf(sampleName: string, current: Family | undefined): Family | undefined {
  if (!current) return undefined;
  if (sampleName === current.name) return current.type === 'histogram' ? undefined : current;
  if (current.type === 'histogram' && ['_bucket', '_sum', '_count'].some((s) => sampleName === current.name + s)) return current;
  if (current.type === 'summary' && ['_sum', '_count'].some((s) => sampleName === current.name + s)) return current;
  return undefined;
}

function parsePrometheusText(text: string): Map<string, Family> {
  if (text !== '' && !text.endsWith('\n')) throw new Error('exposition must end with a newline');
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  let current: Family | undefined;
  const lines = text.split('\n');
  lines.pop();
  for (const [idx, raw] of lines.entries()) {
    const n = idx + 1;
    if (raw.trim() === '') continue;
    if (raw.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(raw);
      if (!m) continue;  // plain comment
      const [, kind, name, rest] = m as unknown as [string, 'HELP' | 'TYPE', string, string];
      if (!METRIC_NAME.test(name)) throw new Error(`line ${n}: bad metric name ${name}`);
      let fam = families.get(name);
      if (fam && fam !== current) throw new Error(`line ${n}: family ${name} is not contiguous`);
      if (!fam) {
        fam = { name, type: 'untyped', help: undefined, samples: [] };
        families.set(name, fam);
        current = fam;
      }
      if (kind === 'HELP') {
        if (fam.help !== undefined) throw new Error(`line ${n}: second HELP for ${name}`);
        fam.help = rest.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
      } else {
        if (!TYPES.has(rest as MetricType)) throw new Error(`line ${n}: bad type ${rest}`);
        if (fam.samples.length > 0) throw new Error(`line ${n}: TYPE after samples of ${name}`);
        if ((fam as { typed?: boolean }).typed) throw new Error(`line ${n}: second TYPE for ${name}`);
        (fam as { typed?: boolean }).typed = true;
        fam.type = rest as MetricType;
      }
      continue;
    }
    const nm = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(raw);
    if (!nm) throw new Error(`line ${n}: bad sample ${JSON.stringify(raw)}`);
    const name = nm[0];
    let rest = raw.slice(name.length);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, n));
    const parts = rest.split(' ');
    if (parts[0] !== '' || parts.length < 2 || parts.length > 3) throw new Error(`line ${n}: expected " value [timestamp]"`);
    const value = parseValue(parts[1] ?? '', n);
    if (parts.length === 3 && !/^-?\d+$/.test(parts[2] ?? '')) throw new Error(`line ${n}: bad timestamp`);
    const fam = familyOf(name, current);
    if (!fam) throw new Error(`line ${n}: sample ${name} outside its family (or before its TYPE)`);
    if (fam.type === 'histogram' && name.endsWith('_bucket') && labels.le === undefined) throw new Error(`line ${n}: bucket without le`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)))}`;
    if (seen.has(key)) throw new Error(`line ${n}: duplicate series ${key}`);
    seen.add(key);
    fam.samples.push({ name, labels, value });
  }
  for (const fam of families.values()) if (fam.type === 'histogram') checkHistogram(fam);
  return families;
}

function checkHistogram(fam: Family): void {
  const series = new Map<string, { buckets: [number, number][]; count?: number; sum?: number }>();
  for (const s of fam.samples) {
    const { le, ...rest } = s.labels;
    const k = JSON.stringify(Object.entries(rest).sort(([a], [b]) => (a < b ? -1 : 1)));
    const e = series.get(k) ?? { buckets: [] };
    series.set(k, e);
    if (s.name.endsWith('_bucket')) e.buckets.push([parseValue(le ?? '', 0), s.value]);
    else if (s.name.endsWith('_count')) e.count = s.value;
    else e.sum = s.value;
  }
  for (const [k, e] of series) {
    const last = e.buckets.at(-1);
    if (!last || last[0] !== Infinity) throw new Error(`${fam.name}${k}: no +Inf bucket`);
    for (let i = 1; i < e.buckets.length; i++) {
      const [prevLe, prevV] = e.buckets[i - 1]!;
      const [le, v] = e.buckets[i]!;
      if (!(le > prevLe) || v < prevV) throw new Error(`${fam.name}${k}: buckets not increasing/cumulative`);
    }
    if (e.count === undefined || e.sum === undefined) throw new Error(`${fam.name}${k}: missing _count or _sum`);
    if (e.count !== last[1]) throw new Error(`${fam.name}${k}: +Inf bucket ≠ _count`);
  }
}

/** Label names used by a family's samples (without histogram `le`). */
function labelNames(fam: Family): string[] {
  const names = new Set<string>();
  for (const s of fam.samples) for (const l of Object.keys(s.labels)) if (l !== 'le') names.add(l);
  return [...names].sort();
}

function value(fams: Map<string, Family>, sample: string, labels: Record<string, string> = {}): number | undefined {
  for (const f of fams.values()) {
    for (const s of f.samples) {
      if (s.name === sample && JSON.stringify(Object.entries(s.labels).sort()) === JSON.stringify(Object.entries(labels).sort())) return s.value;
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------

const servers: RunningServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(registry: Registry, onError?: (e: MonitorServerError) => void) {
  const s = await startMetricsServer({ port: 0, host: '127.0.0.1', registry, ...(onError ? { onError } : {}) });
  servers.push(s);
  return s;
}

const get = httpGet;

async function scrape(s: RunningServer) {
  const r = await get(s, '/metrics');
  expect(r.status).toBe(200);
  return parsePrometheusText(r.body);
}

// Written out here, not taken from METRIC_DEFINITIONS, so a renamed metric fails the test.
const EXPECTED: Record<string, { type: MetricType; labels: string[] }> = {
  istio_cni_installs_total: { type: 'counter', labels: ['result'] },
  istio_cni_install_ready: { type: 'gauge', labels: [] },
  istio_cni_repair_pods_repaired_total: { type: 'counter', labels: ['result', 'type'] },
  istio_cni_plugin_requests_total: { type: 'counter', labels: ['response_code'] },
  nodeagent_reconcile_events_total: { type: 'counter', labels: ['type'] },
  ztunnel_connected: { type: 'gauge', labels: [] },
  podwire_enroll_duration_seconds: { type: 'histogram', labels: ['backend'] },
  podwire_pods_enrolled: { type: 'gauge', labels: [] },
  podwire_drift_found_total: { type: 'counter', labels: [] },
  podwire_drift_repaired_total: { type: 'counter', labels: [] },
  podwire_informer_restarts_total: { type: 'counter', labels: ['resource'] },
  podwire_informer_relists_total: { type: 'counter', labels: ['resource'] },
  podwire_zds_acks_total: { type: 'counter', labels: ['type'] },
  podwire_zds_nacks_total: { type: 'counter', labels: ['type'] },
  podwire_install_revert_loops_total: { type: 'counter', labels: [] },
  podwire_backend_info: { type: 'gauge', labels: ['backend', 'iptables_variant'] },
  podwire_enroll_failures_total: { type: 'counter', labels: ['stage'] },
  podwire_cni_queued_dels_total: { type: 'counter', labels: [] },
};

describe('the strict text-format parser', () => {
  it('accepts well-formed input', () => {
    const f = parsePrometheusText('# HELP a_total x\\ny\n# TYPE a_total counter\na_total{k="v\\"\\\\\\n",j="2"} 3 1700000000\n\n# TYPE b gauge\nb -Inf\n');
    expect(f.get('a_total')).toMatchObject({ type: 'counter', help: 'x\ny', samples: [{ labels: { k: 'v"\\\n', j: '2' }, value: 3 }] });
    expect(f.get('b')?.samples[0]?.value).toBe(-Infinity);
  });

  it.each([
    ['no trailing newline', '# TYPE a gauge\na 1'],
    ['bad name', '# TYPE 1a gauge\n'],
    ['bad type', '# TYPE a meter\n'],
    ['bad value', '# TYPE a gauge\na one\n'],
    ['bad escape', '# TYPE a gauge\na{k="\\t"} 1\n'],
    ['unquoted label', '# TYPE a gauge\na{k=v} 1\n'],
    ['unterminated labels', '# TYPE a gauge\na{k="v" 1\n'],
    ['duplicate label', '# TYPE a gauge\na{k="1",k="2"} 1\n'],
    ['duplicate series', '# TYPE a gauge\na{k="1"} 1\na{k="1"} 2\n'],
    ['sample outside family', '# TYPE a gauge\nb 1\n'],
    ['sample before TYPE', 'a 1\n'],
    ['second TYPE', '# TYPE a gauge\n# TYPE a gauge\n'],
    ['TYPE after samples', '# HELP a h\na 1\n# TYPE a gauge\n'],
    ['family split', '# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# HELP a again\n'],
    ['two spaces', '# TYPE a gauge\na  1\n'],
    ['histogram without +Inf', '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'],
    ['histogram not cumulative', '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'],
    ['histogram +Inf != count', '# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 2\n'],
    ['bare histogram sample', '# TYPE h histogram\nh 1\n'],
  ])('rejects %s', (_, text) => {
    expect(() => parsePrometheusText(text)).toThrow();
  });
});

/** The client library's default process and Node.js series (not the agent's own). */
const isRuntimeMetric = (name: string) => name.startsWith('process_') || name.startsWith('nodejs_');

describe('agent metrics', () => {
  it('/metrics exposes exactly the expected names, types and labels, with the registry content type', async () => {
    const m = createAgentMetrics();
    const s = await serve(m.registry);
    const r = await get(s, '/metrics');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe(m.registry.contentType);
    expect(r.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    const fams = parsePrometheusText(r.body);
    expect([...fams.keys()].filter((n) => !isRuntimeMetric(n)).sort()).toEqual(Object.keys(EXPECTED).sort());
    for (const [name, want] of Object.entries(EXPECTED)) {
      const fam = fams.get(name)!;
      expect({ name, type: fam.type, labels: labelNames(fam) }).toEqual({ name, ...want });
      expect(fam.help, name).toBeTruthy();
    }
    // METRIC_DEFINITIONS (the module's own table) agrees.
    expect(Object.fromEntries(Object.entries(METRIC_DEFINITIONS).map(([k, v]) => [k, { type: v.type, labels: [...v.labels].sort() }]))).toEqual(EXPECTED);
  });

  it('starts with every known label set at 0', async () => {
    const fams = await scrape(await serve(createAgentMetrics().registry));
    const values = (n: string) => fams.get(n)!.samples.map((s) => s.labels);
    expect(values('istio_cni_installs_total').map((l) => l.result)).toEqual(['SUCCESS', 'COPY_BINARIES_FAILURE', 'CREATE_KUBECONFIG_FAILURE', 'CREATE_CNI_CONFIG_FAILURE']);
    expect(values('istio_cni_plugin_requests_total').map((l) => l.response_code)).toEqual(['200', '400', '500']);
    expect(values('nodeagent_reconcile_events_total').map((l) => l.type)).toEqual(['add', 'update', 'delete']);
    expect(values('istio_cni_repair_pods_repaired_total')).toHaveLength(9);
    expect(values('podwire_zds_acks_total').map((l) => l.type)).toEqual(['add', 'keep', 'del', 'snapshot_sent']);
    expect(values('podwire_informer_relists_total').map((l) => l.resource)).toEqual(['pods', 'namespaces']);
    expect(values('podwire_backend_info')).toEqual([
      { backend: 'iptables', iptables_variant: 'legacy' }, { backend: 'iptables', iptables_variant: 'nft' }, { backend: 'nftables', iptables_variant: 'none' },
    ]);
    expect(value(fams, 'podwire_enroll_duration_seconds_count', { backend: 'nftables' })).toBe(0);
    for (const f of fams.values()) {
      if (isRuntimeMetric(f.name)) continue;
      for (const smp of f.samples) expect(smp.value, `${smp.name}${JSON.stringify(smp.labels)}`).toBe(0);
    }
  });

  it('exposes the standard process_* series and Node\'s event-loop lag, read from this process', async () => {
    const fams = await scrape(await serve(createAgentMetrics().registry));
    const one = (n: string) => {
      const f = fams.get(n);
      expect(f, n).toBeDefined();
      return f!.samples[0]!.value;
    };
    expect(one('process_resident_memory_bytes')).toBeGreaterThan(10 * 2 ** 20);
    expect(one('process_open_fds')).toBeGreaterThan(2);
    expect(one('process_cpu_seconds_total')).toBeGreaterThan(0);
    const started = (Date.now() - performance.now()) / 1000;  // this process's start, by the monotonic clock
    expect(Math.abs(one('process_start_time_seconds') - started)).toBeLessThan(5);
    expect(fams.get('nodejs_eventloop_lag_seconds')?.type).toBe('gauge');
    expect(createAgentMetrics({ processMetrics: false }).registry.getSingleMetric('process_open_fds')).toBeUndefined();
  });

  it('counters increment, gauges set, the histogram observes', async () => {
    const m = createAgentMetrics();
    const s = await serve(m.registry);
    m.pluginRequests.inc({ response_code: '200' });
    m.pluginRequests.inc({ response_code: '200' });
    m.pluginRequests.inc({ response_code: '500' });
    m.reconcileEvents.inc({ type: 'update' });
    m.installs.inc({ result: 'SUCCESS' });
    m.podsRepaired.inc({ type: 'delete', result: 'fail' });
    m.installReady.set(1);
    m.ztunnelConnected.inc();
    m.ztunnelConnected.inc();
    m.ztunnelConnected.dec();
    m.podsEnrolled.set(20);
    m.driftFound.inc(3);
    m.driftRepaired.inc(2);
    m.informerRestarts.inc({ resource: 'pods' });
    m.informerRelists.inc({ resource: 'namespaces' });
    m.zdsAcks.inc({ type: 'add' });
    m.zdsNacks.inc({ type: 'del' });
    m.enrollDuration.observe({ backend: 'iptables' }, 0.003);
    m.enrollDuration.observe({ backend: 'iptables' }, 0.2);
    m.enrollDuration.observe({ backend: 'nftables' }, 20);

    let f = await scrape(s);
    expect(value(f, 'istio_cni_plugin_requests_total', { response_code: '200' })).toBe(2);
    expect(value(f, 'istio_cni_plugin_requests_total', { response_code: '500' })).toBe(1);
    expect(value(f, 'istio_cni_plugin_requests_total', { response_code: '400' })).toBe(0);
    expect(value(f, 'nodeagent_reconcile_events_total', { type: 'update' })).toBe(1);
    expect(value(f, 'nodeagent_reconcile_events_total', { type: 'add' })).toBe(0);
    expect(value(f, 'istio_cni_installs_total', { result: 'SUCCESS' })).toBe(1);
    expect(value(f, 'istio_cni_repair_pods_repaired_total', { type: 'delete', result: 'fail' })).toBe(1);
    expect(value(f, 'istio_cni_install_ready')).toBe(1);
    expect(value(f, 'ztunnel_connected')).toBe(1);
    expect(value(f, 'podwire_pods_enrolled')).toBe(20);
    expect(value(f, 'podwire_drift_found_total')).toBe(3);
    expect(value(f, 'podwire_drift_repaired_total')).toBe(2);
    expect(value(f, 'podwire_informer_restarts_total', { resource: 'pods' })).toBe(1);
    expect(value(f, 'podwire_informer_restarts_total', { resource: 'namespaces' })).toBe(0);
    expect(value(f, 'podwire_informer_relists_total', { resource: 'namespaces' })).toBe(1);
    expect(value(f, 'podwire_zds_acks_total', { type: 'add' })).toBe(1);
    expect(value(f, 'podwire_zds_nacks_total', { type: 'del' })).toBe(1);
    expect(value(f, 'podwire_enroll_duration_seconds_count', { backend: 'iptables' })).toBe(2);
    expect(value(f, 'podwire_enroll_duration_seconds_sum', { backend: 'iptables' })).toBeCloseTo(0.203, 9);
    expect(value(f, 'podwire_enroll_duration_seconds_bucket', { backend: 'iptables', le: '0.005' })).toBe(1);
    expect(value(f, 'podwire_enroll_duration_seconds_bucket', { backend: 'iptables', le: '0.25' })).toBe(2);
    expect(value(f, 'podwire_enroll_duration_seconds_bucket', { backend: 'nftables', le: '10' })).toBe(0);
    expect(value(f, 'podwire_enroll_duration_seconds_bucket', { backend: 'nftables', le: '+Inf' })).toBe(1);

    m.pluginRequests.inc({ response_code: '200' });
    f = await scrape(s);
    expect(value(f, 'istio_cni_plugin_requests_total', { response_code: '200' })).toBe(3);
  });

  it('each instance has its own registry; nothing goes to the global default registry', async () => {
    const before = (await globalRegistry.getMetricsAsJSON()).map((x) => x.name);
    const a = createAgentMetrics();
    const b = createAgentMetrics();  // would throw "already registered" on a shared registry
    expect(a.registry).not.toBe(b.registry);
    a.pluginRequests.inc({ response_code: '400' }, 5);
    const [sa, sb] = [await serve(a.registry), await serve(b.registry)];
    expect(value(await scrape(sa), 'istio_cni_plugin_requests_total', { response_code: '400' })).toBe(5);
    expect(value(await scrape(sb), 'istio_cni_plugin_requests_total', { response_code: '400' })).toBe(0);
    const after = (await globalRegistry.getMetricsAsJSON()).map((x) => x.name);
    expect(after).toEqual(before);
    expect(after.filter((n) => n in EXPECTED)).toEqual([]);
  });

  it('default labels go on every series', async () => {
    const m = createAgentMetrics({ defaultLabels: { node: 'node-1' } });
    const f = await scrape(await serve(m.registry));
    for (const fam of f.values()) for (const smp of fam.samples) expect(smp.labels.node, fam.name).toBe('node-1');
  });
});

describe('metrics server', () => {
  it('404 for other paths, 405 for non-GET, HEAD without body', async () => {
    const s = await serve(createAgentMetrics().registry);
    for (const p of ['/', '/metric', '/metrics/', '/healthz']) expect((await get(s, p)).status, p).toBe(404);
    await expectGetHeadOnly(s, '/metrics', 200);
    expect((await get(s, '/metrics?name[]=x')).status).toBe(200);
  });

  it('a failing collect is a 500 and a typed error to onError', async () => {
    const registry = new Registry();
    new Gauge({ name: 'broken', help: 'h', registers: [registry], collect() { throw new Error('boom'); } });
    const errors: MonitorServerError[] = [];
    const s = await serve(registry, (e) => errors.push(e));
    expect((await get(s, '/metrics')).status).toBe(500);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(MonitorServerError);
    expect(errors[0]).toMatchObject({ code: 'ERR_MONITOR_COLLECT', server: 'metrics' });
    expect((errors[0]!.cause as Error).message).toBe('boom');
  });

  it('typed errors: no registry, bad port, port in use', async () => {
    await expect(startMetricsServer({ port: 0, host: '127.0.0.1', registry: undefined as never })).rejects.toMatchObject({ code: 'ERR_MONITOR_OPTIONS', server: 'metrics' });
    await expect(startMetricsServer({ port: -1, host: '127.0.0.1', registry: new Registry() })).rejects.toMatchObject({ code: 'ERR_MONITOR_OPTIONS' });
    const s = await serve(new Registry());
    await expect(startMetricsServer({ port: s.port, host: '127.0.0.1', registry: new Registry() })).rejects.toMatchObject({ code: 'ERR_MONITOR_LISTEN', errno: 'EADDRINUSE' });
  });
});
