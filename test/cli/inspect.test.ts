import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { freshNetns, ip } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const capture = (argv: string[]) => runCli(...argv);

describe('podwire CLI', () => {
  it('prints help without a command and fails on an unknown one', async () => {
    const help = await capture([]);
    expect(help.code).toBe(0);
    expect(help.out).toContain('inspect');
    const bad = await capture(['frobnicate']);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('unknown command');
  });

  it('rejects unknown options with a usage error', async () => {
    const r = await capture(['inspect', '--colour']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('unknown option --colour');
    expect(r.err).toContain('Usage: podwire inspect');
  });
});

describe.skipIf(!privileged())('podwire inspect', () => {
  it('shows what ip shows, as tables and as JSON', async () => {
    const ns = await freshNetns();
    ip(ns.name, 'link', 'add', 'ins0', 'type', 'veth', 'peer', 'name', 'ins1');
    ip(ns.name, 'addr', 'add', '10.66.0.1/24', 'dev', 'ins0');
    ip(ns.name, 'route', 'add', 'local', 'default', 'dev', 'lo', 'table', '100');
    ip(ns.name, 'rule', 'add', 'fwmark', '0x111/0xfff', 'lookup', '100', 'pref', '32764');
    const text = await capture(['inspect', '--netns', ns.name]);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/ins0\s+veth/);
    expect(text.out).toContain('10.66.0.1/24');
    expect(text.out).toMatch(/100\s+local\s+default/);
    expect(text.out).toMatch(/32764\s+from all fwmark 0x111\/0xfff\s+lookup\s+100/);
    const json = await capture(['inspect', '--netns', ns.path, '--json']);
    const doc = JSON.parse(json.out) as { netns: { ino: number }; links: Array<{ name: string }>; rules: Array<{ priority: number }> };
    expect(doc.netns.ino).toBe(ns.id.ino);
    expect(doc.links.map((l) => l.name).sort()).toEqual(['ins0', 'ins1', 'lo']);
    expect(doc.rules.some((r) => r.priority === 32764)).toBe(true);
    const missing = await capture(['inspect', '--netns', 'pwt-does-not-exist']);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('ENOENT');
  });
});
