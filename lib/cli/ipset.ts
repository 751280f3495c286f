// `podwire ipset ...`: ipset sets of a netns over netlink, for scripts in
// privileged containers that have no ipset binary. `save` prints text that
// `ipset restore` accepts.
import { formatCreateLine, formatEntry, formatSave, IPSET_TYPES, normalizeEntry, parseEntryText, type IpsetList, type IpsetType } from '../net/ipset/codec.js';
import type { IpsetCreateOptions, IpsetEntry } from '../net/ipset/ipset.js';
import { Netns } from '../net/netns/netns.js';
import { parseArgs, UsageError } from './args.js';
import type { Command } from './main.js';
import { MAX_INPUT_BYTES, readInput } from './read-input.js';

const USAGE = [
  'Usage: podwire ipset <command> [--netns NAME|PATH|PID] ...',
  '',
  '  list [SET] [--json]                   header and members (all sets without SET)',
  '  save [SET]                            `ipset save` text (feed it to `ipset restore`)',
  '  create SET TYPE [--family inet|inet6] [--comment] [--timeout S] [--maxelem N] [--hashsize N] [--exist]',
  `                                        TYPE: ${IPSET_TYPES.join(', ')}`,
  '  destroy SET [--exist]                 --exist: no error when SET is missing',
  '  flush SET',
  '  add SET ENTRY... [--comment TEXT] [--timeout S] [--exist] [--file FILE|-]',
  '  del SET ENTRY... [--exist] [--file FILE|-]',
  '  test SET ENTRY                        exit 0 when present, 1 when not',
  '',
  '  ENTRY: 10.0.0.1  fd00::1  10.0.0.0/24  10.0.0.1,tcp:80  10.0.0.1,80 (tcp)',
  `  --file: one ENTRY per line (blank lines and # comments skipped; at most ${MAX_INPUT_BYTES / 1024 / 1024} MiB; - is stdin); sent in batches`,
  '  --netns X: a name under /run/netns, a path to a netns file, or a pid (default: this process\'s netns)',
].join('\n');

const SUBCOMMANDS = new Set(['list', 'save', 'create', 'destroy', 'flush', 'add', 'del', 'test']);
const STRING_OPTIONS = ['netns', 'family', 'timeout', 'maxelem', 'hashsize', 'file'];

/** The first positional argument, skipping options and their values. */
function findSubcommand(argv: string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return argv[i + 1];
    if (!a.startsWith('--')) return a;
    if (!a.includes('=') && STRING_OPTIONS.includes(a.slice(2))) i++;
  }
  return undefined;
}

function int(v: string | undefined, what: string): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`--${what} needs a non-negative integer, got "${v}"`);
  return Number(v);
}

async function readEntries(file: string): Promise<string[]> {
  const text = await readInput(file, { what: 'ipset entry file' });
  return text.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
}

/** An ENTRY as the user wrote it, checked as the kernel call would check it (a bad one is a usage error). */
function entryFromText(text: string): IpsetEntry {
  try {
    const e = parseEntryText(text);
    normalizeEntry(e);
    return e;
  } catch (err) {
    throw new UsageError(`invalid ENTRY ${JSON.stringify(text)}: ${(err as Error).message}`);
  }
}

function formatList(s: IpsetList): string {
  const h = s.header;
  const header = formatCreateLine(h).split(' ').slice(3).join(' ');  // family ... as `ipset list` shows it
  const members = s.entries.map((e) => {
    let line = formatEntry(e);
    if (e.timeout !== undefined) line += ` timeout ${e.timeout}`;
    if (e.comment !== undefined) line += ` comment "${e.comment}"`;
    return line;
  });
  return [
    `Name: ${h.name}`, `Type: ${h.type}`, `Revision: ${h.revision}`, `Header: ${header}`,
    `Size in memory: ${h.memory}`, `References: ${h.references}`, `Number of entries: ${h.entries}`,
    'Members:', ...members,
  ].join('\n');
}

export const command: Command = {
  summary: 'Create, fill, list and save ipset sets of a network namespace (netlink, no ipset binary).',
  usage: USAGE,
  async run(argv) {
    // --comment is a flag for create (enable the extension) and takes the
    // text for add, so the subcommand decides how argv is read.
    const first = findSubcommand(argv);
    if (first === undefined) throw new UsageError('missing command');
    if (!SUBCOMMANDS.has(first)) throw new UsageError(`unknown ipset command "${first}"`);
    const commentTakesText = first !== 'create';
    const args = parseArgs(argv, {
      booleans: ['json', 'exist', ...(commentTakesText ? [] : ['comment'])],
      strings: [...STRING_OPTIONS, ...(commentTakesText ? ['comment'] : [])],
      allowEmpty: ['comment'],
    });
    const [sub, ...pos] = args.positionals as [string, ...string[]];
    const needSet = (n = 1) => {
      if (pos.length < n) throw new UsageError(`${sub} needs ${n === 1 ? 'a set name' : 'a set name and a type'}`);
      return pos[0]!;
    };
    const exist = args.flags.has('exist');
    const onlyFor = (flag: string, cmds: string[]) => {
      if ((args.flags.has(flag) || args.values.has(flag)) && !cmds.includes(sub)) throw new UsageError(`--${flag} does not apply to ${sub}`);
    };
    onlyFor('json', ['list']);
    onlyFor('family', ['create']);
    onlyFor('maxelem', ['create']);
    onlyFor('hashsize', ['create']);
    onlyFor('comment', ['create', 'add']);
    onlyFor('timeout', ['create', 'add']);
    onlyFor('exist', ['create', 'destroy', 'add', 'del']);
    onlyFor('file', ['add', 'del']);

    // Validate what the arguments can tell before touching any namespace.
    let create: IpsetCreateOptions | undefined;
    let entries: Array<string | IpsetEntry> = [];
    if (sub === 'create') {
      needSet(2);
      if (pos.length > 2) throw new UsageError(`unexpected argument "${pos[2]}"`);
      const type = pos[1]!;
      if (!(IPSET_TYPES as readonly string[]).includes(type)) throw new UsageError(`TYPE must be one of ${IPSET_TYPES.join(', ')}`);
      const family = args.values.get('family') ?? 'inet';
      if (family !== 'inet' && family !== 'inet6') throw new UsageError('--family must be inet or inet6');
      create = { type: type as IpsetType, family: family === 'inet' ? 4 : 6 };
      if (args.flags.has('comment')) create.comment = true;
      const timeout = int(args.values.get('timeout'), 'timeout');
      const maxelem = int(args.values.get('maxelem'), 'maxelem');
      const hashsize = int(args.values.get('hashsize'), 'hashsize');
      if (timeout !== undefined) create.timeout = timeout;
      if (maxelem !== undefined) create.maxelem = maxelem;
      if (hashsize !== undefined) create.hashsize = hashsize;
    } else if (sub === 'add' || sub === 'del' || sub === 'test') {
      needSet();
      const texts = [...pos.slice(1), ...(args.values.has('file') ? await readEntries(args.values.get('file')!) : [])];
      if (texts.length === 0) throw new UsageError(`${sub} needs at least one ENTRY`);
      if (sub === 'test' && texts.length !== 1) throw new UsageError('test takes exactly one ENTRY');
      const comment = args.values.get('comment');
      const timeout = int(args.values.get('timeout'), 'timeout');
      entries = texts.map((t) => {
        const e = entryFromText(t);
        if (comment !== undefined) e.comment = comment;
        if (timeout !== undefined) e.timeout = timeout;
        return e;
      });
    } else if (sub === 'destroy' || sub === 'flush') {
      needSet();
      if (pos.length > 1) throw new UsageError(`unexpected argument "${pos[1]}"`);
    } else if (pos.length > 1) {
      throw new UsageError(`unexpected argument "${pos[1]}"`);
    }

    const ref = args.values.get('netns');
    const ns = ref === undefined ? Netns.current() : Netns.resolve(ref);
    try {
      const { ipset } = await ns.netlink();
      const set = pos[0];
      switch (sub) {
        case 'list': {
          const sets = set === undefined ? await ipset.listAll() : [await ipset.list(set)];
          if (args.flags.has('json')) process.stdout.write(`${JSON.stringify(set === undefined ? sets : sets[0], null, 2)}\n`);
          else process.stdout.write(sets.map(formatList).map((s) => `${s}\n`).join('\n'));
          return 0;
        }
        case 'save':
          process.stdout.write(formatSave(set === undefined ? await ipset.listAll() : [await ipset.list(set)]));
          return 0;
        case 'create':
          await ipset.create(set!, create!, { exist });
          return 0;
        case 'destroy':
          await ipset.destroy(set!, { exist });
          return 0;
        case 'flush':
          await ipset.flush(set!);
          return 0;
        case 'add':
          await ipset.add(set!, entries, { exist });
          return 0;
        case 'del':
          await ipset.del(set!, entries, { exist });
          return 0;
        default:
          return (await ipset.test(set!, entries[0]!)) ? 0 : 1;
      }
    } finally {
      ns.close();
    }
  },
};
