// A small argv parser shared by every subcommand: `--flag`, `--key value`,
// `--key=value`, repeatable keys, positionals. Unknown flags are errors.
export class UsageError extends Error {
  static {
    Object.defineProperty(this.prototype, 'name', { value: 'UsageError', enumerable: false });
  }
  /** Whether `podwire` prints the command's usage after the message. */
  readonly showUsage: boolean;
  constructor(message: string, opts: { showUsage?: boolean } = {}) {
    super(message);
    this.showUsage = opts.showUsage ?? true;
  }
}

export interface ArgSpec {
  /** Flags without a value (`--json`). */
  booleans?: string[];
  /** Options taking a value (`--netns X`). */
  strings?: string[];
  /** Options that may repeat; their values are collected in order. */
  repeatable?: string[];
  /** Options whose value may be the empty string (all others reject `--key ''`). */
  allowEmpty?: string[];
}

/** Rejects positional arguments beyond `max`. */
export function noExtraPositionals(args: ParsedArgs, max = 0): void {
  if (args.positionals.length > max) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[max])}`);
}

export interface ParsedArgs {
  flags: Set<string>;
  values: Map<string, string>;
  lists: Map<string, string[]>;
  positionals: string[];
}

export function parseArgs(argv: string[], spec: ArgSpec): ParsedArgs {
  const booleans = new Set(spec.booleans ?? []);
  const strings = new Set(spec.strings ?? []);
  const repeatable = new Set(spec.repeatable ?? []);
  const out: ParsedArgs = { flags: new Set(), values: new Map(), lists: new Map(), positionals: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      out.positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('--')) {
      out.positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    if (booleans.has(name)) {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`);
      out.flags.add(name);
      continue;
    }
    if (!strings.has(name) && !repeatable.has(name)) throw new UsageError(`unknown option --${name}`);
    let value: string | undefined = eq < 0 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined) throw new UsageError(`--${name} needs a value`);
    if (value === '' && !spec.allowEmpty?.includes(name)) throw new UsageError(`--${name} needs a non-empty value`);
    if (repeatable.has(name)) out.lists.set(name, [...(out.lists.get(name) ?? []), value]);
    else out.values.set(name, value);
    value = undefined;
  }
  return out;
}
