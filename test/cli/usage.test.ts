// Usage errors of every command: exit 2 at once, with a message naming the
// bad flag or argument (the CLI's user-facing contract) and the usage text.
// Nothing here needs root: every invocation is rejected before any netns is
// opened, and --netns names a pwt- namespace that does not exist, so even a
// regression that lets one through touches nothing.
import { describe, expect, it } from 'vitest';
import { runCli, spawnCli } from '../helpers/cli.js';

const NONE = `pwt-${process.pid}-usage-none`;

// [argv, text the message must contain]
const cases: Array<[string[], string]> = [
  [['inspect', 'stray'], 'stray'],
  [['inspect', '--netns', ''], '--netns'],
  [['inspect', '--netns='], '--netns'],
  [['inspect', '--json', '--netns', NONE, 'x', 'y'], '"x"'],
  [['ipset', 'list', '--netns', ''], '--netns'],
  [['ipset', 'add', 's', '1.2.3.4.5', '--netns', NONE], '1.2.3.4.5'],
  [['ipset', 'test', 's', '10.0.0.1/33', '--netns', NONE], '10.0.0.1/33'],
  [['ipset', 'add', 's', '10.0.0.1,tcp:70000', '--netns', NONE], '10.0.0.1,tcp:70000'],
  [['ipset', 'del', 's', 'fd00::1/129', '--netns', NONE], 'fd00::1/129'],
  [['ipset', 'add', 's', 'not-an-ip', '--netns', NONE], 'not-an-ip'],
  [['ipset', 'save', 's', 'extra', '--netns', NONE], 'extra'],
  [['nft', 'apply', '--netns', '', '/dev/null'], '--netns'],
  [['nft', 'list', '--netns', NONE, '--table', 'inet', 'x', 'y'], '"y"'],
  [['nft', 'stray'], 'stray'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'nftables', '--netns', NONE], '--netns'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'nftables', '--iptables-mode', 'nft'], '--iptables-mode'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'nftables', '--snat-ip', 'bogus'], '--snat-ip'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'nftables', '--snat-ip', 'fd00::1'], '--snat-ip'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'nftables', '--snat-ipv6', '10.0.0.1'], '--snat-ipv6'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'nftables', '--virtual-interfaces', ''], '--virtual-interfaces'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'nftables', '--virtual-interfaces', 'a,,b'], '--virtual-interfaces'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'iptables', '--kubelet-uid', '5'], '--kubelet-uid'],
  [['rules', 'render', '--kind', 'inpod', '--backend', 'iptables', '--proxy-uid', '5'], '--proxy-uid'],
  [['rules', 'render', '--kind', 'hostprobe', '--backend', 'iptables', '--annotation', 'a=b'], '--annotation'],
  [['rules', 'render', '--kind', 'sidecar', '--backend', 'iptables', '--no-dns-capture'], '--no-dns-capture'],
  [['rules', 'render', '--kind', 'sidecar', '--backend', 'iptables', '--proxy-uid', '99999999999'], '--proxy-uid'],
  [['rules', 'render', 'stray', '--kind', 'inpod', '--backend', 'iptables'], 'render'],
  [['rules', 'apply', '--kind', 'inpod', '--backend', 'iptables', '--netns', NONE, '--iptables-mode', 'xt'], '--iptables-mode'],
  // Longer than cleanup's 31 characters (a name it could not match); pwt-, so even a run that got through stays in test names.
  [['demo', '--pods', '1', '--prefix', `pwt-${'x'.repeat(30)}-`], '--prefix'],
  [['demo', '--pods', '1', '--prefix', `pwt-${'x'.repeat(40)}-`], '--prefix'],
  [['demo', '--pods', '1', '--prefix', ''], '--prefix'],
  [['demo', '--pods', '', '--prefix', `pwt-${process.pid}-u-`], '--pods'],
  [['cleanup', 'stray'], 'stray'],
  [['cleanup', '--prefix', ''], '--prefix'],
  [['cleanup', '--prefix', 'A'], '--prefix'],
  [['cleanup', '--prefix', 'a'], '--prefix'],
  [['cleanup', '--prefix', '-pwt'], '--prefix'],
  [['cleanup', '--prefix', '../etc'], '--prefix'],
  [['cleanup', '--prefix', 'pwt/x'], '--prefix'],
  [['cleanup', '--prefix', 'x'.repeat(32)], '--prefix'],
  [['cleanup', '--dry-run=yes'], '--dry-run'],
];

describe('usage errors exit 2 at once and name what is wrong', () => {
  it.each(cases)('podwire %j', async (argv, names) => {
    const r = await runCli(...argv);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain(names);
    expect(r.err).toContain(`Usage: podwire ${argv[0]}`);
    expect(r.out).toBe('');
  });
});

// ztunnel-sim retries connecting forever, so it runs as a child: a flag it
// failed to reject would show as a kill at the timeout (code null), not a hang of the suite.
describe('podwire ztunnel-sim rejects bad values instead of retrying forever', () => {
  const bad: Array<[string[], string]> = [
    [['--socket', ''], '--socket'],
    [['--socket='], '--socket'],
    [['--socket', '@'], '--socket'],
    [['--socket', `/tmp/${'s'.repeat(200)}`], '--socket'],      // longer than sun_path
    [['--socket', `/tmp/${'s'.repeat(103)}`], '--socket'],      // 108 bytes: no room for the NUL
    [['--socket', `@${'s'.repeat(108)}`], '--socket'],
    [['--ack-delay', ''], '--ack-delay'],
    [['--ack-delay', '0x10'], '--ack-delay'],
    [['--ack-delay', '99999999999'], '--ack-delay'],
    [['--close-after', '-1'], '--close-after'],
    [['--crash-mid-snapshot', '1.5'], '--crash-mid-snapshot'],
    [['--nack', ''], '--nack'],
    [['--reconnect-max', '0'], '--reconnect-max'],
    [['--reconnect-max', '1e3'], '--reconnect-max'],
    [['stray'], 'stray'],
  ];
  it.each(bad)('ztunnel-sim %j', async (args, names) => {
    const r = await spawnCli(['ztunnel-sim', '--no-listeners', ...args], { timeoutMs: 10_000 }).done;
    expect(r.code, `${r.out}${r.err}`).toBe(2);
    expect(r.err).toContain(names);
  }, 20_000);

  it('accepts the longest path sun_path holds (107 bytes) and keeps retrying it', async () => {
    // Killed once it has reported a failed attempt (and so is retrying), however long its start took.
    const p = spawnCli(['ztunnel-sim', '--no-listeners', '--socket', `/tmp/pwt-${process.pid}-${'s'.repeat(107 - `/tmp/pwt-${process.pid}-`.length)}`], { timeoutMs: 60_000 });
    let seen = '';
    p.child.stdout!.on('data', (d: string) => {
      seen += d;
      if (seen.includes('connect-failed')) p.child.kill('SIGKILL');
    });
    const r = await p.done;
    expect(r.signal, `${r.out}${r.err}`).toBe('SIGKILL');  // still running: a valid name is retried, as ztunnel does
    expect(r.out).toContain('connect-failed');
    expect(r.out).toContain('ENOENT');
  }, 90_000);
});
