// `podwire ipset ...` end to end through the CLI entry point, in a fresh netns.
import { writeFileSync, rmSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../../lib/cli/main.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '', err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s) => { out += String(s); return true; });
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s) => { err += String(s); return true; });
  try {
    return { code: await main(argv), out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

const file = `/tmp/pwt-ipset-cli-${process.pid}.txt`;
afterEach(() => rmSync(file, { force: true }));

describe('podwire ipset usage errors (no root needed)', () => {
  it('rejects bad invocations with exit code 2 and the usage text', async () => {
    for (const argv of [[], ['frob'], ['create', 's'], ['create', 's', 'bitmap:ip'], ['add', 's'], ['test', 's', 'a', 'b'],
      ['list', '--family', 'inet'], ['create', 's', 'hash:ip', '--timeout', 'soon'], ['destroy', 's', 'extra']]) {
      const r = await run('ipset', ...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err).toContain('Usage: podwire ipset');
    }
  });
});

describe.skipIf(!privileged('ipset'))('podwire ipset (real kernel)', () => {
  it('creates, adds from a file with a comment, lists, saves like ipset save, tests, deletes and destroys', async () => {
    const ns = await freshNetns();
    const n = ['--netns', ns.name];
    expect((await run('ipset', 'create', 'cli', 'hash:ip', '--comment', ...n)).code).toBe(0);
    writeFileSync(file, '# pods\n10.1.0.1\n\n10.1.0.2\n');
    expect((await run('ipset', 'add', 'cli', '10.1.0.3', '--file', file, '--comment', 'pod-uid', ...n)).code).toBe(0);
    const saved = await run('ipset', 'save', 'cli', ...n);
    expect(saved.code).toBe(0);
    const real = await ns.spawn(['ipset', 'save', 'cli']);
    const adds = (t: string) => t.split('\n').filter((l) => l.startsWith('add ')).sort();
    expect(adds(saved.out)).toEqual(adds(real.stdout));
    expect(adds(saved.out)).toEqual(['10.1.0.1', '10.1.0.2', '10.1.0.3'].map((ip) => `add cli ${ip} comment "pod-uid"`));
    // Our save output restores with the real tool.
    const restored = await ns.spawn(['ipset', 'restore'], { stdin: saved.out.replace(/\bcli\b/g, 'cli2') });
    expect(restored.stderr).toBe('');
    expect(adds((await ns.spawn(['ipset', 'save', 'cli2'])).stdout)).toHaveLength(3);

    const listed = await run('ipset', 'list', 'cli', '--json', ...n);
    expect(JSON.parse(listed.out).header).toMatchObject({ name: 'cli', type: 'hash:ip', comment: true, entries: 3 });
    expect((await run('ipset', 'test', 'cli', '10.1.0.2', ...n)).code).toBe(0);
    expect((await run('ipset', 'test', 'cli', '10.1.0.9', ...n)).code).toBe(1);
    const dup = await run('ipset', 'add', 'cli', '10.1.0.2', ...n);
    expect(dup.code).toBe(1);
    expect(dup.err).toContain('[IPSET_ERR_EXIST in IPSET_CMD_ADD]');
    expect((await run('ipset', 'del', 'cli', '10.1.0.2', '10.1.0.3', ...n)).code).toBe(0);
    expect(JSON.parse((await run('ipset', 'list', 'cli', '--json', ...n)).out).entries).toEqual([{ address: '10.1.0.1', comment: 'pod-uid' }]);
    expect((await run('ipset', 'destroy', 'cli', ...n)).code).toBe(0);
    expect((await run('ipset', 'destroy', 'cli', ...n)).code).toBe(1);
    expect((await run('ipset', 'destroy', 'cli', '--exist', ...n)).code).toBe(0);
  });
});
