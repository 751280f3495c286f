// Whether the installed CNI config is still what it must be (spec §3.4, checkValidCNIConfig).
// Invalid means "(re)write it"; the check never writes. It may update `state.primaryName` the
// way upstream updates CNIConfName: when the config the runtime uses is no longer the one we
// wrote, the new first candidate becomes the primary to patch.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { listCandidates } from './candidates.js';
import type { InstallConfig } from './config.js';
import { exists, type ConfigState } from './config-path.js';
import { insertEntry } from './conflist.js';
import { compareUtf8 } from './go-json.js';
import { InstallError } from './errors.js';
import type { InstallLog } from './log.js';
import { isJsonObject } from '../util/json.js';

export type InvalidReason =
  /** No loadable config in the directory (or it cannot be read). */
  | 'NO_CANDIDATES'
  /** Istio-owned mode: the owned file is not the first config. */
  | 'OWNED_NOT_FIRST'
  /** The first config is not the one we wrote. */
  | 'PREEMPTED'
  /** The file we wrote is gone (or we wrote none yet). */
  | 'MISSING'
  /** It cannot be read or is not a JSON object. */
  | 'UNREADABLE'
  /** It has no `plugins` list, or a plugin that is not an object with a string `type`. */
  | 'NOT_A_LIST'
  /** No plugin of our type in it. */
  | 'NOT_INSTALLED'
  /** Istio-owned mode: the primary config is gone. */
  | 'PRIMARY_MISSING'
  /** Istio-owned mode: the owned file is not the merge of the primary as it is now (quirk Q4). */
  | 'PRIMARY_DRIFT'
  /** Standalone: the file's `type` is not ours. */
  | 'NOT_OURS';

export type Validity = { valid: true } | { valid: false; reason: InvalidReason; message: string };

const invalid = (reason: InvalidReason, message: string): Validity => ({ valid: false, reason, message });
type Json = Record<string, unknown>;

/**
 * Checks the installation. `entry` is the plugin entry as it would be written now (Istio-owned
 * mode compares the owned file with the merge of the current primary).
 */
export async function checkCniConfig(cfg: InstallConfig, state: ConfigState, entry: string, log: InstallLog): Promise<Validity> {
  const dir = cfg.mountedCniNetDir;
  let names: string[];
  try {
    names = await listCandidates(dir);
  } catch (err) {
    if (err instanceof InstallError) return invalid('NO_CANDIDATES', err.message);
    throw err;
  }
  const first = names[0]!;
  const firstPath = join(dir, first);
  const owned = cfg.istioOwned ? cfg.istioOwnedCniConfigFilename : undefined;
  if (owned !== undefined && first !== owned) {
    if (compareUtf8(owned, first) > 0) log.warn(`the Istio-owned CNI config ${owned} sorts after ${first}: the runtime would not use it; choose a name that sorts first`);
    if (!cfg.cniConfName) state.primaryName = first;
    return invalid('OWNED_NOT_FIRST', `the Istio-owned CNI config ${owned} is not the highest-priority config (${first} is)`);
  }
  if (firstPath !== state.writtenPath) {
    // "CNI_CONF_NAME set" is the setting as given, not the name remembered below: upstream's
    // master stores the chosen name in the same field, which would turn every later preemption
    // into a warning; intended (and upstream's released behaviour): follow the config the
    // runtime uses unless the user fixed the name.
    if (cfg.cniConfName || !cfg.chainedCniPlugin) {
      // A fixed file name: the runtime using another file is reported, not fought over.
      log.warn(`CNI config file ${JSON.stringify(state.writtenPath)} preempted by ${JSON.stringify(firstPath)}`);
    } else {
      state.primaryName = owned !== undefined && first === owned ? (names[1] ?? '') : first;
      return invalid('PREEMPTED', `CNI config file ${JSON.stringify(state.writtenPath)} preempted by ${JSON.stringify(firstPath)}`);
    }
  }
  const path = state.writtenPath;
  if (path === '' || !(await exists(path))) return invalid('MISSING', `CNI config file removed: ${path || '(none written yet)'}`);
  let config: Json;
  try {
    const v: unknown = JSON.parse(await readFile(path, 'utf8'));
    if (!isJsonObject(v)) return invalid('UNREADABLE', `${path} is not a JSON object`);
    config = v;
  } catch (err) {
    return invalid('UNREADABLE', `cannot read ${path}: ${(err as Error).message}`);
  }
  if (!cfg.chainedCniPlugin) {
    return config.type === cfg.cniPluginName ? { valid: true } : invalid('NOT_OURS', `${path}: type is ${JSON.stringify(config.type)}, not ${cfg.cniPluginName}`);
  }
  if (!Array.isArray(config.plugins)) return invalid('NOT_A_LIST', `${path}: no "plugins" list`);
  for (const [i, p] of config.plugins.entries()) {
    if (!isJsonObject(p) || typeof p.type !== 'string') return invalid('NOT_A_LIST', `${path}: plugins[${i}] has no string "type"`);
  }
  if (!config.plugins.some((p: Json) => p.type === cfg.cniPluginName)) return invalid('NOT_INSTALLED', `${path}: no ${cfg.cniPluginName} plugin in the list`);
  if (owned === undefined) return { valid: true };

  // Istio-owned: upstream compares plugin types only, so an edit inside the primary config is
  // never carried over (quirk Q4). Intended: the owned file must be exactly the merge of the
  // primary as it is now.
  const primary = await findPrimary(dir, state.primaryName || cfg.cniConfName);
  if (primary === undefined) return invalid('PRIMARY_MISSING', `the primary CNI config ${JSON.stringify(state.primaryName || cfg.cniConfName)} is gone`);
  let expected: unknown;
  try {
    expected = JSON.parse(insertEntry(entry, await readFile(primary, 'utf8'), cfg.cniPluginName));
  } catch (err) {
    return invalid('PRIMARY_DRIFT', `cannot merge the primary CNI config ${primary}: ${(err as Error).message}`);
  }
  if (!jsonEqual(expected, config)) return invalid('PRIMARY_DRIFT', `${path} is not the merge of ${primary} as it is now`);
  return { valid: true };
}

// The primary's path without waiting: X, else X.conf ↔ X.conflist.
async function findPrimary(dir: string, name: string): Promise<string | undefined> {
  if (name === '') return undefined;
  const path = join(dir, name);
  if (await exists(path)) return path;
  if (path.endsWith('.conf') && (await exists(`${path}list`))) return `${path}list`;
  if (path.endsWith('.conflist') && (await exists(path.slice(0, -4)))) return path.slice(0, -4);
  return undefined;
}

/** Deep equality of decoded JSON (object key order does not matter, array order does). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  if (isJsonObject(a)) {
    if (!isJsonObject(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}
