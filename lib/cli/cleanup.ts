// `podwire cleanup`: removes what a demo (or a test run) left behind when it
// was killed or kept: its network namespaces (unmounted and removed, as `ip
// netns del`), its run directory and its IPAM directory. Only names carrying
// the prefix are touched, and never those of a run that is still going.
import { DEMO_PREFIX_FAMILY, findLeftovers, isSafePrefix, removeLeftovers } from '../demo/leftovers.js';
import { noExtraPositionals, parseArgs, UsageError, type ParsedArgs } from './args.js';
import type { Command } from './main.js';

/** `--prefix P` of cleanup and demo, checked as cleanup can match it (isSafePrefix). */
export function prefixOption(args: ParsedArgs): string | undefined {
  const prefix = args.values.get('prefix');
  if (prefix !== undefined && !isSafePrefix(prefix)) throw new UsageError(`--prefix must be 2-31 lowercase letters, digits and - (starting with a letter or digit), got ${JSON.stringify(prefix)}`);
  return prefix;
}

export const command: Command = {
  summary: 'Remove what a killed or kept demo (or test run) left behind: namespaces, their mounts, temp dirs.',
  usage: [
    'Usage: podwire cleanup [--prefix P] [--dry-run]',
    '',
    `  --prefix P   what to remove: names starting with P (default ${DEMO_PREFIX_FAMILY}, every default demo run);`,
    '               2-31 lowercase letters, digits and -, starting with a letter or digit',
    '  --dry-run    print what would be removed, remove nothing',
    '',
    'Removes: network namespaces /run/netns/P* (unmount + remove, as `ip netns del`), demo run',
    'directories $TMPDIR/P* (those holding a podwire-demo.json marker) and IPAM directories',
    '$TMPDIR/P*cni-ipam. Skips everything of a demo that is still running (its marker names a live',
    'pid) and names carrying the pid of a live process (pwdemo-<pid>-*, pwt-<pid>-*).',
    'Prints one line per thing removed or skipped; exit 0 (also when there is nothing to do),',
    '1 when something could not be removed.',
  ].join('\n'),
  async run(argv) {
    const args = parseArgs(argv, { booleans: ['dry-run'], strings: ['prefix'] });
    noExtraPositionals(args);
    const prefix = prefixOption(args) ?? DEMO_PREFIX_FAMILY;
    const found = findLeftovers(prefix);
    for (const s of found.skipped) process.stdout.write(`skipped ${s.what}: ${s.why}\n`);
    if (args.flags.has('dry-run')) {
      for (const n of found.netns) process.stdout.write(`would remove netns ${n}\n`);
      for (const d of found.dirs) process.stdout.write(`would remove dir ${d}\n`);
      if (!found.netns.length && !found.dirs.length) process.stdout.write(`nothing to clean up for prefix ${prefix}\n`);
      return 0;
    }
    const r = await removeLeftovers(found);
    for (const w of r.removed) process.stdout.write(`removed ${w}\n`);
    for (const f of r.failed) process.stderr.write(`podwire cleanup: could not remove ${f.what}: ${f.error.message}${f.error.code ? ` [${f.error.code}]` : ''}\n`);
    if (!r.removed.length && !r.failed.length) process.stdout.write(`nothing to clean up for prefix ${prefix}\n`);
    return r.failed.length ? 1 : 0;
  },
};
