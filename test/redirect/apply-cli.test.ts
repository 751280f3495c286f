// `podwire rules apply|verify|remove` in-process against a real netns.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { iptables } from '../../lib/net/xtables/iptables.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const run = runCli;

afterEach(() => vi.restoreAllMocks());

describe.skipIf(!privileged('nft', 'iptables-restore'))('podwire rules apply|verify|remove', () => {
  it('applies, verifies, reports drift with exit 1, and removes (iptables)', async () => {
    const ns = await freshNetns();
    const flags = ['--kind', 'inpod', '--backend', 'iptables', '--netns', ns.name, '--no-dns-capture'];
    const a = await run('rules', 'apply', ...flags);
    expect(a.code, a.err).toBe(0);
    // A new netns gets the iptables-nft rules as one replayed nf_tables batch (iptables-restore otherwise).
    expect(a.out).toMatch(/iptables-restore ipv4|nf_tables batch \(iptables-nft rules, ipv4\)/);
    expect((await run('rules', 'apply', ...flags)).out).toContain('unchanged');
    expect(await run('rules', 'verify', ...flags)).toMatchObject({ code: 0, out: 'ok: no drift\n' });
    await iptables.run(ns, ['-t', 'nat', '-F', 'ISTIO_PRERT']);
    const v = await run('rules', 'verify', '--kind', 'inpod', '--netns', ns.path, '--no-dns-capture');
    expect(v.code).toBe(1);
    expect(v.out).toContain('missing rule: ipv4 nat ISTIO_PRERT -s 169.254.7.127/32 -p tcp -m tcp -j ACCEPT');
    // Another configuration than the one applied is drift too.
    expect((await run('rules', 'verify', ...flags.filter((f) => f !== '--no-dns-capture'))).code).toBe(1);
    const r = await run('rules', 'remove', ...flags);
    expect(r.code).toBe(0);
    expect(r.out).toContain('removed chain ipv4 nat ISTIO_OUTPUT');
    expect((await run('rules', 'remove', ...flags)).out).toBe('nothing to remove\n');
  });

  it('nftables round trip, and failures exit non-zero', async () => {
    const ns = await freshNetns();
    const flags = ['--kind', 'sidecar', '--backend', 'nftables', '--netns', ns.name, '--annotation', 'sidecar.istio.io/interceptionMode=TPROXY'];
    expect((await run('rules', 'apply', ...flags)).code).toBe(0);
    expect((await run('rules', 'verify', ...flags)).code).toBe(0);
    expect((await run('rules', 'remove', ...flags)).out).toContain('removed table inet istio-proxy-mangle');
    expect((await run('rules', 'apply', '--kind', 'inpod', '--backend', 'nftables', '--netns', 'pwt-no-such-netns')).code).toBe(1);
    // nft cannot express --socket-exists without the kubelet's UID: a clear error, nothing applied.
    const h = await run('rules', 'apply', '--kind', 'hostprobe', '--backend', 'nftables', '--netns', ns.name);
    expect(h.code).toBe(1);
    expect(h.err).toContain('kubeletUid');
    expect((await run('rules', 'apply', '--kind', 'inpod', '--backend', 'iptables', '--netns', ns.name, '--iptables-mode', 'xt')).code).toBe(2);
  });
});
