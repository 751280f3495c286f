// The repair controller's configuration (spec §4, §8.1): Istio's REPAIR_* settings, read like
// the agent's and the installer's (lib/settings/framework.ts readSettings): a flag on the command line
// wins, else the environment variable, else the default; every value is validated at once and a
// bad one is a ConfigError naming the setting and the value.
//
// The repair controller runs in the agent's process with the agent's command line: the agent's
// and the installer's flags are accepted and skipped here (`{ foreign }`), and the settings it
// shares with the agent (NODE_NAME, NATIVE_NFTABLES) are the agent's own table entries.
import {
  Bad, bool, ConfigError, describeTable, goDuration, readSettings,
  type Env, type ReadSettingsOptions, type SettingDescription, type SettingSpec,
} from '../settings/framework.js';
import { agentSetting, SETTINGS } from '../settings/node.js';
import { INSTALL_SETTINGS } from '../install/config.js';

export interface RepairConfig {
  /** REPAIR_ENABLED: run the repair controller. */
  enabled: boolean;
  /** REPAIR_NODE_NAME, else NODE_NAME: the node whose pods are repaired (field selector spec.nodeName). */
  nodeName: string;
  /** REPAIR_FIELD_SELECTORS: extra field selectors of the pod informer ('' = none). */
  fieldSelectors: string;
  /** REPAIR_LABEL_SELECTORS: label selector of the pod informer ('' = none). */
  labelSelectors: string;
  /** REPAIR_SIDECAR_ANNOTATION: a broken pod must carry it ('' = any pod). */
  sidecarAnnotation: string;
  /** REPAIR_INIT_CONTAINER_NAME: the init container whose failure marks a broken pod ('' = any). */
  initContainerName: string;
  /** REPAIR_INIT_CONTAINER_TERMINATION_MESSAGE: required termination message, trimmed ('' = any). */
  initTerminationMessage: string;
  /** REPAIR_INIT_CONTAINER_EXIT_CODE: required exit code (0 = any). */
  initExitCode: number;
  /** REPAIR_REPAIR_PODS: repair in place (first action). */
  repairPods: boolean;
  /** REPAIR_DELETE_PODS: delete broken pods (second action). */
  deletePods: boolean;
  /** REPAIR_LABEL_PODS: label broken pods (third action). */
  labelPods: boolean;
  /** REPAIR_BROKEN_POD_LABEL_KEY / _VALUE. */
  labelKey: string;
  labelValue: string;
  /** podwire REPAIR_DELETE_RATE: at most this many deletes per minute (evenly spaced, no burst). */
  deleteRatePerMinute: number;
  /** podwire REPAIR_RESYNC_INTERVAL: every cached pod is evaluated again this often (ms; 0 = only on pod events). */
  resyncMs: number;
  /** podwire REPAIR_AMBIENT_GRACE: how long an ambient pod must stay unenrolled before repair acts (ms). */
  ambientGraceMs: number;
  /** NATIVE_NFTABLES (the agent's setting): the repair action programs nftables instead of iptables. */
  nativeNftables: boolean;
}

type Key =
  | 'enabled' | 'repairNodeName' | 'nodeName' | 'fieldSelectors' | 'labelSelectors' | 'sidecarAnnotation'
  | 'initContainerName' | 'initTerminationMessage' | 'initExitCode' | 'repairPods' | 'deletePods' | 'labelPods'
  | 'labelKey' | 'labelValue' | 'deleteRatePerMinute' | 'resyncMs' | 'ambientGraceMs' | 'nativeNftables';

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const NAME_PART = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** A qualified name (label key, annotation key): `[prefix/]name`. */
function qualifiedName(raw: string): string {
  const slash = raw.lastIndexOf('/');
  const prefix = slash >= 0 ? raw.slice(0, slash) : undefined;
  const name = slash >= 0 ? raw.slice(slash + 1) : raw;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) {
    throw new Bad('has a bad prefix (must be a DNS-1123 subdomain before the "/")');
  }
  if (name.length === 0 || name.length > 63 || !NAME_PART.test(name)) throw new Bad('is not a qualified name ([prefix/]name, name at most 63 alphanumerics, "-", "_", ".")');
  return raw;
}

function labelValue(raw: string): string {
  if (raw.length > 63 || !LABEL_VALUE.test(raw)) throw new Bad('is not a label value (at most 63 alphanumerics, "-", "_", ".")');
  return raw;
}

function nodeName(raw: string): string {
  if (raw.length > 253 || !DNS1123_SUBDOMAIN.test(raw)) throw new Bad('is not a node name (DNS-1123 subdomain)');
  return raw;
}

function containerName(raw: string): string {
  if (raw.length > 63 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(raw)) throw new Bad('is not a container name (DNS-1123 label)');
  return raw;
}

/** Comma-separated `field=value`, `field==value` or `field!=value` terms. */
function fieldSelectors(raw: string): string {
  for (const term of raw.split(',')) {
    if (!/^[A-Za-z0-9_.\-\[\]]+\s*(==|!=|=)\s*[^,=!]*$/.test(term.trim())) throw new Bad(`has a bad field selector term ${JSON.stringify(term)} (field=value, field!=value)`);
  }
  return raw;
}

/** A label selector as the apiserver takes it; only checked for the obvious (no empty terms). */
function labelSelectors(raw: string): string {
  if (raw.split(',').some((t) => t.trim() === '') && !/\(/.test(raw)) throw new Bad('has an empty term');
  return raw;
}

function exitCode(raw: string): number {
  if (!/^\d{1,3}$/.test(raw) || Number(raw) > 255) throw new Bad('is not an exit code (0-255; 0 = any)');
  return Number(raw);
}

function ratePerMinute(raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n) || n <= 0) throw new Bad('must be a number of deletes per minute > 0');
  if (n > 60_000) throw new Bad('must be at most 60000 per minute');
  return n;
}

/** A Go duration of at least `minMs` (or 0 when `zeroOff`). */
function duration(minMs: number, zeroOff: boolean) {
  return (raw: string): number => {
    const ms = goDuration(raw);
    if (ms < 0) throw new Bad('must not be negative');
    if (ms < minMs && !(zeroOff && ms === 0)) throw new Bad(`must be ${zeroOff ? '0 (off) or ' : ''}at least ${minMs / 1000}s`);
    return ms;
  };
}

/** The repair controller's settings, in help order (the shared ones are the agent's entries). */
export const REPAIR_SETTINGS: readonly SettingSpec<Key>[] = [
  { key: 'enabled', env: 'REPAIR_ENABLED', flag: '--repair-enabled', default: 'true', boolean: true, description: 'run the repair controller (pods whose istio-validation init container failed)', parse: bool },
  { key: 'repairNodeName', env: 'REPAIR_NODE_NAME', flag: '--repair-node-name', default: '', description: 'the node whose pods are repaired (empty: NODE_NAME)', parse: nodeName },
  { key: 'fieldSelectors', env: 'REPAIR_FIELD_SELECTORS', flag: '--repair-field-selectors', default: '', description: 'extra field selectors of the repair pod informer (comma-separated; spec.nodeName is always added)', parse: fieldSelectors },
  { key: 'labelSelectors', env: 'REPAIR_LABEL_SELECTORS', flag: '--repair-label-selectors', default: '', description: 'label selector of the repair pod informer', parse: labelSelectors },
  { key: 'sidecarAnnotation', env: 'REPAIR_SIDECAR_ANNOTATION', flag: '--repair-sidecar-annotation', default: 'sidecar.istio.io/status', emptyIsValue: true, description: 'a broken pod must carry this annotation (empty: any pod)', parse: (r) => (r === '' ? '' : qualifiedName(r)) },
  { key: 'initContainerName', env: 'REPAIR_INIT_CONTAINER_NAME', flag: '--repair-init-container-name', default: 'istio-validation', emptyIsValue: true, description: 'the init container whose failure marks a broken pod (empty: any)', parse: (r) => (r === '' ? '' : containerName(r)) },
  { key: 'initTerminationMessage', env: 'REPAIR_INIT_CONTAINER_TERMINATION_MESSAGE', flag: '--repair-init-container-termination-message', default: '', description: 'the termination message (trimmed) a broken pod\'s init container ended with (empty: any)', parse: (r) => r },
  { key: 'initExitCode', env: 'REPAIR_INIT_CONTAINER_EXIT_CODE', flag: '--repair-init-container-exit-code', default: '126', description: 'the exit code a broken pod\'s init container ended with (0: any)', parse: exitCode },
  { key: 'repairPods', env: 'REPAIR_REPAIR_PODS', flag: '--repair-repair-pods', default: 'true', upstreamDefault: 'false', boolean: true, description: 'repair broken pods in place (program the sidecar rules in their netns); first action', parse: bool },
  { key: 'deletePods', env: 'REPAIR_DELETE_PODS', flag: '--repair-delete-pods', default: 'false', boolean: true, description: 'delete broken pods (when not repairing)', parse: bool },
  { key: 'labelPods', env: 'REPAIR_LABEL_PODS', flag: '--repair-label-pods', default: 'false', boolean: true, description: 'label broken pods (when neither repairing nor deleting)', parse: bool },
  { key: 'labelKey', env: 'REPAIR_BROKEN_POD_LABEL_KEY', flag: '--repair-broken-pod-label-key', default: 'cni.istio.io/uninitialized', description: 'label key set on broken pods', parse: qualifiedName },
  { key: 'labelValue', env: 'REPAIR_BROKEN_POD_LABEL_VALUE', flag: '--repair-broken-pod-label-value', default: 'true', emptyIsValue: true, description: 'label value set on broken pods', parse: labelValue },
  { key: 'deleteRatePerMinute', env: 'REPAIR_DELETE_RATE', flag: '--repair-delete-rate', default: '10', podwire: true, description: 'podwire: at most this many broken pods deleted per minute, evenly spaced (upstream: unlimited)', parse: ratePerMinute },
  { key: 'resyncMs', env: 'REPAIR_RESYNC_INTERVAL', flag: '--repair-resync-interval', default: '60s', podwire: true, description: 'podwire: how often every pod of the node is evaluated again, so a pod whose repair gave up is tried again (Go duration; 0 = only on pod events)', parse: duration(1000, true) },
  { key: 'ambientGraceMs', env: 'REPAIR_AMBIENT_GRACE', flag: '--repair-ambient-grace', default: '10s', podwire: true, description: 'podwire: how long a running pod selected for ambient must stay unenrolled before repair enrolls it (the agent\'s own enrollment goes first; Go duration)', parse: duration(0, true) },
  agentSetting<Key>('nodeName'),
  agentSetting<Key>('nativeNftables'),
];

/** The settings of the other tables on the agent's command line. */
const FOREIGN: readonly SettingSpec[] = [...SETTINGS, ...INSTALL_SETTINGS];

/**
 * Reads the repair controller's configuration from `argv` flags (the agent's and the installer's
 * are skipped), `env` and the defaults. Throws ConfigError (code ERR_AGENT_CONFIG) at the first
 * bad setting; with repair enabled, also when neither REPAIR_NODE_NAME nor NODE_NAME is set.
 */
export function parseRepairConfig(env: Env = process.env, argv: readonly string[] = [], opts: ReadSettingsOptions = { foreign: FOREIGN }): RepairConfig {
  const { values: v, names } = readSettings(REPAIR_SETTINGS, env, argv, opts);
  const node = (v.repairNodeName as string) || (v.nodeName as string);
  const cfg: RepairConfig = {
    enabled: v.enabled as boolean,
    nodeName: node,
    fieldSelectors: v.fieldSelectors as string,
    labelSelectors: v.labelSelectors as string,
    sidecarAnnotation: v.sidecarAnnotation as string,
    initContainerName: v.initContainerName as string,
    initTerminationMessage: v.initTerminationMessage as string,
    initExitCode: v.initExitCode as number,
    repairPods: v.repairPods as boolean,
    deletePods: v.deletePods as boolean,
    labelPods: v.labelPods as boolean,
    labelKey: v.labelKey as string,
    labelValue: v.labelValue as string,
    deleteRatePerMinute: v.deleteRatePerMinute as number,
    resyncMs: v.resyncMs as number,
    ambientGraceMs: v.ambientGraceMs as number,
    nativeNftables: v.nativeNftables as boolean,
  };
  // Upstream's informer would select every unscheduled pod of the cluster; intended: refuse.
  if (cfg.enabled && cfg.nodeName === '') {
    throw new ConfigError(names.get('repairNodeName') ?? 'REPAIR_NODE_NAME', '', 'is required with REPAIR_ENABLED=true (or set NODE_NAME)');
  }
  if (/(^|,)\s*spec\.nodeName\s*(==|=|!=)/.test(cfg.fieldSelectors)) {
    throw new ConfigError(names.get('fieldSelectors') ?? 'REPAIR_FIELD_SELECTORS', cfg.fieldSelectors, 'must not select on spec.nodeName (REPAIR_NODE_NAME does)');
  }
  return cfg;
}

/** Every repair setting with its env name, flag, default and meaning (for --help). */
export function describeRepairSettings(): SettingDescription[] {
  return describeTable(REPAIR_SETTINGS);
}
