// The installer's configuration (spec §8.1), read like the agent's (lib/agent/config.ts): a flag
// on the command line wins, else the environment variable, else the default; every value is
// validated at once and a bad one is a ConfigError naming the setting and the value.
//
// The installer runs in the agent's process with the agent's command line: the settings both
// use (CNI_AGENT_RUN_DIR, AMBIENT_ENABLED, the selectors, EXCLUDE_NAMESPACES, POD_NAMESPACE,
// NATIVE_NFTABLES, --log_output_level) are the agent's own table entries, and the agent's other
// flags are accepted and skipped here, as the installer's are by parseAgentConfig with
// `{ foreign: INSTALL_SETTINGS }`.
import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  absPath, Bad, bool, ConfigError, describeTable, goDuration, oneOf, optional, port, readSettings,
  type Env, type ReadSettingsOptions, type SettingDescription, type SettingSpec,
} from '../settings/framework.js';
import { agentSetting, SETTINGS, type LogLevel } from '../settings/node.js';
import type { EnablementSelector } from '../mesh/enablement.js';
import { SERVICE_ACCOUNT_DIR } from './kubeconfig.js';
import type { PluginEntrySettings } from './plugin-entry.js';

export interface InstallConfig {
  /** MOUNTED_CNI_NET_DIR: the host's CNI config directory as mounted here. */
  mountedCniNetDir: string;
  /** CNI_CONF_NAME: the primary config to patch (chained) or the file to write (standalone); '' = choose. */
  cniConfName: string;
  /** CHAINED_CNI_PLUGIN: merge into the primary config (true) or write a file of our own. */
  chainedCniPlugin: boolean;
  /** ISTIO_OWNED_CNI_CONFIG as set. */
  istioOwnedCniConfig: boolean;
  /** ISTIO_OWNED_CNI_CONFIG_FILENAME (or the chart's ISTIO_OWNED_CNI_CONF_FILENAME, quirk Q1). */
  istioOwnedCniConfigFilename: string;
  /** Whether the Istio-owned config is in effect: owned && chained && ambient (§3.3). */
  istioOwned: boolean;
  /** CNI_CONF_GROUP_READ: files we own are 0640 instead of 0600. */
  cniConfGroupRead: boolean;
  /** podwire CNI_BIN_TARGET_DIRS: the host's CNI bin directories as mounted here. */
  cniBinTargetDirs: string[];
  /** podwire CNI_PLUGIN_BINARY: the plugin binary to install. */
  cniPluginBinary: string;
  /** podwire CNI_PLUGIN_NAME: its name on the host (`istio-cni`); the entry's `type`. */
  cniPluginName: string;
  cniAgentRunDir: string;
  /** podwire WRITE_PLUGIN_KUBECONFIG: write `<run dir>/istio-cni-kubeconfig` (for upstream's plugin). */
  writeKubeconfig: boolean;
  /** KUBECONFIG_MODE, permission bits. */
  kubeconfigMode: number;
  kubeCaFile: string;
  skipTlsVerify: boolean;
  /** podwire SERVICE_ACCOUNT_DIR: token and ca.crt for the kubeconfig (watched when it is written). */
  serviceAccountDir: string;
  kubernetesServiceProtocol: string;
  kubernetesServiceHost: string;
  kubernetesServicePort: string;
  /** What the plugin entry says. */
  entry: PluginEntrySettings;
}

type Key =
  | 'mountedCniNetDir' | 'cniConfName' | 'chainedCniPlugin' | 'istioOwnedCniConfig' | 'istioOwnedCniConfigFilename'
  | 'cniConfGroupRead' | 'cniBinTargetDirs' | 'cniPluginBinary' | 'cniPluginName' | 'cniAgentRunDir'
  | 'writeKubeconfig' | 'kubeconfigMode' | 'kubeCaFile' | 'skipTlsVerify' | 'serviceAccountDir'
  | 'kubernetesServiceProtocol' | 'kubernetesServiceHost' | 'kubernetesServicePort'
  | 'ambientEnabled' | 'enablementSelectors' | 'excludeNamespaces' | 'podNamespace' | 'nativeNftables'
  | 'logOutputLevel' | 'enableAmbientDetectionRetry' | 'agentWaitMs' | 'agentTimeoutMs' | 'statusAlwaysOk';

/**
 * The plugin as built here (`npm run build:native`, lib/install/ and dist/install/ are two levels
 * down), else the one an installed package ships next to its addon prebuild (scripts/prebuild.mjs):
 * the addon's own order (node-gyp-build), so a source build wins. Neither there: the build path.
 */
const BUILT_PLUGIN_BINARY = fileURLToPath(new URL('../../build/Release/podwire-cni', import.meta.url));
const PREBUILT_PLUGIN_BINARY = fileURLToPath(new URL(`../../prebuilds/${process.platform}-${process.arch}/podwire-cni`, import.meta.url));
export const DEFAULT_PLUGIN_BINARY = !existsSync(BUILT_PLUGIN_BINARY) && existsSync(PREBUILT_PLUGIN_BINARY)
  ? PREBUILT_PLUGIN_BINARY : BUILT_PLUGIN_BINARY;
export const DEFAULT_OWNED_FILENAME = '02-istio-cni.conflist';
export const DEFAULT_STANDALONE_FILENAME = 'YYY-istio-cni.conf';

// A file name in a directory: no slash, not `.`/`..`, no NUL.
function fileName(raw: string): string {
  if (raw.includes('/') || raw === '.' || raw === '..' || raw.includes('\0')) throw new Bad('must be a file name (no "/")');
  return raw;
}

function conflistName(raw: string): string {
  fileName(raw);
  if (!raw.endsWith('.conflist')) throw new Bad('must end in .conflist (the runtime loads it as a plugin list)');
  return raw;
}

// Permission bits, always octal ("0600", "600", "0o600"). Upstream reads the value with viper's
// GetInt, which takes "600" as decimal (mode 01130); intended: a file mode is octal.
function fileMode(raw: string): number {
  const m = /^(?:0o?)?([0-7]{1,4})$/i.exec(raw);
  if (!m) throw new Bad('is not an octal file mode (e.g. 0600)');
  return parseInt(m[1]!, 8);
}

function dirList(raw: string): string[] {
  const dirs = [...new Set(raw.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
  if (dirs.length === 0) throw new Bad('needs at least one directory');
  return dirs.map(absPath);
}

const DNS_NAME = /^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$/;
function host(raw: string): string {
  if (isIP(raw) === 0 && !(raw.length <= 253 && DNS_NAME.test(raw))) throw new Bad('is not an IP address or DNS name');
  return raw;
}

function portText(raw: string): string {
  port(raw);
  return raw;
}

/** podwire-cni's upper bound for agent_wait_ms / agent_timeout_ms (native/cni-shim/config.h kMaxConfigMs). */
const PLUGIN_MAX_MS = 3_600_000;

function duration(min: number) {
  return (raw: string): number => {
    const ms = goDuration(raw);
    if (ms < min) throw new Bad(min === 0 ? 'must not be negative' : 'must be positive');
    if (!Number.isInteger(ms)) throw new Bad('must be a whole number of milliseconds');
    if (ms > PLUGIN_MAX_MS) throw new Bad('must be at most 1h (podwire-cni refuses longer waits)');
    return ms;
  };
}

/** The installer's settings, in help order (the shared ones are the agent's entries). */
export const INSTALL_SETTINGS: readonly SettingSpec<Key>[] = [
  { key: 'mountedCniNetDir', env: 'MOUNTED_CNI_NET_DIR', flag: '--mounted-cni-net-dir', default: '/host/etc/cni/net.d', description: 'the host\'s CNI config directory (/etc/cni/net.d) as mounted in the agent', parse: absPath },
  { key: 'cniConfName', env: 'CNI_CONF_NAME', flag: '--cni-conf-name', default: '', description: 'chained: the primary config to patch (empty: the file the runtime uses); standalone: the file to write (empty: YYY-istio-cni.conf)', parse: optional(fileName) },
  { key: 'chainedCniPlugin', env: 'CHAINED_CNI_PLUGIN', flag: '--chained-cni-plugin', default: 'true', boolean: true, description: 'add the plugin to the primary CNI config\'s plugin list (false: write a config of its own)', parse: bool },
  { key: 'istioOwnedCniConfig', env: 'ISTIO_OWNED_CNI_CONFIG', flag: '--istio-owned-cni-config', default: 'false', boolean: true, description: 'write the merged list to a file of our own that sorts first, never modifying the primary config (needs chained and ambient)', parse: bool },
  {
    key: 'istioOwnedCniConfigFilename', env: 'ISTIO_OWNED_CNI_CONFIG_FILENAME', envAliases: ['ISTIO_OWNED_CNI_CONF_FILENAME'], flag: '--istio-owned-cni-config-filename',
    default: DEFAULT_OWNED_FILENAME,
    // Q1: the chart sets ISTIO_OWNED_CNI_CONF_FILENAME, which upstream's binary never reads;
    // intended: honour it (ISTIO_OWNED_CNI_CONFIG_FILENAME wins when both are set).
    description: 'name of the Istio-owned config (must sort before the primary); also read from the chart\'s ISTIO_OWNED_CNI_CONF_FILENAME',
    parse: conflistName,
  },
  { key: 'cniConfGroupRead', env: 'CNI_CONF_GROUP_READ', flag: '--cni-conf-group-read', default: 'false', boolean: true, description: 'configs we own are written 0640 instead of 0600', parse: bool },
  agentSetting<Key>('cniAgentRunDir'),
  { key: 'cniBinTargetDirs', env: 'CNI_BIN_TARGET_DIRS', flag: '--cni-bin-target-dirs', default: '/host/opt/cni/bin', podwire: true, description: 'podwire: comma-separated CNI bin directories of the host, as mounted, to install the plugin into (upstream: fixed /host/opt/cni/bin)', parse: dirList },
  { key: 'cniPluginBinary', env: 'CNI_PLUGIN_BINARY', flag: '--cni-plugin-binary', default: DEFAULT_PLUGIN_BINARY, podwire: true, description: 'podwire: the plugin binary to install (podwire-cni)', parse: absPath },
  { key: 'cniPluginName', env: 'CNI_PLUGIN_NAME', flag: '--cni-plugin-name', default: 'istio-cni', podwire: true, description: 'podwire: its file name on the host, and the entry\'s "type" (istio-cni: the entry is Istio\'s)', parse: fileName },
  { key: 'writeKubeconfig', env: 'WRITE_PLUGIN_KUBECONFIG', flag: '--write-plugin-kubeconfig', default: 'false', podwire: true, boolean: true, description: 'podwire: write <run dir>/istio-cni-kubeconfig, which only upstream\'s istio-cni plugin needs (podwire-cni has no credentials)', parse: bool },
  { key: 'kubeconfigMode', env: 'KUBECONFIG_MODE', flag: '--kubeconfig-mode', default: '0600', description: 'permission bits of the plugin kubeconfig (octal)', parse: fileMode },
  { key: 'kubeCaFile', env: 'KUBE_CA_FILE', flag: '--kube-ca-file', default: '', description: 'CA of the kubeconfig (empty: the service account\'s ca.crt)', parse: optional(absPath) },
  { key: 'skipTlsVerify', env: 'SKIP_TLS_VERIFY', flag: '--skip-tls-verify', default: 'false', boolean: true, description: 'kubeconfig with insecure-skip-tls-verify instead of a CA', parse: bool },
  { key: 'serviceAccountDir', env: 'SERVICE_ACCOUNT_DIR', flag: '--service-account-dir', default: SERVICE_ACCOUNT_DIR, podwire: true, description: 'podwire: the service account directory (token, ca.crt) the kubeconfig is made from; watched while it is written (upstream: fixed)', parse: absPath },
  { key: 'kubernetesServiceProtocol', env: 'KUBERNETES_SERVICE_PROTOCOL', flag: '--kubernetes-service-protocol', default: '', description: 'scheme of the kubeconfig\'s server (empty: https)', parse: optional(oneOf(['https', 'http'] as const)) },
  { key: 'kubernetesServiceHost', env: 'KUBERNETES_SERVICE_HOST', flag: '--kubernetes-service-host', default: '', description: 'API server host of the kubeconfig (set by Kubernetes in every pod)', parse: optional(host) },
  { key: 'kubernetesServicePort', env: 'KUBERNETES_SERVICE_PORT', flag: '--kubernetes-service-port', default: '', description: 'API server port of the kubeconfig (set by Kubernetes in every pod)', parse: optional(portText) },
  agentSetting<Key>('ambientEnabled'),
  agentSetting<Key>('enablementSelectors'),
  agentSetting<Key>('excludeNamespaces'),
  agentSetting<Key>('podNamespace'),
  agentSetting<Key>('nativeNftables'),
  agentSetting<Key>('logOutputLevel'),
  { key: 'enableAmbientDetectionRetry', env: 'ENABLE_AMBIENT_DETECTION_RETRY', flag: '--enable-ambient-detection-retry', default: 'false', boolean: true, description: 'plugin entry enable_ambient_detection_retry', parse: bool },
  { key: 'agentWaitMs', env: 'PLUGIN_AGENT_WAIT', flag: '--plugin-agent-wait', default: '', podwire: true, description: 'podwire: plugin entry agent_wait_ms, how long podwire-cni waits for the agent (Go duration; empty: not written, the plugin\'s 10s)', parse: duration(0) },
  { key: 'agentTimeoutMs', env: 'PLUGIN_AGENT_TIMEOUT', flag: '--plugin-agent-timeout', default: '', podwire: true, description: 'podwire: plugin entry agent_timeout_ms, how long podwire-cni waits for an answer (Go duration; empty: not written, the plugin\'s 30s)', parse: duration(1) },
  { key: 'statusAlwaysOk', env: 'PLUGIN_STATUS_ALWAYS_OK', flag: '--plugin-status-always-ok', default: '', podwire: true, boolean: true, description: 'podwire: plugin entry status_always_ok, CNI STATUS succeeds without the agent (empty: not written)', parse: bool },
];

/** The plugin's log level: the agent's level of scope `cni-plugin` (spec §3.2). */
export function pluginLogLevel(levels: Readonly<Record<string, LogLevel>>): LogLevel {
  return levels['cni-plugin'] ?? levels.default ?? 'info';
}

/**
 * Reads the installer's configuration from `argv` flags (the agent's own flags are skipped),
 * `env` and the defaults. Throws ConfigError (code ERR_AGENT_CONFIG) at the first bad setting.
 */
export function parseInstallConfig(env: Env = process.env, argv: readonly string[] = [], opts: ReadSettingsOptions = { foreign: SETTINGS }): InstallConfig {
  const { values: v, names } = readSettings(INSTALL_SETTINGS, env, argv, opts);
  const unset = (x: unknown) => (x === '' ? undefined : x);
  const cfg: InstallConfig = {
    mountedCniNetDir: v.mountedCniNetDir as string,
    cniConfName: v.cniConfName as string,
    chainedCniPlugin: v.chainedCniPlugin as boolean,
    istioOwnedCniConfig: v.istioOwnedCniConfig as boolean,
    istioOwnedCniConfigFilename: v.istioOwnedCniConfigFilename as string,
    istioOwned: (v.istioOwnedCniConfig && v.chainedCniPlugin && v.ambientEnabled) as boolean,
    cniConfGroupRead: v.cniConfGroupRead as boolean,
    cniBinTargetDirs: v.cniBinTargetDirs as string[],
    cniPluginBinary: v.cniPluginBinary as string,
    cniPluginName: v.cniPluginName as string,
    cniAgentRunDir: v.cniAgentRunDir as string,
    writeKubeconfig: v.writeKubeconfig as boolean,
    kubeconfigMode: v.kubeconfigMode as number,
    kubeCaFile: v.kubeCaFile as string,
    skipTlsVerify: v.skipTlsVerify as boolean,
    serviceAccountDir: v.serviceAccountDir as string,
    kubernetesServiceProtocol: v.kubernetesServiceProtocol as string,
    kubernetesServiceHost: v.kubernetesServiceHost as string,
    kubernetesServicePort: v.kubernetesServicePort as string,
    entry: {
      type: v.cniPluginName as string,
      pluginLogLevel: pluginLogLevel(v.logOutputLevel as Record<string, LogLevel>),
      cniAgentRunDir: v.cniAgentRunDir as string,
      ambientEnabled: v.ambientEnabled as boolean,
      enablementSelectors: v.enablementSelectors as EnablementSelector[],
      excludeNamespaces: v.excludeNamespaces as string[],
      podNamespace: v.podNamespace as string,
      nativeNftables: v.nativeNftables as boolean,
      enableAmbientDetectionRetry: v.enableAmbientDetectionRetry as boolean,
      agentWaitMs: unset(v.agentWaitMs) as number | undefined,
      agentTimeoutMs: unset(v.agentTimeoutMs) as number | undefined,
      statusAlwaysOk: unset(v.statusAlwaysOk) as boolean | undefined,
    },
  };
  // Upstream fails at its first installation (CREATE_KUBECONFIG_FAILURE, then exits); intended:
  // say so at start, naming the setting.
  if (cfg.writeKubeconfig) {
    for (const key of ['kubernetesServiceHost', 'kubernetesServicePort'] as const) {
      if (cfg[key] === '') throw new ConfigError(names.get(key)!, '', `is required with ${names.get('writeKubeconfig')}=true (the kubeconfig's server)`);
    }
  }
  return cfg;
}

/** Every installer setting with its env name, flag, default and meaning (for --help). */
export function describeInstallSettings(): SettingDescription[] {
  return describeTable(INSTALL_SETTINGS);
}
