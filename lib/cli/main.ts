// `podwire <command> ...`: dispatches to one module per subcommand, loaded on
// demand so that `podwire --help` needs no native addon.
import { UsageError } from './args.js';

export interface Command {
  summary: string;
  usage: string;
  run(argv: string[]): Promise<number>;
}

// One line per subcommand: its module (which exports `command: Command`) and
// a one-line summary for `podwire --help` (kept here so help loads nothing).
const COMMANDS: Record<string, { load: () => Promise<{ command: Command }>; summary: string }> = {
  agent: { load: () => import('./agent.js'), summary: 'run the ambient node agent (Istio CNI compatible) until SIGTERM' },
  cleanup: { load: () => import('./cleanup.js'), summary: 'remove what a killed demo (or test run) left behind: netns, mounts, temp dirs' },
  demo: { load: () => import('./demo.js'), summary: 'a whole mesh node on this machine, proven with real traffic' },
  explain: { load: () => import('./explain.js'), summary: 'why a pod of this node is or is not in the mesh, and what to do' },
  install: { load: () => import('./install.js'), summary: 'print what the CNI installer would write: the merged conflist or the plugin entry' },
  inspect: { load: () => import('./inspect.js'), summary: 'links, addresses, routes and policy rules of a netns' },
  ipset: { load: () => import('./ipset.js'), summary: 'create, fill, list and save ipsets of a netns (netlink)' },
  nft: { load: () => import('./nft.js'), summary: 'apply nft scripts inside a netns and list its ruleset' },
  rules: { load: () => import('./rules.js'), summary: 'render, apply, verify or remove Istio redirection rules' },
  status: { load: () => import('./status.js'), summary: 'what the node agent on this node holds: readiness, backend, ztunnel, every pod' },
  'ztunnel-sim': { load: () => import('./ztunnel-sim.js'), summary: 'a ztunnel-like ZDS peer for nodes without ztunnel' },
};

function help(): string {
  return [
    'podwire — kernel-level traffic redirection for Kubernetes service meshes (Istio CNI compatible)',
    '',
    'Usage: podwire <command> [options]',
    '',
    'Commands:',
    ...Object.entries(COMMANDS).sort(([a], [b]) => a.localeCompare(b)).map(([name, c]) => `  ${name.padEnd(12)} ${c.summary}`),
    '',
    'Run `podwire <command> --help` for the options of one command; `podwire --version` prints the version.',
    'Needs Linux and root (or CAP_NET_ADMIN + CAP_SYS_ADMIN) for anything that touches a namespace.',
  ].join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(`${help()}\n`);
    return 0;
  }
  if ((name === '--version' && rest.length === 0) || (name === 'agent' && rest.length === 1 && rest[0] === '--version')) {
    // `agent --version` too: the DaemonSet's command is `podwire agent`, so that is what a probe appends.
    const { packageVersion } = await import('./version.js');
    process.stdout.write(`${packageVersion()}\n`);
    return 0;
  }
  const entry = COMMANDS[name];
  if (!entry) {
    process.stderr.write(`podwire: unknown command "${name}"\n\n${help()}\n`);
    return 2;
  }
  const { command } = await entry.load();
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(`${command.summary}\n\n${command.usage}\n`);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`podwire ${name}: ${err.message}\n${err.showUsage ? `\n${command.usage}\n` : ''}`);
      return 2;
    }
    const e = err as { message?: string; code?: string; op?: string };
    process.stderr.write(`podwire ${name}: ${e.message ?? String(err)}${e.code ? ` [${e.code}${e.op ? ` in ${e.op}` : ''}]` : ''}\n`);
    return 1;
  }
}
