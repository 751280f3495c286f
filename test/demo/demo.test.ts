// The README's main command, run small in CI: it must pass its own checks
// with both backends, leave nothing behind, and fail loudly when it should.
import { readdirSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../lib/cli/main.js';
import { startApp } from '../../lib/demo/app.js';
import { runChecks } from '../../lib/demo/checks.js';
import { runDemo } from '../../lib/demo/run.js';
import { buildNode, createPod, describeExternal, removeNetns } from '../../lib/demo/topology.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { privileged } from '../helpers/privileged.js';

const leftovers = (prefix: string) => readdirSync('/run/netns').filter((n) => n.startsWith(prefix));

describe.skipIf(!privileged('nft', 'iptables-restore', 'ipset'))('podwire demo', () => {
  for (const backend of ['nftables', 'iptables'] as const) {
    it(`enrolls every pod and passes every traffic check (${backend})`, async () => {
      const prefix = `pwt-${process.pid}-demo-${backend.slice(0, 3)}-`;
      const report = await runDemo({ pods: 4, backend, prefix });
      expect(report.failures).toEqual([]);
      expect(report.ok).toBe(true);
      expect(report.enrolled).toBe(4);
      const names = report.checks.map((c) => c.name);
      expect(names).toEqual(['outbound-v4', 'outbound-v6', 'inbound', 'dns-udp', 'dns-tcp', 'probe-v4', 'probe-v6', 'ztunnel-mark']);
      for (const c of report.checks) expect(c, c.name).toMatchObject({ passed: 4, failed: 0 });
      // What the peer saw must add up with what the checks sent: 2 outbound per pod, 1 inbound, 2 DNS, 1 marked.
      expect(report.capturedByPort).toEqual({ 15001: 8, 15006: 4, 15008: 4, 15053: 8 });
      expect(report.probesBypassed).toBe(8);
      expect(leftovers(prefix)).toEqual([]);
    });
  }

  it('prints a summary through the CLI and validates its flags', async () => {
    let out = '';
    let err = '';
    const o = vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
    const e = vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
    try {
      expect(await main(['demo', '--pods', 'many'])).toBe(2);
      expect(await main(['demo', '--backend', 'pf'])).toBe(2);
      expect(err).toContain('--pods must be a number');
      expect(await main(['demo', '--pods', '2', '--json', '--no-ipv6', '--prefix', `pwt-${process.pid}-cli-`])).toBe(0);
    } finally {
      o.mockRestore();
      e.mockRestore();
    }
    const report = JSON.parse(out) as { ok: boolean; checks: Array<{ name: string }> };
    expect(report.ok).toBe(true);
    expect(report.checks.map((c) => c.name)).not.toContain('outbound-v6');
  });

  it('an interrupted run tears down everything it made', async () => {
    const prefix = `pwt-${process.pid}-demo-int-`;
    const ac = new AbortController();
    const run = runDemo({ pods: 40, backend: 'nftables', prefix, signal: ac.signal,
      progress: (stage, done) => { if (stage === 'enrolling' && done >= 5) ac.abort(); } });
    await expect(run).rejects.toMatchObject({ code: 'ABORT_ERR' });
    expect(leftovers(prefix)).toEqual([]);
  });

  it('its checks fail on a node whose pods are not enrolled (they are not hollow)', async () => {
    const prefix = `pwt-${process.pid}-demo-neg-`;
    const node = await buildNode({ prefix, pods: 2 });
    const ext = describeExternal(prefix);
    const opened: Netns[] = [];
    try {
      await createPod(node.node, ext);
      const pods = node.pods.map((pod) => ({ pod, ns: Netns.open(pod.netnsPath) }));
      const extNs = Netns.open(ext.netnsPath);
      opened.push(extNs, ...pods.map((p) => p.ns));
      const apps = await Promise.all(pods.map((p) => startApp(p.ns, p.pod.name)));
      try {
        const results = await runChecks({ node: node.node, external: { ns: extNs, pod: ext }, pods, ipv6: true });
        for (const c of results) expect(c, c.name).toMatchObject({ passed: 0, failed: 2 });
        expect(results.find((c) => c.name === 'outbound-v4')!.failures[0]).toContain('app pod=');
        expect(results.find((c) => c.name === 'probe-v4')!.failures[0]).toContain('10.244.0.1');
      } finally {
        for (const a of apps) a.close();
      }
    } finally {
      for (const ns of opened) ns.close();
      await removeNetns(ext.netnsName);
      await node.teardown();
    }
    expect(leftovers(prefix)).toEqual([]);
  }, 30_000);
});
