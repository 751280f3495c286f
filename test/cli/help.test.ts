// `podwire --help`, each command's --help, and the README's command list agree.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** Command names of the README's CLI block (```…``` under "## CLI"). */
function readmeCommands(): string[] {
  const section = README.slice(README.indexOf('\n## CLI\n'));
  const block = /```\n([\s\S]*?)```/.exec(section)![1]!;
  return block.split('\n').map((l) => /^podwire (\S+)/.exec(l)?.[1]).filter((c): c is string => c !== undefined);
}

async function helpCommands(): Promise<string[]> {
  const r = await runCli('--help');
  expect(r.code).toBe(0);
  const list = r.out.slice(r.out.indexOf('Commands:\n') + 'Commands:\n'.length).split('\n\n')[0]!;
  return list.split('\n').map((l) => l.trim().split(/\s+/)[0]!);
}

describe('help and README', () => {
  it('podwire --help lists cleanup, and every listed command has its own --help', async () => {
    const commands = await helpCommands();
    expect(commands).toContain('cleanup');
    for (const c of commands) {
      const r = await runCli(c, '--help');
      expect(r.code, c).toBe(0);
      expect(r.out, c).toContain(`Usage: podwire ${c}`);
    }
    const demo = await runCli('demo', '--help');
    expect(demo.out).toContain('podwire cleanup');
  });

  it('the README lists exactly the commands of podwire --help, in the same order', async () => {
    expect(readmeCommands()).toEqual(await helpCommands());
  });

  it.each(['cleanup', 'demo'])('the README documents %s as its usage line reads', async (c) => {
    const usage = (await runCli(c, '--help')).out.split('\n').find((l) => l.startsWith('Usage: '))!.slice('Usage: '.length);
    expect(README.split('\n')).toContainEqual(expect.stringMatching(new RegExp(`^${usage.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\s{2,}.*)?$`)));
  });
});
