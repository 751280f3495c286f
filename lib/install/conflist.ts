// The chained merge and its undo (spec §3.2, §3.6), on text: the existing config and the plugin
// entry are decoded as generic JSON (Go's map[string]any) and the result is written the way Go
// marshals a map — keys sorted at every level, 2-space indent, trailing newline — so the output
// is byte-identical to Istio's for the same input.
import { InstallError } from './errors.js';
import { marshalIndent } from './go-json.js';
import { ENTRY_CNI_VERSION, PLUGIN_NAME } from './plugin-entry.js';
import { isJsonObject } from '../util/json.js';

type JsonObject = Record<string, unknown>;

/** The `name` of the list a single `.conf` is turned into. */
export const CONVERTED_LIST_NAME = 'k8s-pod-network';


/** Decodes a JSON object (Go: json.Unmarshal into map[string]any), else ERR_CNI_CONFIG_INVALID. */
export function parseJsonObject(text: string, what: string, code: 'ERR_CNI_CONFIG_INVALID' | 'ERR_ENTRY_INVALID' = 'ERR_CNI_CONFIG_INVALID'): JsonObject {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new InstallError(code, 'cni-config', `${what} is not JSON: ${(err as Error).message}`);
  }
  if (!isJsonObject(v)) throw new InstallError(code, 'cni-config', `${what} is not a JSON object`);
  return v;
}

/** `plugins` as a list of objects (Istio's GetPlugins + GetPlugin), else ERR_CNI_CONFIG_INVALID. */
export function pluginsOf(config: JsonObject, what: string): JsonObject[] {
  const plugins = config.plugins;
  if (!Array.isArray(plugins)) throw new InstallError('ERR_CNI_CONFIG_INVALID', 'cni-config', `${what}: no "plugins" list`);
  plugins.forEach((p, i) => {
    if (!isJsonObject(p)) throw new InstallError('ERR_CNI_CONFIG_INVALID', 'cni-config', `${what}: plugins[${i}] is not an object`);
  });
  return plugins as JsonObject[];
}

/** Go's marshalling of a generic map plus the trailing newline Istio appends. */
export function marshalConfig(config: JsonObject): string {
  return `${marshalIndent(config)}\n`;
}

/**
 * `existing` with the plugin entry `entry` (its standalone text, e.g. renderPluginEntry's)
 * chained in: a single `.conf` (top-level `type`) becomes a list of it (minus its cniVersion)
 * and the entry; in a list, the first plugin of type `pluginType` is removed and the entry is
 * appended at the end. The entry's own cniVersion is dropped (the list's applies).
 */
export function insertEntry(entry: string, existing: string, pluginType = PLUGIN_NAME): string {
  const ours = parseJsonObject(entry, 'the plugin entry', 'ERR_ENTRY_INVALID');
  const config = parseJsonObject(existing, 'the existing CNI config');
  delete ours.cniVersion;
  if (Object.hasOwn(config, 'type')) {
    delete config.cniVersion;
    return marshalConfig({ cniVersion: ENTRY_CNI_VERSION, name: CONVERTED_LIST_NAME, plugins: [config, ours] });
  }
  const plugins = withoutFirstOfType(pluginsOf(config, 'the existing CNI config'), pluginType);
  config.plugins = [...plugins, ours];
  return marshalConfig(config);
}

/** `existing` (a list) without its first plugin of type `pluginType` (cleanup, §3.6). */
export function removeEntry(existing: string, pluginType = PLUGIN_NAME, what = 'the CNI config'): string {
  const config = parseJsonObject(existing, what);
  config.plugins = withoutFirstOfType(pluginsOf(config, what), pluginType);
  return marshalConfig(config);
}

function withoutFirstOfType(plugins: JsonObject[], type: string): JsonObject[] {
  const i = plugins.findIndex((p) => p.type === type);
  return i < 0 ? plugins : [...plugins.slice(0, i), ...plugins.slice(i + 1)];
}
