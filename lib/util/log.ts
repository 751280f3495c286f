// The node agent's structured logger, in Istio's formats (istio-cni.md §9, the logging flags of
// §8.1): scopes `cni-agent` (agent, installer, repair, rules, ZDS) and `cni-plugin` (plugin lines
// replayed from the UDS sink), a level per scope from `--log_output_level` (`default` for a scope
// not named there), and `--log_as_json`.
//
// JSON (Istio's zap JSON encoder), one object per line, fields after `msg`:
//   {"level":"info","time":"2026-12-01T10:00:00.000000Z","scope":"cni-agent","msg":"...","pod":"ns/name"}
// Text (Istio's console encoder; labels appended to the message after a tab):
//   2026-12-01T10:00:00.000000Z\tinfo\tcni-agent\tmsg\tpod=ns/name uid=...
// Time is RFC 3339 in UTC with microseconds, as Istio prints it.
//
// Logging never throws and never writes a raw line break from a message or a value: control
// characters (and U+0085/U+2028/U+2029) are escaped in both formats. Values of any shape are
// accepted: Errors become their message (plus ` (code)` when they carry one), bigints their
// decimal text, undefined fields are left out, cycles become "[Circular]".

/** Log levels, Istio's names; `none` turns a scope off. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'none';

/** Levels a line can be written at (`none` is only a threshold). */
export type EmitLevel = Exclude<LogLevel, 'none'>;

/** Istio's scope names; podwire adds none (the ZDS part logs under `cni-agent`, as upstream). */
export const LOG_SCOPES = ['cni-agent', 'cni-plugin'] as const;
export type LogScope = (typeof LOG_SCOPES)[number];

export type LogFields = Record<string, unknown>;

export interface Logger {
  readonly scope: LogScope;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** Writes at level fatal; does not exit (the caller decides how to stop). */
  fatal(msg: string, fields?: LogFields): void;
  /**
   * Writes at `level`; `time` replaces the clock (the plugin's lines are replayed with their own
   * time: a Date, or an RFC 3339 string whose microseconds are kept).
   */
  log(level: EmitLevel, msg: string, fields?: LogFields, time?: Date | string): void;
  /** A logger of the same scope whose lines all carry `fields` (a call's own fields win). */
  with(fields: LogFields): Logger;
  /** Whether a line at `level` would be written (to skip building costly fields). */
  enabled(level: EmitLevel): boolean;
}

/** Where lines go; each call gets one complete line ending in "\n". `process.stderr` is one. */
export interface LogSink {
  write(line: string): unknown;
}

export interface LoggingOptions {
  /** Scope → level; `default` applies to a scope not named (absent too: info). */
  levels: Readonly<Record<string, LogLevel>>;
  json: boolean;
  /** Default: process.stderr. */
  sink?: LogSink;
  /** Default: the system clock. */
  now?: () => Date;
}

export interface Logging {
  scope(name: LogScope): Logger;
  /** The level in effect for a scope (what the installer writes as the plugin's level). */
  level(name: LogScope): LogLevel;
}

const RANK: Readonly<Record<LogLevel, number>> = { debug: 0, info: 1, warn: 2, error: 3, fatal: 4, none: 5 };
const isLevel = (l: unknown): l is LogLevel => typeof l === 'string' && Object.hasOwn(RANK, l);
const isEmitLevel = (l: unknown): l is EmitLevel => isLevel(l) && l !== 'none';
const RESERVED = new Set(['level', 'time', 'scope', 'msg']);

/** `{ pod: "ns/name", uid }`: the fields Istio puts on every line about a pod. */
export function podFields(pod: { namespace?: string | undefined; name?: string | undefined; uid?: string | undefined }): LogFields {
  const out: LogFields = {};
  const { namespace, name, uid } = pod;
  if (name) out.pod = namespace ? `${namespace}/${name}` : name;
  if (uid) out.uid = uid;
  return out;
}

export function createLogging(opts: LoggingOptions): Logging {
  const levels: Record<string, LogLevel> = { ...opts.levels };
  const sink = opts.sink ?? process.stderr;
  const json = opts.json;
  const now = opts.now ?? (() => new Date());
  const levelOf = (scope: LogScope): LogLevel => {
    const l = Object.hasOwn(levels, scope) ? levels[scope] : Object.hasOwn(levels, 'default') ? levels.default : 'info';
    return isLevel(l) ? l : 'info';
  };
  const enabled = (scope: LogScope, level: EmitLevel) => {
    const threshold = levelOf(scope);
    return threshold !== 'none' && RANK[level] >= RANK[threshold];
  };

  const emit = (scope: LogScope, level: EmitLevel, msg: unknown, bound: Entries, fields: LogFields | undefined, time?: Date | string) => {
    try {
      if (!enabled(scope, level)) return;
      const ts = timestamp(time, now);
      const all = collect(bound, fields);
      sink.write(`${json ? jsonLine(ts, level, scope, text(msg), all) : textLine(ts, level, scope, text(msg), all)}\n`);
    } catch {
      // A broken sink (EPIPE) or a clock that throws: logging must not take the agent down.
    }
  };

  const make = (scope: LogScope, bound: Entries): Logger => ({
    scope,
    debug: (msg, fields) => emit(scope, 'debug', msg, bound, fields),
    info: (msg, fields) => emit(scope, 'info', msg, bound, fields),
    warn: (msg, fields) => emit(scope, 'warn', msg, bound, fields),
    error: (msg, fields) => emit(scope, 'error', msg, bound, fields),
    fatal: (msg, fields) => emit(scope, 'fatal', msg, bound, fields),
    log: (level, msg, fields, time) => {
      if (isEmitLevel(level)) emit(scope, level, msg, bound, fields, time);
    },
    with: (fields) => make(scope, merge(bound, entriesOf(fields))),
    enabled: (level) => isEmitLevel(level) && enabled(scope, level),
  });

  return {
    scope(name) {
      if (!(LOG_SCOPES as readonly string[]).includes(name)) throw new TypeError(`unknown log scope ${JSON.stringify(name)} (one of ${LOG_SCOPES.join(', ')})`);
      return make(name, []);
    },
    level: levelOf,
  };
}

type Entries = ReadonlyArray<readonly [string, unknown]>;

/** Own enumerable fields, read once (a getter that throws becomes a placeholder; `__proto__` is just a key). */
function entriesOf(fields: unknown): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  if (typeof fields !== 'object' || fields === null) return out;
  try {
    for (const k of Object.keys(fields)) {
      try {
        out.push([k, (fields as LogFields)[k]]);
      } catch {
        out.push([k, '[unreadable]']);
      }
    }
  } catch {
    out.push(['_fields', '[unreadable]']);
  }
  return out;
}

/** Later entries replace earlier ones in place (as object spread does). */
function merge(...lists: Entries[]): Array<[string, unknown]> {
  const m = new Map<string, unknown>();
  for (const list of lists) for (const [k, v] of list) m.set(k, v);
  return [...m];
}

/** Bound then call fields (the call wins), undefined left out, Istio's own keys renamed `_key`. */
function collect(bound: Entries, fields: LogFields | undefined): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const [k, v] of merge(bound, entriesOf(fields))) {
    if (v === undefined) continue;
    out.push([RESERVED.has(k) ? `_${k}` : k, v]);
  }
  return out;
}

function text(msg: unknown): string {
  return typeof msg === 'string' ? msg : plain(msg);
}

// --- time ----------------------------------------------------------------------------------

const RFC3339 = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$/i;

/** `YYYY-MM-DDTHH:MM:SS.ffffffZ` in UTC. */
function timestamp(time: Date | string | undefined, now: () => Date): string {
  if (typeof time === 'string') {
    const m = RFC3339.exec(time.trim());
    const ms = m ? Date.parse(`${m[1]}${m[3]}`) : NaN;
    if (m && Number.isFinite(ms)) return formatTime(ms, Number((m[2] ?? '').padEnd(6, '0').slice(0, 6)));
  }
  let d = time instanceof Date ? time : undefined;
  if (!d || !Number.isFinite(d.getTime())) {
    try {
      d = now();
    } catch {
      d = undefined;
    }
  }
  const ms = d instanceof Date && Number.isFinite(d.getTime()) ? d.getTime() : Date.now();
  const inSecond = ((ms % 1000) + 1000) % 1000;   // a Date holds whole milliseconds
  return formatTime(ms - inSecond, inSecond * 1000);
}

/** `secondsMs`: epoch ms of a whole second; `micros`: 0–999999 within it. */
function formatTime(secondsMs: number, micros: number): string {
  const us = Math.min(999_999, Math.max(0, Math.trunc(micros)));
  const iso = new Date(secondsMs).toISOString();   // YYYY-MM-DDTHH:MM:SS.000Z
  return `${iso.slice(0, -5)}.${String(us).padStart(6, '0')}Z`;
}

// --- values --------------------------------------------------------------------------------

const MAX_DEPTH = 8;
const MAX_ITEMS = 100;
const MAX_NODES = 1000;
const MAX_BYTES = 64;

function errorText(err: Error): string {
  let message: string;
  try {
    message = typeof err.message === 'string' && err.message !== '' ? err.message : String(err.name || 'Error');
  } catch {
    message = 'Error';
  }
  let code: unknown;
  try {
    code = (err as { code?: unknown }).code;
  } catch {
    code = undefined;
  }
  return (typeof code === 'string' && code !== '') || typeof code === 'number' ? `${message} (${String(code)})` : message;
}

function hex(bytes: Uint8Array): string {
  const shown = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, MAX_BYTES)).toString('hex');
  return bytes.length > MAX_BYTES ? `${shown}…(${bytes.length} bytes)` : shown;
}

/**
 * A value as plain JSON data: Errors → message (+ code), bigint → decimal string, Date → ISO,
 * bytes → hex, Map → object, Set → array, non-finite numbers → "NaN"/"+Inf"/"-Inf" (as zap),
 * cycles → "[Circular]"; deeper than 8 levels, or past 1,000 objects or 100 items of one array,
 * the rest is cut ("[…]", "…(N more)").
 */
/** Per value written: the objects on the current path (cycles), and how many nodes may still be visited. */
interface Walk { seen: Set<object>; left: number }
const walk = (): Walk => ({ seen: new Set(), left: MAX_NODES });

function toData(v: unknown, ctx: Walk, depth: number): unknown {
  try {
    return data(v, ctx, depth);
  } catch {
    return '[unserializable]';   // e.g. a Proxy whose traps throw
  }
}

function data(v: unknown, ctx: Walk, depth: number): unknown {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      return Number.isFinite(v) ? v : Number.isNaN(v) ? 'NaN' : v > 0 ? '+Inf' : '-Inf';
    case 'bigint':
      return v.toString();
    case 'undefined':
      return null;
    case 'symbol':
      return v.toString();
    case 'function':
      return `[function ${v.name || 'anonymous'}]`;
  }
  if (v === null) return null;
  const o = v as object;
  if (o instanceof Error) return errorText(o);
  if (o instanceof Date) return Number.isFinite(o.getTime()) ? o.toISOString() : 'Invalid Date';
  if (o instanceof Uint8Array) return hex(o);
  const { seen } = ctx;
  if (seen.has(o)) return '[Circular]';
  if (depth >= MAX_DEPTH || ctx.left <= 0) return '[…]';
  ctx.left--;
  seen.add(o);
  try {
    if (Array.isArray(o) || o instanceof Set) {
      const size = Array.isArray(o) ? o.length : o.size;
      const out: unknown[] = [];
      for (const x of o) {
        if (out.length === MAX_ITEMS) break;
        out.push(toData(x, ctx, depth + 1));
      }
      if (size > MAX_ITEMS) out.push(`…(${size - MAX_ITEMS} more)`);
      return out;
    }
    if (o instanceof Map) {
      const out: Record<string, unknown> = {};
      for (const [k, x] of o) out[typeof k === 'string' ? k : plain(k)] = toData(x, ctx, depth + 1);
      return out;
    }
    const toJSON = (o as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') return toData(toJSON.call(o), ctx, depth + 1);
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(o)) {
      let x: unknown;
      try {
        x = (o as Record<string, unknown>)[k];
      } catch {
        x = '[unreadable]';
      }
      if (x !== undefined) out[k] = toData(x, ctx, depth + 1);
    }
    return out;
  } finally {
    seen.delete(o);
  }
}

// JSON.stringify leaves these raw; they break lines in some readers.
const JSON_LINE_BREAKS = /[\u0085\u2028\u2029]/g;
const esc = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

function jsonString(v: unknown): string {
  return JSON.stringify(v).replace(JSON_LINE_BREAKS, esc);
}

/** A value as text: strings as they are, anything else as compact JSON. */
function plain(v: unknown): string {
  const d = toData(v, walk(), 0);
  return typeof d === 'string' ? d : JSON.stringify(d) ?? 'null';
}

// --- lines ---------------------------------------------------------------------------------

function jsonLine(ts: string, level: EmitLevel, scope: string, msg: string, fields: Array<[string, unknown]>): string {
  let line = `{"level":"${level}","time":"${ts}","scope":${jsonString(scope)},"msg":${jsonString(msg)}`;
  for (const [k, v] of fields) line += `,${jsonString(k)}:${jsonString(toData(v, walk(), 0))}`;
  return `${line}}`;
}

const CONTROL = /[\u0000-\u001f\u007f\u0085\u2028\u2029]/g;
const CONTROL_NAMES: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };
const escapeControls = (s: string) => s.replace(CONTROL, (c) => CONTROL_NAMES[c] ?? esc(c));
// A value is quoted (JSON string syntax) when it would not read back as one token.
const NEEDS_QUOTES = /[\s"\\\u0000-\u001f\u007f\u0085\u2028\u2029]/;
const BAD_KEY = /[\s"=\u0000-\u001f\u007f\u0085\u2028\u2029]/g;

function textValue(v: unknown): string {
  const s = plain(v);
  return s === '' || NEEDS_QUOTES.test(s) ? jsonString(s) : s;
}

function textLine(ts: string, level: EmitLevel, scope: string, msg: string, fields: Array<[string, unknown]>): string {
  let line = `${ts}\t${level}\t${scope}\t${escapeControls(msg)}`;
  if (fields.length > 0) line += `\t${fields.map(([k, v]) => `${k.replace(BAD_KEY, '_') || '_'}=${textValue(v)}`).join(' ')}`;
  return line;
}
