// The network configuration the runtime gives the plugin on stdin (§2.1):
// the standard fields plus Istio's, by their exact JSON names. Unknown
// fields are ignored, as upstream; a field of the wrong type is an error an
// operator can act on (upstream's Go decoder would fail the same way): code 7,
// while a document that is not an object at all (or a prevResult that is not) is code 6.
import { CNI_CODES, CniError } from './errors.js';
import { checkVersion, type CniVersion } from './version.js';
import { DEFAULT_RUN_DIR } from './constants.js';
import { isJsonObject } from '../util/json.js';

export interface PluginConf {
  cniVersion: CniVersion;
  name: string;
  type: string;
  prevResult?: Record<string, unknown>;
  pluginLogLevel: string;
  cniAgentRunDir: string;
  ambientEnabled: boolean;
  excludeNamespaces: string[];
  podNamespace: string;
  nativeNftables: boolean;
  enableAmbientDetectionRetry: boolean;
  /** CNI 1.1 GC: the attachments the runtime still holds. */
  validAttachments?: Array<{ containerID: string; ifname: string }>;
}

type Obj = Record<string, unknown>;

function invalid(field: string, what: string): CniError {
  return new CniError(CNI_CODES.INVALID_CONFIG, `network configuration: ${field} ${what}`);
}

function str(o: Obj, key: string, dflt = ''): string {
  const v = o[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'string') throw invalid(key, 'must be a string');
  return v;
}

function bool(o: Obj, key: string): boolean {
  const v = o[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw invalid(key, 'must be true or false');
  return v;
}

export function parseNetConf(text: string): PluginConf {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new CniError(CNI_CODES.DECODE, `network configuration is not JSON: ${(err as Error).message}`);
  }
  // Not an object cannot be decoded into a config at all (Go's json.Unmarshal fails): a decoding failure, like bad JSON.
  if (!isJsonObject(doc)) throw new CniError(CNI_CODES.DECODE, 'network configuration must be a JSON object');
  const cniVersion = checkVersion(doc.cniVersion);
  const excl = doc.exclude_namespaces;
  if (excl !== undefined && excl !== null && !(Array.isArray(excl) && excl.every((n) => typeof n === 'string'))) throw invalid('exclude_namespaces', 'must be a list of strings');
  const prev = doc.prevResult;
  // A malformed prevResult is a decoding failure (code 6), as its other defects are (result.ts).
  if (prev !== undefined && prev !== null && !isJsonObject(prev)) throw new CniError(CNI_CODES.DECODE, 'prevResult: must be an object');
  const conf: PluginConf = {
    cniVersion,
    name: str(doc, 'name'),
    type: str(doc, 'type'),
    pluginLogLevel: str(doc, 'plugin_log_level', 'info'),
    cniAgentRunDir: str(doc, 'cni_agent_run_dir', DEFAULT_RUN_DIR),
    ambientEnabled: bool(doc, 'ambient_enabled'),
    excludeNamespaces: (excl as string[] | null | undefined) ?? [],
    podNamespace: str(doc, 'pod_namespace'),
    nativeNftables: bool(doc, 'native_nftables'),
    enableAmbientDetectionRetry: bool(doc, 'enable_ambient_detection_retry'),
  };
  if (isJsonObject(prev)) conf.prevResult = prev;
  const valid = doc['cni.dev/valid-attachments'];
  if (valid !== undefined && valid !== null) {
    if (!Array.isArray(valid) || !valid.every((a) => isJsonObject(a) && typeof a.containerID === 'string' && typeof a.ifname === 'string'))
      throw invalid('cni.dev/valid-attachments', 'must be a list of {containerID, ifname}');
    conf.validAttachments = valid.map((a) => ({ containerID: (a as Obj).containerID as string, ifname: (a as Obj).ifname as string }));
  }
  return conf;
}
