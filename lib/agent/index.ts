// The node agent's public surface: the package entry `podwire/agent` (not
// re-exported from lib/index.ts, which must not load client-node).
export { Agent, AgentStartError } from './agent.js';
export type { AgentOptions, StopOptions, StopResult } from './agent.js';
export { parseAgentConfig, describeSettings, selectionPolicy, ConfigError, SETTINGS } from './config.js';
export type { AgentConfig, Env, SettingDescription, LogLevel } from './config.js';
export { createLogging, podFields, LOG_SCOPES } from '../util/log.js';
export type { Logger, Logging, LoggingOptions, LogSink, LogFields, LogScope } from '../util/log.js';
export { createAgentMetrics, METRIC_DEFINITIONS } from './metrics.js';
export type { AgentMetrics, MetricSources, MetricName } from './metrics.js';
export { startHealthServer, startMetricsServer, Readiness, READINESS_CONDITIONS } from './health.js';
export { DriftCheck } from './drift-check.js';
export type { DriftCheckOptions, DriftRound } from './drift-check.js';
export { decideCleanup } from './safe-upgrade.js';
export type { CleanupDecision, SafeUpgradeOptions } from './safe-upgrade.js';
export { selectBackend } from './backend-select.js';
export type { BackendSelection, SelectBackendOptions } from './backend-select.js';
export { activeAmbientPods, restoreSnapshot } from './snapshot.js';
export { cniAddHandler, CniAddError, hostPath } from '../cni/cmdadd.js';
export { lookupPod } from '../cni/pod-lookup.js';
