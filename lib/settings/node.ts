// The node agent's settings table and its configuration, read the way Istio's install-cni reads
// it (spec §8.1) with the framework in ./framework.ts: a flag given on the command line wins,
// else the environment variable, else the default; a bad value fails at start with a ConfigError
// naming the setting and the value. It lives below lib/agent because the installer and the
// repair controller read some of the same settings (agentSetting) and accept these flags on the
// shared command line.
//
// Flags: Istio's spelling where Istio registers one (`--ztunnel-uds-address`,
// `--cni-agent-run-dir`, `--monitoring-port`, `--ambient-enabled`, `--log_output_level`,
// `--log_as_json`); for env-only settings the env name lower-cased with `_` → `-`
// (`AMBIENT_IPV6` → `--ambient-ipv6`), which is the mapping viper applies between the two.
import { isIPv4, isIPv6 } from 'node:net';
import { loadYaml } from '../util/yaml.js';
import { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS, type CompiledEnablementSelectors, type EnablementSelector } from '../mesh/enablement.js';
import type { SelectionPolicy } from '../mesh/decision.js';
import type { LogLevel } from '../util/log.js';
import { formatDuration, parseGoDuration } from './duration.js';
import {
  absPath, Bad, bool, ConfigError, DNS1123_SUBDOMAIN, describeTable, goDuration, namespaceList, namespaceName, objectName, oneOf, optional, port, readSettings,
  type Env, type ReadSettingsOptions, type SettingDescription, type SettingSpec,
} from './framework.js';

export { ConfigError, type Env, type ReadSettingsOptions, type SettingDescription, type SettingSpec } from './framework.js';
export type { LogLevel } from '../util/log.js';
export type IptablesBinary = '' | 'legacy' | 'nft';

export interface AgentConfig {
  /** NODE_NAME: this node; the Pod informer is field-selected on it. Required. */
  nodeName: string;
  podName: string;
  podNamespace: string;
  systemNamespace: string;
  revision: string;
  ambientEnabled: boolean;
  /** AMBIENT_ENABLEMENT_SELECTOR as given (or the chart default) and compiled. */
  enablementSelectors: readonly EnablementSelector[];
  selectors: CompiledEnablementSelectors;
  excludeNamespaces: readonly string[];
  dnsCapture: boolean;
  ipv6: boolean;
  reconcilePodRulesOnStartup: boolean;
  disableSafeUpgrade: boolean;
  hostProbeSnatIp: string;
  hostProbeSnatIpv6: string;
  ztunnelUdsAddress: string;
  cniAgentRunDir: string;
  nativeNftables: boolean;
  forceIptablesBinary: IptablesBinary;
  useScopedXtablesLocking: boolean;
  enableAwsBranchEniProbe: boolean;
  allowSwitchToHostNs: boolean;
  monitoringPort: number;
  /** --log_output_level as scope → level; `default` is the level of unnamed scopes. */
  logOutputLevel: Readonly<Record<string, LogLevel>>;
  logAsJson: boolean;
  /** podwire: period of the drift check over enrolled pods, ms; 0 = off. */
  driftCheckIntervalMs: number;
  /** podwire: where the host's /proc is mounted (netns discovery, host netns identity). */
  hostProcRoot: string;
  /** podwire: KUBELET_UID, the UID the nftables host probe rule matches; null = the kubelet process's, looked up under hostProcRoot. */
  kubeletUid: number | null;
  /** podwire: where the host's filesystem is mounted; a CNI netns path P is opened as <it>/P ('/' = as given). */
  hostMountsRoot: string;
  /** podwire: port of /healthz and /readyz (upstream: always 8000). */
  healthPort: number;
  /** podwire: address the health and metrics servers bind ('' = every address, as upstream). */
  listenAddress: string;
  /** podwire: keep a NoSchedule taint on this node while the agent is not ready. */
  nodeReadinessTaint: boolean;
  /** podwire: that taint's key. */
  nodeReadinessTaintKey: string;
}

type Key = Exclude<keyof AgentConfig, 'selectors'>;

type Setting = SettingSpec<Key>;

// sun_path is 108 bytes with the terminating NUL: a longer path cannot be bound at all.
const SUN_PATH_MAX = 107;
function socketPath(raw: string, what = 'the socket path'): string {
  const p = absPath(raw);
  if (Buffer.byteLength(p) > SUN_PATH_MAX) throw new Bad(`${what} is longer than ${SUN_PATH_MAX} bytes (unix socket limit)`);
  return p;
}

function runDir(raw: string): string {
  const dir = absPath(raw);
  socketPath(`${dir}/pluginevent.sock`, `${dir === '/' ? '' : dir}/pluginevent.sock`);
  return dir;
}

function ip4(raw: string): string {
  if (!isIPv4(raw)) throw new Bad('is not an IPv4 address');
  return raw;
}

function ip6(raw: string): string {
  if (!isIPv6(raw)) throw new Bad('is not an IPv6 address');
  return raw;
}

// A qualified name (an optional DNS-subdomain prefix and `/`, then a name of ≤ 63 characters), as taint keys are.
function taintKey(raw: string): string {
  const slash = raw.lastIndexOf('/');
  const prefix = slash < 0 ? '' : raw.slice(0, slash);
  const name = slash < 0 ? raw : raw.slice(slash + 1);
  if (prefix !== '' && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) throw new Bad('has a prefix that is not a DNS subdomain');
  if (name.length === 0 || name.length > 63 || !/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(name)) throw new Bad('is not a taint key (qualified name)');
  return raw;
}

function ipAny(raw: string): string {
  if (!isIPv4(raw) && !isIPv6(raw)) throw new Bad('is not an IP address');
  return raw;
}

export function selectors(raw: string): EnablementSelector[] {
  // Empty and YAML null decode to a nil list upstream: no selector, nothing selected.
  if (['', 'null', 'Null', 'NULL', '~'].includes(raw.trim())) return [];
  let doc: unknown;
  try {
    doc = loadYaml(raw);
  } catch (err) {
    // loadYaml refuses documents that load as a falsy scalar (`null`, `false`, `0`).
    const reason = err instanceof Error ? err.message.split('\n')[0] : String(err);
    throw new Bad(`is not a YAML list of {podSelector, namespaceSelector}: ${reason}`);
  }
  if (!Array.isArray(doc)) throw new Bad('must be a YAML (or JSON) list of {podSelector, namespaceSelector}');
  try {
    COMPILED.set(doc, compileEnablementSelectors(doc));
  } catch (err) {
    throw new Bad(err instanceof Error ? err.message : String(err));
  }
  return doc as EnablementSelector[];
}

/** What selectors() compiled while validating, so parseAgentConfig does not compile it again. */
const COMPILED = new WeakMap<object, CompiledEnablementSelectors>();

const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'fatal', 'none'] as const;
// Istio's --log_output_level: `level` or `scope:level`, comma-separated; a bare level sets `default`.
export function logOutputLevel(raw: string): Record<string, LogLevel> {
  const out: Record<string, LogLevel> = {};
  for (const item of raw.split(',')) {
    const part = item.trim();
    if (part === '') continue;
    const colon = part.lastIndexOf(':');
    const scope = colon < 0 ? 'default' : part.slice(0, colon);
    const level = colon < 0 ? part : part.slice(colon + 1);
    if (scope === '') throw new Bad(`${JSON.stringify(part)} has an empty scope`);
    if (!(LOG_LEVELS as readonly string[]).includes(level)) throw new Bad(`${JSON.stringify(part)}: level must be one of ${LOG_LEVELS.join(', ')}`);
    out[scope] = level as LogLevel;
  }
  return out;
}

// A uid_t other than (uid_t)-1; empty = look the kubelet up.
function kubeletUid(raw: string): number | null {
  if (raw === '') return null;
  if (!/^(0|[1-9][0-9]{0,9})$/.test(raw) || Number(raw) > 0xfffffffe) throw new Bad('is not a UID (0–4294967294)');
  return Number(raw);
}

const MIN_DRIFT_INTERVAL_MS = 1000;
function driftInterval(raw: string): number {
  const ms = goDuration(raw);
  if (ms < 0) throw new Bad('must not be negative (0 turns the drift check off)');
  if (ms !== 0 && ms < MIN_DRIFT_INTERVAL_MS) throw new Bad('must be 0 (off) or at least 1s');
  return ms;
}

/**
 * Every setting, in help order. Defaults: Istio's registered default for settings with a flag;
 * for Istio's env-only settings (no registered default, viper's zero value) the value the
 * istio-cni chart sets, which is what every Istio install runs with (`upstreamDefault` shows
 * the binary's zero value where it differs).
 */
export const SETTINGS: readonly Setting[] = [
  { key: 'nodeName', env: 'NODE_NAME', flag: '--node-name', default: '', description: 'this node\'s name (required): the Pod informer watches spec.nodeName=<it>', parse: objectName },
  { key: 'podName', env: 'POD_NAME', flag: '--pod-name', default: '', description: 'the agent\'s own pod name (from the downward API)', parse: optional(objectName) },
  { key: 'podNamespace', env: 'POD_NAMESPACE', flag: '--pod-namespace', default: '', description: 'the agent\'s own namespace; its istio-cni-node-* pods are never enrolled', parse: optional(namespaceName) },
  { key: 'systemNamespace', env: 'SYSTEM_NAMESPACE', flag: '--system-namespace', default: 'istio-system', description: 'Istio\'s namespace: pods labelled app=ztunnel there are ztunnel and never enrolled', parse: namespaceName },
  { key: 'revision', env: 'REVISION', flag: '--revision', default: '', description: 'Istio control-plane revision this agent belongs to', parse: (r) => r },
  { key: 'ambientEnabled', env: 'AMBIENT_ENABLED', flag: '--ambient-enabled', default: 'false', boolean: true, description: 'run the ambient node agent (informers, ZDS server, host probe rules)', parse: bool },
  {
    key: 'enablementSelectors', env: 'AMBIENT_ENABLEMENT_SELECTOR', flag: '--ambient-enablement-selector', emptyIsValue: true,
    default: JSON.stringify(DEFAULT_ENABLEMENT_SELECTORS), upstreamDefault: '(empty: selects nothing)',
    displayDefault: 'pods labelled istio.io/dataplane-mode=ambient, and pods of namespaces so labelled unless the pod is labelled istio.io/dataplane-mode=none',
    description: 'YAML/JSON list of {podSelector, namespaceSelector} label selectors choosing ambient pods; "[]" selects none',
    parse: selectors,
  },
  { key: 'excludeNamespaces', env: 'EXCLUDE_NAMESPACES', flag: '--exclude-namespaces', emptyIsValue: true, default: 'kube-system', upstreamDefault: '', description: 'comma-separated namespaces never enrolled (exact names)', parse: namespaceList },
  { key: 'dnsCapture', env: 'AMBIENT_DNS_CAPTURE', flag: '--ambient-dns-capture', default: 'true', upstreamDefault: 'false', boolean: true, description: 'redirect pod DNS (UDP/TCP 53) to ztunnel\'s 15053; per pod: ambient.istio.io/dns-capture', parse: bool },
  { key: 'ipv6', env: 'AMBIENT_IPV6', flag: '--ambient-ipv6', default: 'true', upstreamDefault: 'false', boolean: true, description: 'also program IPv6 rules in pods and on the host', parse: bool },
  { key: 'reconcilePodRulesOnStartup', env: 'AMBIENT_RECONCILE_POD_RULES_ON_STARTUP', flag: '--ambient-reconcile-pod-rules-on-startup', default: 'true', upstreamDefault: 'false', boolean: true, description: 're-apply in-pod rules of every enrolled pod at start (repairs drift and old-version rules)', parse: bool },
  { key: 'disableSafeUpgrade', env: 'AMBIENT_DISABLE_SAFE_UPGRADE', flag: '--ambient-disable-safe-upgrade', default: 'false', boolean: true, description: 'always clean up on shutdown, even when the DaemonSet is only being upgraded', parse: bool },
  { key: 'hostProbeSnatIp', env: 'HOST_PROBE_SNAT_IP', flag: '--host-probe-snat-ip', default: '169.254.7.127', description: 'IPv4 source address kubelet probes are SNATed to, so pods let them bypass ztunnel', parse: ip4 },
  { key: 'hostProbeSnatIpv6', env: 'HOST_PROBE_SNAT_IPV6', flag: '--host-probe-snat-ipv6', default: 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff', description: 'IPv6 source address kubelet probes are SNATed to', parse: ip6 },
  { key: 'ztunnelUdsAddress', env: 'ZTUNNEL_UDS_ADDRESS', flag: '--ztunnel-uds-address', default: '/var/run/ztunnel/ztunnel.sock', description: 'unix socket the agent serves ZDS on for ztunnel', parse: (r) => socketPath(r) },
  { key: 'cniAgentRunDir', env: 'CNI_AGENT_RUN_DIR', flag: '--cni-agent-run-dir', default: '/var/run/istio-cni', description: 'directory of the plugin sockets (pluginevent.sock, log.sock) and the plugin kubeconfig', parse: runDir },
  { key: 'nativeNftables', env: 'NATIVE_NFTABLES', flag: '--native-nftables', default: 'false', boolean: true, description: 'program rules with nftables instead of iptables', parse: bool },
  { key: 'forceIptablesBinary', env: 'FORCE_IPTABLES_BINARY', flag: '--force-iptables-binary', default: '', description: 'iptables variant to use instead of detecting it: legacy or nft (empty: legacy when the host netns already holds legacy rules, else nft); either way the choice is kept in <run dir>/iptables-backend.json, which a start without it reuses; ignored with nftables', parse: oneOf(['', 'legacy', 'nft'] as const) },
  { key: 'useScopedXtablesLocking', env: 'AMBIENT_USE_SCOPED_XTABLES_LOCKING', flag: '--ambient-use-scoped-xtables-locking', default: 'true', boolean: true, description: 'take a per-pod xtables lock instead of the host\'s /run/xtables.lock for in-pod rules', parse: bool },
  { key: 'enableAwsBranchEniProbe', env: 'AMBIENT_ENABLE_AWS_BRANCH_ENI_PROBE', flag: '--ambient-enable-aws-branch-eni-probe', default: 'true', boolean: true, description: 'add the probe routing rules AWS VPC-CNI branch-ENI pods need', parse: bool },
  { key: 'allowSwitchToHostNs', env: 'ALLOW_SWITCH_TO_HOST_NS', flag: '--allow-switch-to-host-ns', default: 'false', boolean: true, description: 'the agent is not in the host netns: host work enters <proc root>/1/ns/net', parse: bool },
  { key: 'monitoringPort', env: 'MONITORING_PORT', flag: '--monitoring-port', default: '15014', description: 'port of the Prometheus /metrics endpoint', parse: port },
  { key: 'logOutputLevel', flag: '--log_output_level', aliases: ['--log-level'], default: 'default:info', emptyIsValue: true, description: 'log levels: level or scope:level, comma-separated (e.g. cni-agent:debug,cni-plugin:info); also --log-level', parse: logOutputLevel },
  { key: 'logAsJson', flag: '--log_as_json', default: 'true', upstreamDefault: 'false', boolean: true, description: 'write logs as JSON lines (false: Istio\'s tab-separated text)', parse: bool },
  { key: 'driftCheckIntervalMs', env: 'AMBIENT_DRIFT_CHECK_INTERVAL', flag: '--ambient-drift-check-interval', default: '60s', displayDefault: formatDuration(parseGoDuration('60s')), podwire: true, description: 'podwire: how often enrolled pods\' rules, netns and probe entries are verified (Go duration; 0 = off)', parse: driftInterval },
  { key: 'hostProcRoot', env: 'HOST_PROC_ROOT', flag: '--host-proc-root', default: '/host/proc', podwire: true, description: 'podwire: the host\'s /proc as mounted in the agent (netns discovery, host netns identity)', parse: absPath },
  { key: 'kubeletUid', env: 'KUBELET_UID', flag: '--kubelet-uid', default: '', emptyIsValue: true, podwire: true, description: 'podwire: the UID the nftables host probe rule matches (meta skuid); empty: the real UID of the kubelet (or kubelite) process under the host proc root, as upstream, and the start fails without one', parse: kubeletUid },
  { key: 'hostMountsRoot', env: 'HOST_MOUNTS_ROOT', flag: '--host-mounts-root', default: '/host', podwire: true, description: 'podwire: where the host\'s paths are mounted in the agent; a CNI netns path P is opened as <it>/P ("/" = as given)', parse: absPath },
  { key: 'healthPort', env: 'HEALTH_PORT', flag: '--health-port', default: '8000', podwire: true, description: 'podwire: port of /healthz and /readyz (upstream: fixed 8000)', parse: port },
  { key: 'nodeReadinessTaint', env: 'NODE_READINESS_TAINT', flag: '--node-readiness-taint', default: 'false', podwire: true, boolean: true, description: 'podwire: keep a NoSchedule taint on this node while the agent is not ready (needs nodes get/patch; the agent\'s DaemonSet must tolerate it)', parse: bool },
  { key: 'nodeReadinessTaintKey', env: 'NODE_READINESS_TAINT_KEY', flag: '--node-readiness-taint-key', default: 'cni.podwire.io/not-ready', podwire: true, description: 'podwire: the key of that taint', parse: taintKey },
  { key: 'listenAddress', env: 'AGENT_LISTEN_ADDRESS', flag: '--listen-address', default: '', podwire: true, description: 'podwire: address the health and metrics servers bind (empty: every address, as upstream)', parse: optional(ipAny) },
];

/** The agent's own entry for a setting another table reads too (the installer's, the repair controller's). */
export function agentSetting<K extends string>(key: string): SettingSpec<K> {
  const s = SETTINGS.find((x) => x.key === key);
  if (!s) throw new Error(`no agent setting ${key}`);
  return s as unknown as SettingSpec<K>;
}

/** Every setting with its env name, flag, default and meaning (for `podwire agent --help`). */
export function describeSettings(): SettingDescription[] {
  return describeTable(SETTINGS);
}

/**
 * Reads the agent's configuration: `argv` flags (without the command) over `env` over the
 * defaults. Throws ConfigError (code ERR_AGENT_CONFIG) at the first bad setting, in argv order
 * for flag syntax, then in table order. `opts.foreign`: the installer's settings
 * (lib/install/config.ts INSTALL_SETTINGS) when both read one command line.
 */
export function parseAgentConfig(env: Env = process.env, argv: readonly string[] = [], opts: ReadSettingsOptions = {}): AgentConfig {
  const { values: out, names } = readSettings(SETTINGS, env, argv, opts);
  // Upstream starts with an empty NODE_NAME and then watches no pods at all. Intended: refuse.
  if (out.nodeName === '') {
    throw new ConfigError(names.get('nodeName') === '--node-name' ? '--node-name' : 'NODE_NAME', '', 'is required (set it from spec.nodeName via the downward API)');
  }
  const cfg = out as unknown as AgentConfig;
  cfg.selectors = COMPILED.get(cfg.enablementSelectors) ?? compileEnablementSelectors(cfg.enablementSelectors);
  return cfg;
}

/** What mesh/ decisions need from the configuration. */
export function selectionPolicy(cfg: AgentConfig): SelectionPolicy {
  return {
    selectors: cfg.selectors,
    excludeNamespaces: new Set(cfg.excludeNamespaces),
    systemNamespace: cfg.systemNamespace,
    podNamespace: cfg.podNamespace,
  };
}

