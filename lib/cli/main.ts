// `podwire <command> ...`: dispatches to one module per subcommand, loaded on
// demand so that `podwire --help` needs no native addon.
import { UsageError } from './args.js';

export interface Command {
  summary: string;
  usage: string;
  run(argv: string[]): Promise<number>;
}

// One line per subcommand; each module exports `command: Command`.
const COMMANDS: Record<string, () => Promise<{ command: Command }>> = {
  demo: () => import('./demo.js'),
  inspect: () => import('./inspect.js'),
  'ztunnel-sim': () => import('./ztunnel-sim.js'),
  ipset: () => import('./ipset.js'),
  nft: () => import('./nft.js'),
  rules: () => import('./rules.js'),
};

function help(): string {
  return [
    'podwire — kernel-level traffic redirection for Kubernetes service meshes (Istio CNI compatible)',
    '',
    'Usage: podwire <command> [options]',
    '',
    'Commands:',
    ...Object.keys(COMMANDS).sort().map((name) => `  ${name}`),
    '',
    'Run `podwire <command> --help` for the options of one command.',
    'Needs Linux and root (or CAP_NET_ADMIN + CAP_SYS_ADMIN) for anything that touches a namespace.',
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${help()}\n`);
    return 0;
  }
  const load = COMMANDS[name];
  if (!load) {
    process.stderr.write(`podwire: unknown command "${name}"\n\n${help()}\n`);
    return 2;
  }
  const { command } = await load();
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(`${command.summary}\n\n${command.usage}\n`);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`podwire ${name}: ${err.message}\n\n${command.usage}\n`);
      return 2;
    }
    const e = err as { message?: string; code?: string; op?: string };
    process.stderr.write(`podwire ${name}: ${e.message ?? String(err)}${e.code ? ` [${e.code}${e.op ? ` in ${e.op}` : ''}]` : ''}\n`);
    return 1;
  }
}
