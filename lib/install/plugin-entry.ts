// The plugin entry the installer writes (spec §3.2): Istio's plugin Config struct marshalled
// by Go, so for the same settings the text is byte-identical to Istio's — fields in struct
// order, 2-space indent, trailing newline. podwire's own fields (docs/cni-protocol.md) come
// last and only when set, so a default podwire entry is exactly Istio's.
import type { EnablementSelector } from '../mesh/enablement.js';
import type { LabelSelector } from '../mesh/label-selector.js';
import { marshalIndent, Ordered } from './go-json.js';

/** The plugin's `name` in the entry (Istio's, always). */
export const PLUGIN_NAME = 'istio-cni';
/** The `cniVersion` of the standalone entry and of a list made from a single `.conf`. */
export const ENTRY_CNI_VERSION = '0.3.1';

export interface PluginEntrySettings {
  /** `type`: the plugin binary's file name in the CNI bin dir (Istio's `istio-cni` by default). */
  type: string;
  /** `plugin_log_level`: the agent's level of scope `cni-plugin`. */
  pluginLogLevel: string;
  cniAgentRunDir: string;
  ambientEnabled: boolean;
  enablementSelectors: readonly EnablementSelector[];
  /** Written as `null` when empty (Istio's nil slice). */
  excludeNamespaces: readonly string[];
  podNamespace: string;
  nativeNftables: boolean;
  enableAmbientDetectionRetry: boolean;
  /** podwire: `agent_wait_ms`, written only when set. */
  agentWaitMs?: number | undefined;
  /** podwire: `agent_timeout_ms`, written only when set. */
  agentTimeoutMs?: number | undefined;
  /** podwire: `status_always_ok`, written only when set. */
  statusAlwaysOk?: boolean | undefined;
}

/** The entry as Istio writes a standalone file (and hands to the chained merge). */
export function renderPluginEntry(s: PluginEntrySettings): string {
  const fields: [string, unknown][] = [
    ['cniVersion', ENTRY_CNI_VERSION],
    ['name', PLUGIN_NAME],
    ['type', s.type],
    // types.NetConf's IPAM and DNS are structs: omitempty does not drop them.
    ['ipam', new Ordered([])],
    ['dns', new Ordered([])],
    ['plugin_log_level', s.pluginLogLevel],
    ['cni_agent_run_dir', s.cniAgentRunDir],
    ['ambient_enabled', s.ambientEnabled],
    ['enablement_selectors', s.enablementSelectors.map(enablementSelector)],
    ['exclude_namespaces', s.excludeNamespaces.length === 0 ? null : [...s.excludeNamespaces]],
    ['pod_namespace', s.podNamespace],
    ['native_nftables', s.nativeNftables],
    ['enable_ambient_detection_retry', s.enableAmbientDetectionRetry],
  ];
  if (s.agentWaitMs !== undefined) fields.push(['agent_wait_ms', s.agentWaitMs]);
  if (s.agentTimeoutMs !== undefined) fields.push(['agent_timeout_ms', s.agentTimeoutMs]);
  if (s.statusAlwaysOk !== undefined) fields.push(['status_always_ok', s.statusAlwaysOk]);
  return `${marshalIndent(new Ordered(fields))}\n`;
}

// util.EnablementSelector: two metav1.LabelSelector values (not pointers, no omitempty), so both
// keys are always written, `{}` when empty.
function enablementSelector(e: EnablementSelector): Ordered {
  return new Ordered([
    ['podSelector', labelSelector(e.podSelector)],
    ['namespaceSelector', labelSelector(e.namespaceSelector)],
  ]);
}

// metav1.LabelSelector: matchLabels (a map: sorted keys) and matchExpressions, both omitempty;
// a requirement is {key, operator, values (omitempty)}.
function labelSelector(s: LabelSelector | null | undefined): Ordered {
  const fields: [string, unknown][] = [];
  const labels = s?.matchLabels;
  if (labels && Object.keys(labels).length > 0) fields.push(['matchLabels', { ...labels }]);
  const exprs = s?.matchExpressions;
  if (exprs && exprs.length > 0) {
    fields.push(['matchExpressions', exprs.map((r) => {
      const req: [string, unknown][] = [['key', r.key ?? ''], ['operator', r.operator ?? '']];
      if (r.values && r.values.length > 0) req.push(['values', [...r.values]]);
      return new Ordered(req);
    })]);
  }
  return new Ordered(fields);
}
