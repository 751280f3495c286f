// Which CNI config files the container runtime would load from a directory, in kubelet's
// (libcni's) order (spec §3.3): the non-directory entries ending `.conf` or `.conflist`,
// sorted by name, keeping only those libcni loads — a `.conflist` must be a JSON object with a
// string `name` and a non-empty `plugins` list of objects with a string `type`; a `.conf` a
// JSON object with a non-empty string `type`. Invalid files are skipped with a warning.
import { readdir, readFile, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { InstallError, ioError } from './errors.js';
import { compareUtf8 } from './go-json.js';
import type { InstallLog } from './log.js';
import { isJsonObject } from '../util/json.js';

type Json = Record<string, unknown>;
// Go's json.Unmarshal into a typed field: null leaves it alone, a value of another type fails.
const isNullOr = (v: unknown, ok: (v: unknown) => boolean) => v === undefined || v === null || ok(v);
const isString = (v: unknown) => typeof v === 'string';
const isStringList = (v: unknown) => Array.isArray(v) && v.every((x) => x === null || typeof x === 'string');

// types.NetConf's typed fields, as json.Unmarshal checks them, and libcni's non-empty `type`.
function netConfProblem(o: Json): string | undefined {
  for (const k of ['cniVersion', 'name', 'type'] as const) {
    if (!isNullOr(o[k], isString)) return `"${k}" is not a string`;
  }
  if (!isNullOr(o.capabilities, (c) => isJsonObject(c) && Object.values(c).every((x) => x === null || typeof x === 'boolean'))) return '"capabilities" is not a map of booleans';
  if (!isNullOr(o.ipam, (i) => isJsonObject(i) && isNullOr(i.type, isString))) return '"ipam" is not an object with a string "type"';
  if (!isNullOr(o.dns, (d) => isJsonObject(d) && isNullOr(d.nameservers, isStringList) && isNullOr(d.domain, isString)
    && isNullOr(d.search, isStringList) && isNullOr(d.options, isStringList))) return '"dns" is not a DNS object';
  if (!isNullOr(o.prevResult, isJsonObject)) return '"prevResult" is not an object';
  if (typeof o.type !== 'string' || o.type === '') return 'missing "type"';
  return undefined;
}

/** Why libcni would not load `text` as the file `name` (undefined: it would). */
export function libcniProblem(name: string, text: string): string | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    return `not JSON: ${(err as Error).message}`;
  }
  if (!isJsonObject(v)) return 'not a JSON object';
  if (extname(name) === '.conflist') {
    if (!Object.hasOwn(v, 'name')) return 'no "name"';
    if (typeof v.name !== 'string') return '"name" is not a string';
    if (Object.hasOwn(v, 'cniVersion') && typeof v.cniVersion !== 'string') return '"cniVersion" is not a string';
    if (!Object.hasOwn(v, 'plugins')) return 'no "plugins" key';
    if (!Array.isArray(v.plugins)) return '"plugins" is not a list';
    if (v.plugins.length === 0) return 'no plugins in the list';
    for (const [i, p] of v.plugins.entries()) {
      const problem = isJsonObject(p) ? netConfProblem(p) : 'not an object';
      if (problem !== undefined) return `plugins[${i}]: ${problem}`;
    }
    return undefined;
  }
  const problem = netConfProblem(v);
  return problem === 'missing "type"' ? 'no "type" (perhaps this is a .conflist?)' : problem;
}

const isConfName = (name: string) => extname(name) === '.conf' || extname(name) === '.conflist';

/**
 * The loadable config files of `dir`, best first (file names). Throws InstallError
 * ERR_NO_NETWORKS (no .conf/.conflist at all), ERR_NO_VALID_NETWORKS (none loads) or ERR_IO
 * (the directory cannot be read), all of stage `cni-config`.
 */
export async function listCandidates(dir: string, log?: InstallLog): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    throw ioError('cni-config', 'cannot read the CNI config directory', dir, err);
  }
  const names: string[] = [];
  for (const e of entries) {
    if (!isConfName(e.name) || e.isDirectory()) continue;
    // libcni skips directories only; a symlink to a directory is one too.
    if (e.isSymbolicLink()) {
      const st = await stat(join(dir, e.name)).catch(() => undefined);
      if (st?.isDirectory()) continue;
    }
    names.push(e.name);
  }
  if (names.length === 0) throw new InstallError('ERR_NO_NETWORKS', 'cni-config', `no networks found in ${dir}`, { path: dir });
  names.sort(compareUtf8);
  const valid: string[] = [];
  for (const name of names) {
    let text: string;
    try {
      text = await readFile(join(dir, name), 'utf8');
    } catch (err) {
      log?.warn(`error loading CNI config file ${join(dir, name)}: ${(err as Error).message}`);
      continue;
    }
    const problem = libcniProblem(name, text);
    if (problem !== undefined) {
      log?.warn(`error loading CNI config file ${join(dir, name)}: ${problem}`);
      continue;
    }
    valid.push(name);
  }
  if (valid.length === 0) throw new InstallError('ERR_NO_VALID_NETWORKS', 'cni-config', `no valid networks found in ${dir}`, { path: dir });
  return valid;
}
