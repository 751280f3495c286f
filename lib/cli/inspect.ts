// `podwire inspect`: links, addresses, routes and policy rules of a netns.
import { Netns } from '../net/netns/netns.js';
import { noExtraPositionals, parseArgs } from './args.js';
import type { Command } from './main.js';
import { table } from './table.js';

const hex = (n: number | undefined) => (n === undefined ? undefined : `0x${n.toString(16)}`);

export const command: Command = {
  summary: 'Show the links, addresses, routes and policy rules of a network namespace.',
  usage: [
    'Usage: podwire inspect [--netns NAME|PATH|PID] [--json]',
    '',
    '  --netns X   a name under /run/netns, a path to a netns file, or a pid (default: this process\'s netns)',
    '  --json      print one JSON object instead of tables',
  ].join('\n'),
  async run(argv) {
    const args = parseArgs(argv, { booleans: ['json'], strings: ['netns'] });
    noExtraPositionals(args);
    const ref = args.values.get('netns');
    const ns = ref === undefined ? Netns.current() : Netns.resolve(ref);
    try {
      const nl = await ns.netlink();
      const [links, addrs, routes, rules] = await Promise.all([
        nl.links.list(), nl.addrs.list(), nl.routes.list({ table: 'all' }), nl.rules.list(),
      ]);
      if (args.flags.has('json')) {
        process.stdout.write(`${JSON.stringify({ netns: { path: ns.path, ...ns.id }, links, addrs, routes, rules }, null, 2)}\n`);
        return 0;
      }
      const names = new Map(links.map((l) => [l.index, l.name]));
      const out = [
        `netns ${ns.path} (dev ${ns.id.dev}, inode ${ns.id.ino})`,
        '',
        'Links',
        table(['idx', 'name', 'kind', 'state', 'mtu', 'address', 'master', 'flags'],
          links.map((l) => [l.index, l.name, l.kind, l.operstate, l.mtu, l.address,
            l.master ? names.get(l.master) ?? l.master : undefined, l.flags.join(',')])),
        '',
        'Addresses',
        table(['dev', 'family', 'address', 'scope', 'flags'],
          addrs.map((a) => [names.get(a.index) ?? a.index, `inet${a.family === 6 ? '6' : ''}`, a.cidr, a.scope, a.flags.join(',')])),
        '',
        'Routes',
        table(['table', 'type', 'dst', 'gateway', 'dev', 'scope', 'proto', 'metric', 'src'],
          routes.map((r) => [r.table, r.type, r.dst, r.gateway, r.dev ?? r.ifindex, r.scope, r.protocol, r.metric, r.src])),
        '',
        'Policy rules',
        table(['family', 'pref', 'match', 'action', 'table'],
          rules.map((r) => [`inet${r.family === 6 ? '6' : ''}`, r.priority,
            [r.not ? 'not' : '', r.src ? `from ${r.src}` : 'from all', r.dst ? `to ${r.dst}` : '',
              r.fwmark !== undefined ? `fwmark ${hex(r.fwmark)}${r.fwmask !== undefined ? `/${hex(r.fwmask)}` : ''}` : '',
              r.iif ? `iif ${r.iif}` : '', r.oif ? `oif ${r.oif}` : ''].filter(Boolean).join(' '),
            r.action, r.action === 'lookup' ? r.table : undefined])),
      ];
      process.stdout.write(`${out.join('\n')}\n`);
      return 0;
    } finally {
      ns.close();
    }
  },
};
