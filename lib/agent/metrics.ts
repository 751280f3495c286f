// The node agent's Prometheus metrics (istio-cni.md §9 plus podwire's own), on prom-client.
//
// Every call to createAgentMetrics() makes its own Registry; nothing is registered in
// prom-client's global default registry, so tests and several agents in one process don't clash.
// Istio's names are exposed exactly as upstream writes them (OTel → Prometheus without unit or
// counter suffixes, so the counters already end in `_total`), with upstream's label names.
// Label sets whose values are known are pre-initialised at 0, so a scrape shows every series from
// the start (rate() works from the first increment; upstream only shows a series once it moved).
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
// The installer's and the repair controller's outcome vocabularies are theirs (this layer only counts them).
import { INSTALL_RESULTS, type InstallResult } from '../install/results.js';
import { REPAIR_RESULTS, REPAIR_TYPES, type RepairResult, type RepairType } from '../repair/results.js';

export { INSTALL_RESULTS, REPAIR_RESULTS, REPAIR_TYPES, type InstallResult, type RepairResult, type RepairType };
/** `istio_cni_plugin_requests_total{response_code}` values (the plugin endpoint's HTTP codes). */
export const PLUGIN_RESPONSE_CODES = ['200', '400', '500'] as const;
/** `nodeagent_reconcile_events_total{type}` values (informer event kinds). */
export const RECONCILE_EVENT_TYPES = ['add', 'update', 'delete'] as const;
/** `podwire_enroll_duration_seconds{backend}` values. */
export const BACKENDS = ['iptables', 'nftables'] as const;
/** `podwire_informer_*_total{resource}` values: the agent's two informers. */
export const INFORMER_RESOURCES = ['pods', 'namespaces'] as const;
/** `podwire_zds_{acks,nacks}_total{type}` values: the ZDS request the ack answered. */
export const ZDS_REQUEST_TYPES = ['add', 'keep', 'del', 'snapshot_sent'] as const;
/** `podwire_enroll_failures_total{stage}` values: the enrollment stage that failed (lib/dataplane/errors.ts EnrollStage, plus `unknown`). */
export const ENROLL_FAILURE_STAGES = ['input', 'netns', 'rules', 'ztunnel', 'probe-set', 'unknown'] as const;

export type PluginResponseCode = (typeof PLUGIN_RESPONSE_CODES)[number];
export type ReconcileEventType = (typeof RECONCILE_EVENT_TYPES)[number];
export type Backend = (typeof BACKENDS)[number];
export type InformerResource = (typeof INFORMER_RESOURCES)[number];
export type ZdsRequestType = (typeof ZDS_REQUEST_TYPES)[number];

/** Enrollment latency buckets (seconds): enrollment is ~ms; the tail covers a slow ztunnel ack. */
export const ENROLL_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** Every metric name this module defines, with its Prometheus type and label names. */
export const METRIC_DEFINITIONS = {
  // Istio (§9)
  istio_cni_installs_total: { type: 'counter', labels: ['result'] },
  istio_cni_install_ready: { type: 'gauge', labels: [] },
  istio_cni_repair_pods_repaired_total: { type: 'counter', labels: ['type', 'result'] },
  istio_cni_plugin_requests_total: { type: 'counter', labels: ['response_code'] },
  nodeagent_reconcile_events_total: { type: 'counter', labels: ['type'] },
  ztunnel_connected: { type: 'gauge', labels: [] },
  // podwire's own
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
} as const satisfies Record<string, { type: 'counter' | 'gauge' | 'histogram'; labels: readonly string[] }>;

export type MetricName = keyof typeof METRIC_DEFINITIONS;

export interface AgentMetrics {
  /** This instance's registry; serve it with startMetricsServer (health.ts). */
  readonly registry: Registry;
  /** `istio_cni_installs_total{result}`: installer runs by outcome. */
  readonly installs: Counter<'result'>;
  /** `istio_cni_install_ready`: 1 while the CNI config entry is valid and watched, else 0. */
  readonly installReady: Gauge;
  /** `istio_cni_repair_pods_repaired_total{type,result}`: repair controller actions. */
  readonly podsRepaired: Counter<'type' | 'result'>;
  /** `istio_cni_plugin_requests_total{response_code}`: plugin endpoint requests by HTTP code. */
  readonly pluginRequests: Counter<'response_code'>;
  /** `nodeagent_reconcile_events_total{type}`: informer events handled. */
  readonly reconcileEvents: Counter<'type'>;
  /** `ztunnel_connected`: live ZDS connections. */
  readonly ztunnelConnected: Gauge;
  /** `podwire_enroll_duration_seconds{backend}`: one enrollment, rules → ZDS ack → probe set. */
  readonly enrollDuration: Histogram<'backend'>;
  /** `podwire_pods_enrolled`: pods currently enrolled on this node. */
  readonly podsEnrolled: Gauge;
  /** `podwire_drift_found_total`: enrolled pods whose rules the drift check found changed. */
  readonly driftFound: Counter;
  /** `podwire_drift_repaired_total`: of those, pods whose rules were re-applied. */
  readonly driftRepaired: Counter;
  /** `podwire_informer_restarts_total{resource}`: watch restarts (errors, backoff). */
  readonly informerRestarts: Counter<'resource'>;
  /** `podwire_informer_relists_total{resource}`: full relists (410 Gone, start). */
  readonly informerRelists: Counter<'resource'>;
  /** `podwire_zds_acks_total{type}`: ztunnel acks with an empty error. */
  readonly zdsAcks: Counter<'type'>;
  /** `podwire_zds_nacks_total{type}`: ztunnel acks with a non-empty error. */
  readonly zdsNacks: Counter<'type'>;
  /** `podwire_install_revert_loops_total`: times something kept removing the plugin's config entry (>5 reinstalls in a row). */
  readonly installRevertLoops: Counter;
  /** `podwire_backend_info{backend,iptables_variant}`: 1 for the backend chosen at start (variant `legacy`/`nft`, `none` with nftables), the others 0. */
  readonly backendInfo: Gauge<'backend' | 'iptables_variant'>;
  /** `podwire_enroll_failures_total{stage}`: enrollments that failed (aborted ones, cancelled by their caller, are not counted). */
  readonly enrollFailures: Counter<'stage'>;
  /** `podwire_cni_queued_dels_total`: DELs the plugin queued while no agent answered (its fallback), found at start. */
  readonly queuedDels: Counter;
  /** Values read at every scrape; a later call replaces earlier sources. */
  bind(sources: MetricSources): void;
}

/** Live values read at scrape time (the agent binds them once its parts exist). */
export interface MetricSources {
  /** `podwire_pods_enrolled`. */
  podsEnrolled?: () => number;
  /** `ztunnel_connected`. */
  ztunnelConnected?: () => number;
  /** Cumulative informer counts, by resource (`podwire_informer_{restarts,relists}_total`). */
  informers?: () => Partial<Record<InformerResource, { restarts: number; relists: number }>>;
}

export interface AgentMetricsOptions {
  /** Labels added to every series (e.g. `{ node: 'node-1' }`). None by default, as upstream. */
  defaultLabels?: Record<string, string>;
  /** The client library's default process and Node.js metrics (default true). */
  processMetrics?: boolean;
}

export function createAgentMetrics(opts: AgentMetricsOptions = {}): AgentMetrics {
  const registry = new Registry();
  if (opts.defaultLabels) registry.setDefaultLabels(opts.defaultLabels);
  const registers = [registry];

  const counter = <L extends string>(name: MetricName, help: string, labelNames: readonly L[]) =>
    new Counter<L>({ name, help, labelNames, registers });
  const gauge = (name: MetricName, help: string, collect?: () => number | undefined) => new Gauge({
    name, help, registers,
    ...(collect ? { collect(this: Gauge) { const v = collect(); if (v !== undefined) this.set(v); } } : {}),
  });
  let sources: MetricSources = {};
  // Counters only go up: the informers' cumulative counts are added as the delta since the last scrape.
  const seen = new Map<string, number>();
  const informerCount = (kind: 'restarts' | 'relists') => function (this: Counter<'resource'>) {
    const all = sources.informers?.() ?? {};
    for (const resource of INFORMER_RESOURCES) {
      const now = all[resource]?.[kind];
      if (now === undefined) continue;
      const key = `${kind}/${resource}`;
      const delta = now - (seen.get(key) ?? 0);
      if (delta > 0) this.inc({ resource }, delta);
      seen.set(key, Math.max(now, seen.get(key) ?? 0));
    }
  };

  const m: AgentMetrics = {
    registry,
    installs: counter('istio_cni_installs_total', 'Total number of CNI plugins installed by the Istio CNI installer', ['result']),
    installReady: gauge('istio_cni_install_ready', 'Whether the CNI plugin installation is ready or not'),
    podsRepaired: counter('istio_cni_repair_pods_repaired_total', 'Total number of pods repaired by repair controller', ['type', 'result']),
    pluginRequests: counter('istio_cni_plugin_requests_total', 'Total number of CNI plugin requests', ['response_code']),
    reconcileEvents: counter('nodeagent_reconcile_events_total', 'The total number of node agent reconcile events', ['type']),
    ztunnelConnected: gauge('ztunnel_connected', 'number of connections to ztunnel', () => sources.ztunnelConnected?.()),
    enrollDuration: new Histogram({
      name: 'podwire_enroll_duration_seconds',
      help: 'Time to enroll one pod (in-pod rules, ZDS add and ack, probe set), by redirect backend',
      labelNames: ['backend'],
      buckets: [...ENROLL_DURATION_BUCKETS],
      registers,
    }),
    podsEnrolled: gauge('podwire_pods_enrolled', 'Pods currently enrolled in ambient mode on this node', () => sources.podsEnrolled?.()),
    driftFound: counter('podwire_drift_found_total', 'Enrolled pods the drift check found drifted (in-pod rules, probe set or ztunnel)', []),
    driftRepaired: counter('podwire_drift_repaired_total', 'Of those, pods where everything that drifted was put right', []),
    informerRestarts: new Counter({ name: 'podwire_informer_restarts_total', help: 'Informer watch restarts, by resource', labelNames: ['resource'], registers, collect: informerCount('restarts') }),
    informerRelists: new Counter({ name: 'podwire_informer_relists_total', help: 'Informer full relists (410 Gone), by resource', labelNames: ['resource'], registers, collect: informerCount('relists') }),
    zdsAcks: counter('podwire_zds_acks_total', 'ZDS requests acknowledged by ztunnel, by request type', ['type']),
    zdsNacks: counter('podwire_zds_nacks_total', 'ZDS requests refused by ztunnel (ack with an error), by request type', ['type']),
    installRevertLoops: counter('podwire_install_revert_loops_total', 'Times another component kept reverting the CNI installation (more than 5 reinstalls in a row)', []),
    backendInfo: new Gauge({ name: 'podwire_backend_info', help: 'The redirection backend chosen at start (1), and its iptables variant', labelNames: ['backend', 'iptables_variant'], registers }),
    enrollFailures: counter('podwire_enroll_failures_total', 'Pod enrollments that failed, by the stage that failed', ['stage']),
    queuedDels: counter('podwire_cni_queued_dels_total', 'CNI DELs the plugin queued on the node while no agent answered, applied at the next start', []),
    bind(s: MetricSources) {
      sources = s;
    },
  };

  for (const result of INSTALL_RESULTS) m.installs.inc({ result }, 0);
  for (const type of REPAIR_TYPES) for (const result of REPAIR_RESULTS) m.podsRepaired.inc({ type, result }, 0);
  for (const code of PLUGIN_RESPONSE_CODES) m.pluginRequests.inc({ response_code: code }, 0);
  for (const type of RECONCILE_EVENT_TYPES) m.reconcileEvents.inc({ type }, 0);
  for (const backend of BACKENDS) m.enrollDuration.zero({ backend });
  for (const resource of INFORMER_RESOURCES) {
    m.informerRestarts.inc({ resource }, 0);
    m.informerRelists.inc({ resource }, 0);
  }
  for (const type of ZDS_REQUEST_TYPES) {
    m.zdsAcks.inc({ type }, 0);
    m.zdsNacks.inc({ type }, 0);
  }
  for (const [backend, variant] of [['iptables', 'legacy'], ['iptables', 'nft'], ['nftables', 'none']] as const) m.backendInfo.set({ backend, iptables_variant: variant }, 0);
  for (const stage of ENROLL_FAILURE_STAGES) m.enrollFailures.inc({ stage }, 0);
  m.queuedDels.inc(0);
  m.installReady.set(0);
  m.ztunnelConnected.set(0);
  m.podsEnrolled.set(0);
  // The standard process_* series dashboards expect of every exporter (upstream's Go client has
  // them), plus Node's own: event-loop lag, heap, GC. Read at scrape time into this registry only.
  if (opts.processMetrics !== false) collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 20 });
  return m;
}
