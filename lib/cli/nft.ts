// `podwire nft`: apply an nft script inside a netns (one atomic transaction),
// list a netns's ruleset, delete a table that may be missing.
import { Netns } from '../net/netns/netns.js';
import { nft } from '../net/nft/tool.js';
import { validateTable, type TableRef } from '../net/nft/transaction.js';
import { ToolError } from '../net/tool-error.js';
import { parseArgs, UsageError } from './args.js';
import type { Command } from './main.js';
import { MAX_INPUT_BYTES, readInput } from './read-input.js';

const USAGE = [
  'Usage: podwire nft apply --netns X [--check] FILE|-',
  '       podwire nft list [--netns X] [--table FAMILY NAME] [--json]',
  '       podwire nft delete-table --netns X FAMILY NAME',
  '',
  '  --netns X   a name under /run/netns, a path to a netns file, or a pid',
  '              (list defaults to this process\'s netns; changes always need it)',
  '  --check     apply: only check the script (nft -c), commit nothing',
  '  --table     list: only this table (FAMILY is ip, ip6, inet, arp, bridge or netdev)',
  '  --json      list: print the parsed ruleset as JSON instead of nft\'s text',
  '',
  `FILE "-" reads the script from stdin; at most ${MAX_INPUT_BYTES / 1024 / 1024} MiB are read (more: exit 2).`,
  'Errors name the script line nft rejected.',
].join('\n');

function netns(ref: string | undefined, required: boolean): Netns {
  if (ref === undefined) {
    if (required) throw new UsageError('--netns is required');
    return Netns.current();
  }
  return Netns.resolve(ref);
}

function tableRef(family: string | undefined, name: string | undefined): TableRef {
  if (family === undefined || name === undefined) throw new UsageError('a table is given as FAMILY NAME');
  try {
    return validateTable({ family, name });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

function where(err: ToolError, file: string): string {
  if (err.line === undefined) return '';
  const caret = err.column !== undefined && err.lineText !== undefined
    ? `\n  ${' '.repeat(err.column - 1)}${'^'.repeat(Math.max(1, (err.columnEnd ?? err.column) - err.column + 1))}` : '';
  return `${file}:${err.line}${err.column !== undefined ? `:${err.column}` : ''}:\n  ${err.lineText ?? ''}${caret}\n`;
}

export const command: Command = {
  summary: 'Apply nft scripts inside a network namespace and list its ruleset.',
  usage: USAGE,
  async run(argv) {
    const [sub, ...rest] = argv;
    switch (sub) {
      case 'apply': {
        const args = parseArgs(rest, { booleans: ['check'], strings: ['netns'] });
        if (args.positionals.length !== 1) throw new UsageError('apply takes exactly one FILE (or - for stdin)');
        const file = args.positionals[0]!;
        if (!args.values.has('netns')) throw new UsageError('--netns is required');
        const script = await readInput(file, { what: 'nft script' });
        const ns = netns(args.values.get('netns'), true);
        try {
          await nft.apply(ns, script, { check: args.flags.has('check') });
          return 0;
        } catch (err) {
          if (err instanceof ToolError) process.stderr.write(where(err, file === '-' ? '<stdin>' : file));
          throw err;
        } finally {
          ns.close();
        }
      }
      case 'list': {
        const args = parseArgs(rest, { booleans: ['json'], strings: ['netns', 'table'] });
        let table: TableRef | undefined;
        if (args.values.has('table')) table = tableRef(args.values.get('table'), args.positionals.shift());
        if (args.positionals.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}`);
        const ns = netns(args.values.get('netns'), false);
        try {
          const opts = table ? { table } : {};
          const out = args.flags.has('json') ? `${JSON.stringify(await nft.list(ns, opts), null, 2)}\n` : await nft.listText(ns, opts);
          process.stdout.write(out);
          return 0;
        } finally {
          ns.close();
        }
      }
      case 'delete-table': {
        const args = parseArgs(rest, { strings: ['netns'] });
        if (args.positionals.length !== 2) throw new UsageError('delete-table takes FAMILY NAME');
        const t = tableRef(args.positionals[0], args.positionals[1]);
        const ns = netns(args.values.get('netns'), true);
        try {
          await nft.deleteTable(ns, t.family, t.name);
          return 0;
        } finally {
          ns.close();
        }
      }
      case undefined:
        throw new UsageError('missing subcommand (apply, list or delete-table)');
      default:
        throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}`);
    }
  },
};
