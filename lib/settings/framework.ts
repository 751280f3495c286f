// The settings framework every part of the node process reads its configuration with (spec
// §8.1): a table of settings, each with its env variable, flag, default and parser; a flag given
// on the command line wins, else the environment variable, else the default. Everything is
// validated at once: a bad value fails at start with a ConfigError naming the setting and the
// value. The tables themselves live with their users (settings/node.ts for the agent,
// lib/install/config.ts, lib/repair/config.ts); the parsers here are the shared ones.
import { parseGoDuration } from './duration.js';

export class ConfigError extends Error {
  readonly code = 'ERR_AGENT_CONFIG';
  constructor(
    /** The env name (`AMBIENT_IPV6`) or flag (`--ambient-ipv6`) the bad value came from. */
    readonly setting: string,
    /** The value as given. */
    readonly value: string,
    message: string,
  ) {
    super(`${setting}=${JSON.stringify(value.length > 200 ? `${value.slice(0, 200)}…` : value)}: ${message}`);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'ConfigError', enumerable: false });
  }
}

/**
 * One setting of a settings table (the node's SETTINGS in settings/node.ts, the installer's in
 * lib/install/config.ts, the repair controller's in lib/repair/config.ts): where its value comes from, its default and how it is parsed.
 */
export interface SettingSpec<K extends string = string> {
  key: K;
  /** Environment variable; absent for flag-only settings (Istio's logging flags). */
  env?: string;
  /** Further environment variables read, in order, when `env` is unset (e.g. a chart's misspelling). */
  envAliases?: readonly string[];
  flag: string;
  /** Other spellings of the flag. */
  aliases?: readonly string[];
  /** Default as text, parsed like any value (so the table is also the help text). */
  default: string;
  /** The upstream binary's own default, where it differs from `default` (see `note`). */
  upstreamDefault?: string;
  /** A setting podwire adds (not in Istio). */
  podwire?: boolean;
  boolean?: boolean;
  /** Whether an empty value means "empty" rather than "the default". */
  emptyIsValue?: boolean;
  /** The default as help text shows it, when the raw text says little (a YAML list, ms). */
  displayDefault?: string;
  description: string;
  parse(raw: string): unknown;
}

/** What parse() functions throw; turned into a ConfigError naming the setting and value. */
export class Bad extends Error {}

// strconv.ParseBool. Viper's GetBool turns anything else into false silently; intended
// behaviour: reject it (AMBIENT_IPV6=yes must not mean "off").
export function bool(raw: string): boolean {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(raw)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(raw)) return false;
  throw new Bad('is not a boolean (true/false, 1/0, t/f)');
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export function namespaceName(raw: string): string {
  if (raw.length > 63 || !DNS1123_LABEL.test(raw)) throw new Bad('is not a namespace name (DNS-1123 label)');
  return raw;
}

export function objectName(raw: string): string {
  if (raw.length > 253 || !DNS1123_SUBDOMAIN.test(raw)) throw new Bad('is not a Kubernetes object name (DNS-1123 subdomain)');
  return raw;
}

export function optional(check: (raw: string) => string) {
  return (raw: string) => (raw === '' ? '' : check(raw));
}

export function absPath(raw: string): string {
  if (!raw.startsWith('/')) throw new Bad('must be an absolute path');
  if (raw.includes('\0')) throw new Bad('must not contain NUL');
  return raw.length > 1 ? raw.replace(/\/+$/, '') : raw;
}

export function port(raw: string): number {
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > 65535) throw new Bad('is not a port number (1–65535)');
  return Number(raw);
}

export function oneOf<T extends string>(values: readonly T[]) {
  return (raw: string): T => {
    if (!(values as readonly string[]).includes(raw)) throw new Bad(`must be one of ${values.map((v) => (v === '' ? '""' : v)).join(', ')}`);
    return raw as T;
  };
}

// Comma-separated, exact names. Blanks around names are trimmed and empty items dropped
// (Helm joins with ","; a stray space must not silently defeat an exclusion).
export function namespaceList(raw: string): string[] {
  return [...new Set(raw.split(',').map((s) => s.trim()).filter((s) => s !== ''))];
}

/** A Go duration in ms; a malformed one is Bad (the setting's ConfigError). */
export function goDuration(raw: string): number {
  try {
    return parseGoDuration(raw);
  } catch (err) {
    throw new Bad((err as Error).message);
  }
}

export interface SettingDescription {
  env?: string;
  flag: string;
  default: string;
  upstreamDefault?: string;
  podwire: boolean;
  description: string;
}

/** A settings table as help rows (the agent's, the installer's); defaults shown as a reader wants them. */
export function describeTable(table: readonly SettingSpec[]): SettingDescription[] {
  return table.map((s) => {
    const d: SettingDescription = { flag: s.flag, default: s.default, podwire: !!s.podwire, description: s.description };
    if (s.env) d.env = s.env;
    if (s.upstreamDefault !== undefined) d.upstreamDefault = s.upstreamDefault;
    if (s.displayDefault !== undefined) d.default = s.displayDefault;
    return d;
  });
}

/** Flags as given on the command line, by setting; the last occurrence wins (pflag). */
function parseArgv<K extends string>(
  table: readonly SettingSpec<K>[],
  foreign: readonly SettingSpec[],
  argv: readonly string[],
): Map<SettingSpec<K>, { raw: string; name: string }> {
  const byFlag = flagIndex(table);
  const foreignByFlag = flagIndex(foreign);
  const out = new Map<SettingSpec<K>, { raw: string; name: string }>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--') || arg === '--') throw new ConfigError(arg, arg, 'unexpected argument (settings are --flag=value)');
    const eq = arg.indexOf('=');
    const name = eq < 0 ? arg : arg.slice(0, eq);
    const s = byFlag.get(name) ?? foreignByFlag.get(name);
    if (!s) throw new ConfigError(name, eq < 0 ? '' : arg.slice(eq + 1), 'unknown flag');
    let raw: string;
    if (eq >= 0) raw = arg.slice(eq + 1);
    // A bare boolean flag means true; `--flag false` is not a value (pflag: use --flag=false).
    else if (s.boolean) raw = 'true';
    else if (i + 1 < argv.length) raw = argv[++i]!;
    else throw new ConfigError(name, '', 'needs a value');
    // A flag of the other table (the agent's and the installer's share one command line) is
    // read, and validated, by that table's parser.
    if (byFlag.get(name) === s) out.set(s as SettingSpec<K>, { raw, name });
  }
  return out;
}

function flagIndex<S extends SettingSpec>(table: readonly S[]): Map<string, S> {
  return new Map(table.flatMap((s) => [s.flag, ...(s.aliases ?? [])].map((f) => [f, s] as const)));
}

export type Env = Readonly<Record<string, string | undefined>>;

export interface ReadSettingsOptions {
  /**
   * Settings of another table given on the same command line: their flags are accepted and
   * skipped (with their value, unless boolean) instead of being unknown.
   */
  foreign?: readonly SettingSpec[];
}

/**
 * Reads every setting of `table`: its `argv` flag over its env variable over its default.
 * Returns the parsed values by key and, by key, the name the value came from (the flag as
 * spelled, the env name, or for a default the env name, else the flag). Throws ConfigError
 * at the first bad setting, in argv order for flag syntax, then in table order.
 */
export function readSettings<K extends string>(
  table: readonly SettingSpec<K>[],
  env: Env,
  argv: readonly string[],
  opts: ReadSettingsOptions = {},
): { values: Record<K, unknown>; names: Map<K, string> } {
  const flags = parseArgv(table, opts.foreign ?? [], argv);
  const values = {} as Record<K, unknown>;
  const names = new Map<K, string>();
  for (const s of table) {
    const flag = flags.get(s);
    const envName = [s.env, ...(s.envAliases ?? [])].find((e) => e !== undefined && env[e] !== undefined && (env[e] !== '' || s.emptyIsValue));
    let raw: string;
    let name: string;
    if (flag) ({ raw, name } = flag);
    // Viper reads an empty variable as unset; keep that except where empty means "none".
    else if (envName !== undefined) [raw, name] = [env[envName]!, envName];
    else [raw, name] = [s.default, s.env ?? s.flag];
    if (raw === '' && !s.emptyIsValue && s.default !== '') raw = s.default;
    names.set(s.key, name);
    try {
      values[s.key] = raw === '' && s.default === '' && !s.emptyIsValue ? '' : s.parse(raw);
    } catch (err) {
      if (err instanceof Bad) throw new ConfigError(name, raw, err.message);
      throw err;
    }
  }
  return { values, names };
}

