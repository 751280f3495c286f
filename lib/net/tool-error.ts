// Failures of the rule tools podwire executes inside a netns (iptables-restore,
// iptables-save, nft). The exit status becomes `code`; the input line the tool
// blamed is located by parsing its output (the only text we read) and exposed
// as fields, so callers branch on `code`/`line`, never on `message`.
import { constants as osc } from 'node:os';
import type { SpawnResult } from './netns/netns.js';
import { NetError } from './errors.js';

export interface ToolLocation {
  /** 1-based line of the input the tool blamed. */
  line: number;
  /** 1-based first and last column, when the tool reports them (nft does). */
  column?: number;
  columnEnd?: number;
}

export interface ToolErrorDetails {
  /** `op` of the NetError: the generic operation (`iptables-restore`, `nft`, ...). */
  op: string;
  /** `code`: `XTABLES_PARAMETER_PROBLEM`, `NFT_EXIT_FAILURE`, `ETIMEDOUT`, `TOOL_KILLED`, ... */
  code: string;
  /** argv as run; argv[0] is the binary (`iptables-nft-restore`). */
  argv: string[];
  result: SpawnResult;
  /** The text fed on stdin, used to quote the blamed line. */
  input?: string;
  location?: ToolLocation;
}

/** Line `n` (1-based) of `text`, or undefined past the end. */
export function lineOf(text: string, n: number): string | undefined {
  if (!Number.isInteger(n) || n < 1) return undefined;
  const lines = text.split('\n');
  if (text.endsWith('\n')) lines.pop();
  return lines[n - 1];
}

/**
 * A rule tool that exited non-zero, was killed or timed out. `errno` is 0
 * (there is no errno) except for timeouts (ETIMEDOUT).
 */
export class ToolError extends NetError {
  /** The binary that ran (`iptables-legacy-restore`, `nft`). */
  readonly tool: string;
  readonly argv: readonly string[];
  /** Exit code, or null when a signal ended it. */
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly timedOut: boolean;
  readonly stdout: string;
  readonly stderr: string;
  /** 1-based input line the tool blamed, its columns and text. */
  readonly line?: number;
  readonly column?: number;
  readonly columnEnd?: number;
  readonly lineText?: string;

  constructor(d: ToolErrorDetails) {
    const { result: r } = d;
    const tool = d.argv[0] ?? d.op;
    const lineText = d.location && d.input !== undefined ? lineOf(d.input, d.location.line) : undefined;
    const how = r.timedOut ? 'timed out' : r.code === null ? `was killed by ${r.signal}` : `exited with ${r.code}`;
    const where = d.location ? ` at line ${d.location.line}${lineText !== undefined ? ` (${JSON.stringify(lineText)})` : ''}` : '';
    const said = r.stderr.trim().split('\n')[0];
    super(`${tool} ${how}${where}${said ? `: ${said}` : ''}`,
      { errno: r.timedOut ? osc.errno.ETIMEDOUT : 0, op: d.op, code: d.code });
    this.tool = tool;
    this.argv = [...d.argv];
    this.exitCode = r.code;
    this.signal = r.signal;
    this.timedOut = r.timedOut;
    this.stdout = r.stdout;
    this.stderr = r.stderr;
    if (d.location) {
      this.line = d.location.line;
      if (d.location.column !== undefined) this.column = d.location.column;
      if (d.location.columnEnd !== undefined) this.columnEnd = d.location.columnEnd;
      if (lineText !== undefined) this.lineText = lineText;
    }
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'ToolError', enumerable: false });
  }
}

/** `code` for a failed run: timeouts and signals first, then the tool's exit-code names. */
export function toolCode(r: SpawnResult, exitNames: Readonly<Record<number, string>>): string {
  if (r.timedOut) return 'ETIMEDOUT';
  if (r.code === null) return 'TOOL_KILLED';
  return exitNames[r.code] ?? `EXIT_${r.code}`;
}

/** The environment rule tools run with: no inherited locale or NSS surprises, just PATH (+ extras). */
export function toolEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C', ...extra };
}
