// `podwire demo`: the README's main command. A simulated mesh node on this
// machine, enrolled through the real pipeline and proven with real traffic.
import { cniAvailable } from '../demo/cni.js';
import { DEMO_PREFIX_FAMILY, findLeftovers } from '../demo/leftovers.js';
import { runDemo, type DemoReport } from '../demo/run.js';
import { noExtraPositionals, parseArgs, UsageError } from './args.js';
import { prefixOption } from './cleanup.js';
import type { Command } from './main.js';
import { table } from './table.js';

function bar(stage: string, done: number, total: number): string {
  const width = 30;
  const filled = total ? Math.round((done / total) * width) : width;
  return `${stage.padEnd(16)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`;
}

function summary(r: DemoReport): string {
  const lines = [
    '',
    `podwire demo — ${r.pods} pods, ${r.backend} backend: ${r.ok ? 'ALL CHECKS PASSED' : 'FAILED'}`,
    '',
    table(['', ''], [
      ['pods enrolled', `${r.enrolled}/${r.pods}`],
      ['enrollment p50 / p99', `${r.enrollMs.p50.toFixed(2)} ms / ${r.enrollMs.p99.toFixed(2)} ms (rules + ZDS ack + probe set)`],
      ['enrollment total', `${(r.enrollMs.total / 1000).toFixed(2)} s`],
      ['captured by ztunnel', Object.entries(r.capturedByPort).map(([p, n]) => `${p}: ${n}`).join(', ') || 'none'],
      ['probes bypassed (SNAT)', String(r.probesBypassed)],
      ['failures', String(r.failures.length)],
    ]).split('\n').slice(2).join('\n'),
    '',
    table(['check', 'passed', 'failed', 'what it proves'], r.checks.map((c) => [c.name, c.passed, c.failed, c.claim])),
  ];
  for (const f of r.failures.slice(0, 10)) lines.push(`  ✗ ${f}`);
  if (r.kept) {
    lines.push('', `Kept: node netns ${r.kept.node} and ${r.kept.pods.length} pod netns (the agent and ztunnel-sim stopped with the demo).`, 'Look around / tear down:');
    for (const c of r.kept.commands) lines.push(`  ${c}`);
  }
  return `${lines.join('\n')}\n`;
}

export const command: Command = {
  summary: 'Run a whole mesh node on this machine: enroll simulated pods and prove redirection with real traffic.',
  usage: [
    'Usage: podwire demo [--pods N] [--backend nftables|iptables] [--cni] [--no-ipv6] [--json] [--keep] [--prefix P]',
    '',
    '  --pods N        number of pods (default 20, up to 5000)',
    '  --backend B     nftables (default) or iptables',
    '  --cni           wire pods with the bridge + host-local CNI plugins (/usr/lib/cni)',
    '  --no-ipv6       IPv4 only (default: dual stack)',
    '  --json          print the report as JSON',
    '  --keep          leave the namespaces up afterwards (prints how to look around and tear down)',
    '  --prefix P      namespace name prefix (default pwdemo-<pid>-; 2-31 lowercase letters, digits, -)',
    '',
    'Everything lives in namespaces named pwdemo-<pid>-* (and a run dir in $TMPDIR); the machine\'s own',
    'network is never touched. After a run was killed (kill -9) or kept: podwire cleanup [--prefix P].',
    'Needs root (or CAP_NET_ADMIN + CAP_SYS_ADMIN). Exits non-zero if any check failed.',
  ].join('\n'),
  async run(argv) {
    const args = parseArgs(argv, { booleans: ['cni', 'json', 'keep', 'no-ipv6'], strings: ['pods', 'backend', 'prefix'] });
    const prefix = prefixOption(args);
    const podsText = args.values.get('pods') ?? '20';
    if (!/^\d+$/.test(podsText)) throw new UsageError(`--pods must be a number, got ${podsText}`);
    const pods = Number(podsText);
    if (pods < 1 || pods > 5000) throw new UsageError('--pods must be between 1 and 5000');
    const backend = args.values.get('backend') ?? 'nftables';
    if (backend !== 'nftables' && backend !== 'iptables') throw new UsageError(`--backend must be nftables or iptables, got ${backend}`);
    noExtraPositionals(args);
    if (args.flags.has('cni') && !cniAvailable()) throw new UsageError('--cni needs the bridge and host-local plugins in /usr/lib/cni (Debian: containernetworking-plugins)');
    const json = args.flags.has('json');
    const tty = process.stderr.isTTY === true && !json;
    if (prefix === undefined) {
      // Leftovers of killed default runs do not collide with this one (their names carry another pid):
      // say how to remove them, but leave them alone (a --keep run's namespaces are kept on purpose).
      const left = findLeftovers(DEMO_PREFIX_FAMILY);
      if (left.netns.length || left.dirs.length) {
        process.stderr.write(`podwire demo: earlier runs left ${left.netns.length} namespaces and ${left.dirs.length} directories behind; remove them with \`podwire cleanup\`\n`);
      }
    }
    const ac = new AbortController();
    // Stay subscribed until the end: a second Ctrl-C must not kill the teardown half-way.
    const onSignal = () => {
      process.stderr.write(ac.signal.aborted ? 'still tearing down...\n' : '\ninterrupted: tearing down...\n');
      ac.abort();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    let lastStage = '';
    try {
      const report = await runDemo({
        pods, backend, cni: args.flags.has('cni'), keep: args.flags.has('keep'), ipv6: !args.flags.has('no-ipv6'),
        ...(prefix !== undefined ? { prefix } : {}),
        signal: ac.signal,
        progress: (stage, done, total) => {
          if (json) return;
          if (tty) process.stderr.write(`\r${bar(stage, done, total)}${done === total ? '\n' : ''}`);
          else if (stage !== lastStage || done === total) process.stderr.write(`${bar(stage, done, total)}\n`);
          lastStage = stage;
        },
      });
      process.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : summary(report));
      return report.ok ? 0 : 1;
    } catch (err) {
      if (!ac.signal.aborted) throw err;
      process.stderr.write('podwire demo: interrupted; everything it made is removed\n');
      return 130;  // as a shell reports SIGINT
    } finally {
      process.removeListener('SIGINT', onSignal);
      process.removeListener('SIGTERM', onSignal);
    }
  },
};
