// iptables-restore / iptables-save / iptables run inside fresh netns, with both
// backends and both families, cross-checked against the tools themselves.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { NetError } from '../../../lib/net/errors.js';
import { iptables, type IpFamily, type IptablesMode } from '../../../lib/net/xtables/iptables.js';
import { parseSave, type SavedTable } from '../../../lib/net/xtables/parse.js';
import { ToolError } from '../../../lib/net/tool-error.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

const fixture = (name: string) => readFileSync(new URL(`../../fixtures/${name}`, import.meta.url), 'utf8');
const ISTIO: Record<IpFamily, string> = {
  4: fixture('istio-iptables-default.restore'),
  6: fixture('istio-iptables-default-v6.restore'),
};

/** Rules per table/chain in restore input (`-A CHAIN ...` lines). */
function countInput(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  let table = '';
  for (const line of text.split('\n')) {
    if (line.startsWith('*')) table = line.slice(1).trim();
    const m = /^-A (\S+)/.exec(line);
    if (m) out[`${table}/${m[1]}`] = (out[`${table}/${m[1]}`] ?? 0) + 1;
  }
  return out;
}

const byName = (tables: SavedTable[]) => [...tables].sort((a, b) => a.name.localeCompare(b.name));

const tool = (family: IpFamily, mode: IptablesMode, what: string) =>
  `${family === 6 ? 'ip6tables' : 'iptables'}-${mode}-${what}`;

async function toolError(p: Promise<unknown>): Promise<ToolError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ToolError);
  expect(err).toBeInstanceOf(NetError);
  return err as ToolError;
}

const MATRIX: Array<[IptablesMode, IpFamily]> = [['nft', 4], ['nft', 6], ['legacy', 4], ['legacy', 6]];

describe.skipIf(!privileged('iptables-legacy-restore', 'iptables-nft-restore', 'ip6tables-legacy-restore', 'ip6tables-nft-restore'))('iptables in a netns', () => {
  describe.each(MATRIX)('%s backend, IPv%i', (mode, family) => {
    it('restores Istio\'s in-pod ruleset and saves it back identically to the tool, then round-trips the saved text', async () => {
      const ns = await freshNetns();
      await iptables.restore(ns, ISTIO[family], { family, mode });

      const saved = await iptables.save(ns, { family, mode });
      // Cross-check against the tool run by `ip netns exec`.
      const byTool = execFileSync('ip', ['netns', 'exec', ns.name, tool(family, mode, 'save')], { encoding: 'utf8' });
      expect(saved).toEqual(parseSave(byTool));

      expect(saved.map((t) => t.name).sort()).toEqual(['mangle', 'nat', 'raw']);
      const counted: Record<string, number> = {};
      for (const t of saved) for (const c of t.chains) if (c.rules.length) counted[`${t.name}/${c.name}`] = c.rules.length;
      expect(counted).toEqual(countInput(ISTIO[family]));
      const nat = saved.find((t) => t.name === 'nat')!;
      expect(nat.chains.find((c) => c.name === 'PREROUTING')).toMatchObject({ policy: 'ACCEPT', counters: { packets: 0, bytes: 0 } });
      const prert = nat.chains.find((c) => c.name === 'ISTIO_PRERT')!;
      expect(prert.policy).toBeNull();
      expect(prert.rules.some((r) => r.args.join(' ').endsWith('-j REDIRECT --to-ports 15006'))).toBe(true);

      // The saved text is valid restore input: a second netns ends up identical
      // (legacy lists tables in the order the netns created them, so sort).
      const other = await freshNetns();
      await iptables.restore(other, await iptables.saveText(ns, { family, mode }), { family, mode, noflush: false });
      expect(byName(await iptables.save(other, { family, mode }))).toEqual(byName(saved));
    });

    it('reports the input line of a syntax error, by code and fields', async () => {
      const ns = await freshNetns();
      const input = '*filter\n:FOO - [0:0]\n-A INPUT -j ACCEPT\n-A INPUT -p tcp --no-such-option 5 -j ACCEPT\nCOMMIT\n';
      const err = await toolError(iptables.restore(ns, input, { family, mode }));
      expect(err).toMatchObject({
        op: family === 6 ? 'ip6tables-restore' : 'iptables-restore',
        code: 'XTABLES_PARAMETER_PROBLEM',
        exitCode: 2,
        line: 4,
        lineText: '-A INPUT -p tcp --no-such-option 5 -j ACCEPT',
        tool: tool(family, mode, 'restore'),
      });
      expect(err.stderr).not.toBe('');
      // Nothing from the failed table was committed.
      expect((await iptables.save(ns, { family, mode, table: 'filter' }).catch(() => []))
        .flatMap((t) => t.chains.map((c) => c.name))).not.toContain('FOO');
    });

    it('reports the -N line when the ruleset is applied twice (chain exists)', async () => {
      const ns = await freshNetns();
      await iptables.restore(ns, ISTIO[family], { family, mode });
      const err = await toolError(iptables.restore(ns, ISTIO[family], { family, mode }));
      expect(err.code).toBe('XTABLES_OTHER_PROBLEM');
      expect(err.line).toBe(2);
      expect(err.lineText).toBe('-N ISTIO_PRERT');
    });

    it('runs single commands and checks rules', async () => {
      const ns = await freshNetns();
      const rule = ['-p', 'tcp', '--dport', '8080', '-m', 'comment', '--comment', 'two words', '-j', 'ACCEPT'];
      expect(await iptables.check(ns, 'filter', 'INPUT', rule, { family, mode })).toBe(false);
      expect(await iptables.check(ns, 'filter', 'NOCHAIN', rule, { family, mode })).toBe(false);
      expect((await toolError(iptables.check(ns, 'nosuch', 'INPUT', rule, { family, mode }))).code).toBe('XTABLES_VERSION_PROBLEM');
      await iptables.run(ns, ['-t', 'filter', '-A', 'INPUT', ...rule], { family, mode });
      expect(await iptables.check(ns, 'filter', 'INPUT', rule, { family, mode })).toBe(true);
      const [filter] = await iptables.save(ns, { family, mode, table: 'filter' });
      expect(filter!.chains.find((c) => c.name === 'INPUT')!.rules.map((r) => r.args)).toEqual([
        ['-p', 'tcp', '-m', 'tcp', '--dport', '8080', '-m', 'comment', '--comment', 'two words', '-j', 'ACCEPT'],
      ]);
      const err = await toolError(iptables.run(ns, ['-t', 'filter', '-A', 'NOCHAIN', '-j', 'ACCEPT'], { family, mode }));
      expect(err.op).toBe(family === 6 ? 'ip6tables' : 'iptables');
      expect(err.line).toBeUndefined();
      expect(err.exitCode).not.toBe(0);
    });
  });

  it('keeps legacy and nft rules apart in one netns', async () => {
    const ns = await freshNetns();
    await iptables.restore(ns, '*filter\n-A INPUT -p udp -j DROP\nCOMMIT\n', { mode: 'legacy' });
    expect(await iptables.save(ns, { mode: 'nft' })).toEqual([]);
    expect((await iptables.save(ns, { mode: 'legacy' }))[0]!.chains[0]!.rules[0]!.spec).toBe('-p udp -j DROP');
  });

  it('serialises legacy writers on the pod netns lock, not the host lock', async () => {
    const ns = await freshNetns();
    const rules = '*filter\n-A INPUT -p udp -j DROP\nCOMMIT\n';
    // Hold flock on the netns through its /run/netns path: the same inode our fd names.
    const holder = spawn('flock', [ns.path, 'sh', '-c', 'echo locked; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      await once(holder.stdout!, 'data');
      const err = await toolError(iptables.restore(ns, rules, { mode: 'legacy', wait: 1 }));
      expect(err.code).toBe('XTABLES_RESOURCE_PROBLEM');
      expect(err.exitCode).toBe(4);
    } finally {
      holder.stdin!.end();
      await once(holder, 'exit');
    }
    // With the host's lock held instead, pod work goes through.
    const host = spawn('flock', ['/run/xtables.lock', 'sh', '-c', 'echo locked; exec cat'], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      await once(host.stdout!, 'data');
      await iptables.restore(ns, rules, { mode: 'legacy', wait: 1 });
    } finally {
      host.stdin!.end();
      await once(host, 'exit');
    }
    expect((await iptables.save(ns, { mode: 'legacy' }))[0]!.chains[0]!.rules).toHaveLength(1);
  });

  it('rejects bad options in TS before running anything', async () => {
    const ns = await freshNetns();
    await expect(iptables.restore(ns, '', { family: 5 as IpFamily })).rejects.toThrow(RangeError);
    await expect(iptables.restore(ns, '', { mode: 'xt' as IptablesMode })).rejects.toThrow(RangeError);
    await expect(iptables.restore(ns, '', { wait: -1 })).rejects.toThrow(RangeError);
    await expect(iptables.restore(ns, '', { table: 'nat; rm' })).rejects.toThrow(TypeError);
    await expect(iptables.run(ns, ['-L', 'a\0b'])).rejects.toThrow(TypeError);
  });
});
