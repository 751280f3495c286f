// iptables inside a netns: backend detection (legacy vs nft, Istio's rules,
// persisted for the agent), and iptables-restore / iptables-save / iptables
// run in a child born inside the netns (argv only, small fixed environment).
import { readFileSync, statSync } from 'node:fs';
import { constants as osc } from 'node:os';
import { NetError, isNotFound } from '../errors.js';
import { parseSave, restoreErrorLine, type SavedTable } from './parse.js';
import type { Netns, SpawnResult } from '../netns/netns.js';
import { ToolError, toolCode, toolEnv } from '../tool-error.js';
import type { Family } from '../ip.js';
import { writeFileAtomicSync } from '../../util/atomic-write.js';

export type { SavedTable, SavedChain, SavedRule, SavedCounters } from './parse.js';
export { parseSave, splitArgs, restoreErrorLine } from './parse.js';

export type IptablesMode = 'legacy' | 'nft';
/** The IP family: 4 or 6 (the library's one vocabulary, `Family` in lib/net/ip.ts). */
export type IpFamily = Family;

export interface IptablesVariant {
  mode: IptablesMode;
  /** `1.8.9`; `0.0.0` for a legacy build too old to print its version. */
  version: string;
}

export interface IptablesBackend extends IptablesVariant {
  /** The ip6tables variant; null when none works here (IPv6 disabled). */
  v6: IptablesVariant | null;
  /**
   * Where the answer came from this time: `host-rules` when the host netns already holds Istio's
   * host probe chain in exactly one variant (an earlier agent's, podwire's or upstream's).
   */
  source: 'env' | 'state' | 'detected' | 'host-rules';
}

/** xtables exit codes (`enum xtables_exittype`). */
const XTABLES_EXIT: Readonly<Record<number, string>> = {
  1: 'XTABLES_OTHER_PROBLEM',
  2: 'XTABLES_PARAMETER_PROBLEM',
  3: 'XTABLES_VERSION_PROBLEM',
  4: 'XTABLES_RESOURCE_PROBLEM',
};

const DEFAULT_TIMEOUT_MS = 120_000;   // above --wait=30 with room for a slow restore
const DEFAULT_WAIT_S = 30;            // Istio's --wait=30

function checkFamily(family: unknown): IpFamily {
  if (family !== 4 && family !== 6) throw new RangeError(`family must be 4 or 6, not ${String(family)}`);
  return family;
}

function checkMode(mode: unknown): IptablesMode | undefined {
  if (mode !== undefined && mode !== 'legacy' && mode !== 'nft') throw new RangeError(`iptables mode must be 'legacy' or 'nft', not ${String(mode)}`);
  return mode;
}

/** `iptables`, `ip6tables-legacy-restore`, ...; no mode → the system's default alternative. */
export function binary(family: IpFamily, mode: IptablesMode | undefined, tool: '' | 'save' | 'restore'): string {
  const base = family === 6 ? 'ip6tables' : 'iptables';
  return [base, mode, tool].filter(Boolean).join('-');
}

/** The mode to use for a family with a detected backend (v6 falls back to the v4 answer). */
export function modeFor(backend: IptablesBackend, family: IpFamily): IptablesMode {
  return family === 6 ? backend.v6?.mode ?? backend.mode : backend.mode;
}

// --- locking ---------------------------------------------------------------

let selfNetns: { dev: number; ino: number } | undefined;

function isOwnNetns(ns: Netns): boolean {
  // The JS thread never changes netns, so this is read once.
  selfNetns ??= statSync('/proc/self/ns/net');
  return ns.id.dev === selfNetns.dev && ns.id.ino === selfNetns.ino;
}

/**
 * XTABLES_LOCKFILE for work in `ns`. iptables-legacy serialises writers with
 * flock on the host-wide /run/xtables.lock even though legacy tables are per
 * netns, so pod work would contend with kube-proxy for nothing. As Istio does,
 * we lock the netns file itself instead (the variable exists since 1.8.6):
 * flock locks an inode, and every path to a netns is the same nsfs inode, so
 * all writers of one pod (this process, the CLI, Istio's plugin) serialise,
 * different pods never contend, and there is no lock file to create or clean
 * up. We name it through our own open fd (/proc/PID/fd/N), which stays valid
 * whatever path the netns came from and even after it was unmounted. The host
 * netns keeps the system lock, shared with every other host writer.
 * iptables-nft takes no lock; the variable is harmless there.
 */
function lockEnv(ns: Netns, lockFile: string | null | undefined): Record<string, string> {
  if (lockFile === null) return {};
  if (typeof lockFile === 'string') return { XTABLES_LOCKFILE: lockFile };
  return isOwnNetns(ns) ? {} : { XTABLES_LOCKFILE: `/proc/${process.pid}/fd/${ns.fd}` };
}

function waitArgs(wait: boolean | number | undefined): string[] {
  if (wait === false) return [];
  const s = wait === undefined || wait === true ? DEFAULT_WAIT_S : wait;
  if (!Number.isInteger(s) || s < 0) throw new RangeError(`wait must be a boolean or whole seconds, not ${String(wait)}`);
  return [`--wait=${s}`];
}

// --- running ---------------------------------------------------------------

export interface ToolRunOptions {
  family?: IpFamily;
  /** Which binary variant; absent → the plain name (the system's alternative). */
  mode?: IptablesMode;
  /** XTABLES_LOCKFILE: absent → per netns (see lockEnv); null → the system lock; a path → that file. */
  lockFile?: string | null;
  timeoutMs?: number;
}

async function exec(ns: Netns, op: string, argv: string[], opts: ToolRunOptions, stdin?: string): Promise<SpawnResult> {
  const env = toolEnv(lockEnv(ns, opts.lockFile));
  const spawnOpts = { env, timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, ...(stdin === undefined ? {} : { stdin }) };
  const r = await ns.spawn(argv, spawnOpts);
  if (r.code !== 0) {
    const line = stdin === undefined ? undefined : restoreErrorLine(`${r.stderr}\n${r.stdout}`);
    throw new ToolError({
      op, code: toolCode(r, XTABLES_EXIT), argv, result: r,
      ...(stdin === undefined ? {} : { input: stdin }),
      ...(line === undefined ? {} : { location: { line } }),
    });
  }
  return r;
}

export interface RestoreOptions extends ToolRunOptions {
  /** Keep what is not in the input (default true, as Istio). */
  noflush?: boolean;
  /** Wait for the xtables lock: true → 30 s (default), a number of seconds, or false. */
  wait?: boolean | number;
  /** Restore the counters in the input (`-c`). */
  counters?: boolean;
  /** Only parse and check the input (`--test`). */
  test?: boolean;
  /** Only restore this table (`--table`). */
  table?: string;
}

/**
 * Runs `iptables-restore` (or `ip6tables-restore`, of the given mode) inside
 * the netns with `text` on stdin. Failure → ToolError (op `iptables-restore` /
 * `ip6tables-restore`, code from the exit status, `line`/`lineText` of the
 * input line the tool blamed).
 */
export async function restore(ns: Netns, text: string, opts: RestoreOptions = {}): Promise<void> {
  if (typeof text !== 'string') throw new TypeError('restore input must be a string');
  const family = checkFamily(opts.family ?? 4);
  const mode = checkMode(opts.mode);
  if (opts.table !== undefined && !/^[a-z]+$/.test(opts.table)) throw new TypeError(`invalid table name ${JSON.stringify(opts.table)}`);
  const argv = [binary(family, mode, 'restore')];
  if (opts.noflush !== false) argv.push('--noflush');
  argv.push(...waitArgs(opts.wait));
  if (opts.counters) argv.push('--counters');
  if (opts.test) argv.push('--test');
  if (opts.table !== undefined) argv.push(`--table=${opts.table}`);
  // iptables-legacy-restore rejects a final COMMIT without a newline.
  const input = text.endsWith('\n') || text === '' ? text : `${text}\n`;
  await exec(ns, family === 6 ? 'ip6tables-restore' : 'iptables-restore', argv, opts, input);
}

export interface SaveOptions extends ToolRunOptions {
  /** Only this table. */
  table?: string;
  /** Include packet/byte counters of rules (`-c`). Chain counters are always there. */
  counters?: boolean;
}

/** Runs `iptables-save` inside the netns and parses it. A netns without tables gives []. */
export async function save(ns: Netns, opts: SaveOptions = {}): Promise<SavedTable[]> {
  return parseSave(await saveText(ns, opts));
}

/** The raw `iptables-save` text. */
export async function saveText(ns: Netns, opts: SaveOptions = {}): Promise<string> {
  const family = checkFamily(opts.family ?? 4);
  const argv = [binary(family, checkMode(opts.mode), 'save')];
  if (opts.table !== undefined) {
    if (!/^[a-z]+$/.test(opts.table)) throw new TypeError(`invalid table name ${JSON.stringify(opts.table)}`);
    argv.push('-t', opts.table);
  }
  if (opts.counters) argv.push('-c');
  return (await exec(ns, family === 6 ? 'ip6tables-save' : 'iptables-save', argv, opts)).stdout;
}

export interface RunOptions extends ToolRunOptions {
  /** Wait for the xtables lock (default 30 s); see RestoreOptions.wait. */
  wait?: boolean | number;
}

function checkArgs(args: unknown): string[] {
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string' || a.includes('\0')))
    throw new TypeError('args must be an array of strings without NUL bytes');
  return args as string[];
}

/** Runs one `iptables ARGS` (or ip6tables) inside the netns; returns its stdout. */
export async function run(ns: Netns, args: string[], opts: RunOptions = {}): Promise<string> {
  const family = checkFamily(opts.family ?? 4);
  const argv = [binary(family, checkMode(opts.mode), ''), ...checkArgs(args), ...waitArgs(opts.wait)];
  return (await exec(ns, family === 6 ? 'ip6tables' : 'iptables', argv, opts)).stdout;
}

/**
 * `iptables -t TABLE -C CHAIN RULE...`: true when the rule exists. Exit 1 is
 * iptables' "no such rule" answer (also for a missing chain); anything else
 * (a missing table exits 3) throws ToolError.
 */
export async function check(ns: Netns, table: string, chain: string, rule: string[], opts: RunOptions = {}): Promise<boolean> {
  try {
    await run(ns, ['-t', table, '-C', chain, ...checkArgs(rule)], opts);
    return true;
  } catch (err) {
    if (err instanceof ToolError && err.exitCode === 1) return false;
    throw err;
  }
}

// --- backend detection -----------------------------------------------------

const VERSION = /v(\d+(?:\.\d+)+)/;

async function tryRun(ns: Netns, argv: string[], env: Record<string, string>): Promise<SpawnResult | undefined> {
  try {
    return await ns.spawn(argv, { env, timeoutMs: DEFAULT_TIMEOUT_MS });
  } catch (err) {
    if (isNotFound(err)) return undefined;   // binary not installed
    throw err;
  }
}

/** `<bin>-save --version` → variant, or undefined when the save binary is missing or fails. */
async function variantOf(ns: Netns, bin: string, env: Record<string, string>): Promise<IptablesVariant | undefined> {
  const r = await tryRun(ns, [`${bin}-save`, '--version'], env);
  if (!r || r.code !== 0) return undefined;
  const out = `${r.stdout}${r.stderr}`;
  const m = VERSION.exec(out);
  // Builds too old to know --version are legacy (Istio assumes 0.0.0).
  if (!m) return { mode: 'legacy', version: '0.0.0' };
  return { mode: out.includes('nf_tables') ? 'nft' : 'legacy', version: m[1]! };
}

/**
 * Can `bin` program this netns? Adds and removes a rule that never matches (protocol 255), in
 * `nat` as upstream: the table the host probe rule and the in-pod redirects need.
 */
async function usable(ns: Netns, bin: string, variant: IptablesVariant, env: Record<string, string>): Promise<boolean> {
  const wait = variant.mode === 'legacy' ? [`--wait=${DEFAULT_WAIT_S}`] : [];
  const rule = ['-t', 'nat', '-A', 'INPUT', '-p', '255', '-j', 'RETURN', ...wait];
  const add = await tryRun(ns, [bin, ...rule], env);
  if (!add || add.code !== 0) return false;
  rule[2] = '-D';
  await tryRun(ns, [bin, ...rule], env);
  return true;
}

async function holdsRules(ns: Netns, saveBin: string, env: Record<string, string>): Promise<boolean> {
  const r = await tryRun(ns, [saveBin], env);
  // A netns where the variant has no tables prints nothing; any table is ≥ 3 lines.
  return r !== undefined && r.code === 0 && r.stdout.split('\n').length - 1 >= 3;
}

/** Istio's host probe chain (`-t nat -N ISTIO_POSTRT`, lib/redirect/hostprobe.ts), as `<bin>-save` prints it. */
const HOST_CHAIN = /^:ISTIO_POSTRT /m;

/**
 * The variant whose tables in this netns already hold Istio's host probe chain, when exactly one
 * does: the variant an earlier agent committed this node's pods to. Upstream's agent keeps no
 * state file and its own detection is not stable (below), so a node it ran can hold its rules in
 * nft while `<legacy>-save` already prints tables; detecting afresh would then pick legacy and
 * write a second, legacy set of rules into every pod it enrolled. Plain `-save` (no `-t`) lists
 * only the tables that exist, so this creates none.
 */
async function hostChainOwner(ns: Netns, family: IpFamily, env: Record<string, string>): Promise<IptablesMode | undefined> {
  const holders: IptablesMode[] = [];
  for (const mode of ['legacy', 'nft'] as const) {
    const r = await tryRun(ns, [binary(family, mode, 'save')], env);
    if (r && r.code === 0 && HOST_CHAIN.test(r.stdout)) holders.push(mode);
  }
  return holders.length === 1 ? holders[0] : undefined;
}

/**
 * An earlier agent's variant when the host netns shows one (hostChainOwner); else
 * Istio's choice for one family (`DetectIptablesVersion`): legacy when it is
 * usable and `<legacy>-save` already prints rules (≥ 3 lines), else nft when
 * usable, else the plain binary. Upstream probes every variant it looks at
 * with a test rule, and the legacy probe leaves a legacy `nat` table behind,
 * so the next detection in that netns (the agent's restart) finds "rules"
 * and flips to legacy. We probe only the variant we are about to choose.
 * Only stdout is counted (upstream counts stderr too): a warning is not a rule.
 */
async function detectFamily(ns: Netns, family: IpFamily, env: Record<string, string>): Promise<(IptablesVariant & { adopted?: true }) | undefined> {
  const legacy = binary(family, 'legacy', '');
  const owner = await hostChainOwner(ns, family, env);
  if (owner) {
    const v = await variantOf(ns, binary(family, owner, ''), env);
    if (v && v.mode === owner && await usable(ns, binary(family, owner, ''), v, env)) return { ...v, adopted: true };
  }
  if (await holdsRules(ns, `${legacy}-save`, env)) {
    const v = await variantOf(ns, legacy, env);
    if (v && await usable(ns, legacy, v, env)) return v;
  }
  for (const bin of [binary(family, 'nft', ''), binary(family, undefined, '')]) {
    const v = await variantOf(ns, bin, env);
    if (v && await usable(ns, bin, v, env)) return v;
  }
  return undefined;
}

function readState(file: string): Omit<IptablesBackend, 'source'> | undefined {
  let raw: string;
  try {
    raw = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return undefined;
    throw err;
  }
  const bad = (why: string) =>
    new NetError(`iptables backend state ${file} is invalid (${why}); fix or remove it`, { errno: osc.errno.EINVAL, op: 'iptables-backend-state' });
  let doc: unknown;
  try {
    doc = JSON.parse(raw);
  } catch {
    throw bad('not JSON');
  }
  const variant = (v: unknown, what: string): IptablesVariant => {
    const o = v as { mode?: unknown; version?: unknown } | null;
    if (typeof o !== 'object' || o === null) throw bad(`${what} is not an object`);
    if (o.mode !== 'legacy' && o.mode !== 'nft') throw bad(`${what}.mode must be legacy or nft`);
    if (typeof o.version !== 'string' || !/^\d+(\.\d+)+$/.test(o.version)) throw bad(`${what}.version must look like 1.8.9`);
    return { mode: o.mode, version: o.version };
  };
  const top = variant(doc, 'state');
  const v6raw = (doc as { v6?: unknown }).v6;
  if (v6raw === undefined) throw bad('v6 is missing');
  return { ...top, v6: v6raw === null ? null : variant(v6raw, 'v6') };
}

function writeState(file: string, b: Omit<IptablesBackend, 'source'>): void {
  const doc = { mode: b.mode, version: b.version, v6: b.v6, savedAt: new Date().toISOString() };
  // Atomic, and never through a symlink planted at a temporary name or the target.
  writeFileAtomicSync(file, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o644 });
}

export interface DetectOptions {
  /** Where to detect (the node's netns for the agent). */
  netns: Netns;
  /** Persist the answer here and reuse it on later calls, so a restart cannot flip the backend. */
  stateFile?: string;
  /** Environment to read FORCE_IPTABLES_BINARY from (default process.env). */
  env?: Record<string, string | undefined>;
}

/**
 * Which iptables backend to use, by Istio's rules: FORCE_IPTABLES_BINARY
 * (`legacy` | `nft`) wins; else a valid state file; else detection (legacy
 * only when it already holds rules, else nft). Detection and forced answers
 * are written to the state file. No usable iptables → NetError ENOENT.
 */
export async function detectBackend(opts: DetectOptions): Promise<IptablesBackend> {
  const { netns: ns, stateFile } = opts;
  const env = opts.env ?? process.env;
  const forced = env.FORCE_IPTABLES_BINARY;
  const childEnv = toolEnv(lockEnv(ns, undefined));
  let result: IptablesBackend;
  if (forced !== undefined && forced !== '') {
    if (forced !== 'legacy' && forced !== 'nft') throw new RangeError(`FORCE_IPTABLES_BINARY must be legacy or nft, not ${JSON.stringify(forced)}`);
    const v4 = await variantOf(ns, binary(4, forced, ''), childEnv);
    if (!v4) throw new NetError(`FORCE_IPTABLES_BINARY=${forced}: ${binary(4, forced, 'save')} does not run`, { errno: osc.errno.ENOENT, op: 'iptables-detect' });
    const v6 = await variantOf(ns, binary(6, forced, ''), childEnv);
    result = { mode: forced, version: v4.version, v6: v6 ? { mode: forced, version: v6.version } : null, source: 'env' };
  } else {
    const saved = stateFile === undefined ? undefined : readState(stateFile);
    if (saved) return { ...saved, source: 'state' };
    const v4 = await detectFamily(ns, 4, childEnv);
    if (!v4) throw new NetError('no usable iptables binary (tried legacy, nft and the default)', { errno: osc.errno.ENOENT, op: 'iptables-detect' });
    const v6 = await detectFamily(ns, 6, childEnv);
    result = { mode: v4.mode, version: v4.version, v6: v6 ? { mode: v6.mode, version: v6.version } : null, source: v4.adopted ? 'host-rules' : 'detected' };
  }
  if (stateFile !== undefined) writeState(stateFile, result);
  return result;
}

/** The functions of this module as one object: `iptables.restore(ns, text)`. */
export const iptables = { detectBackend, restore, save, saveText, run, check, modeFor, binary };
