// `podwire nft`: usage errors, apply from a file, list as JSON, delete-table.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { UsageError } from '../../../lib/cli/args.js';
import { command } from '../../../lib/cli/nft.js';
import { nft, type NftRuleset } from '../../../lib/net/nft/tool.js';
import { ToolError } from '../../../lib/net/tool-error.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

let dir: string | undefined;
afterEach(() => {
  vi.restoreAllMocks();
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

function script(text: string): string {
  dir ??= mkdtempSync(join(tmpdir(), 'pwt-nftcli-'));
  const file = join(dir, `s${Math.random().toString(36).slice(2)}.nft`);
  writeFileSync(file, text);
  return file;
}

/** Runs the command with stdout/stderr captured. */
async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s) => { out += String(s); return true; });
  vi.spyOn(process.stderr, 'write').mockImplementation((s) => { err += String(s); return true; });
  try {
    return { code: await command.run(argv), out, err };
  } finally {
    vi.restoreAllMocks();
  }
}

describe('podwire nft usage', () => {
  it.each([
    [[]],
    [['frobnicate']],
    [['apply', 'file.nft']],                          // no --netns
    [['apply', '--netns', 'x']],                      // no FILE
    [['apply', '--netns', 'x', 'a', 'b']],
    [['apply', '--netns', 'x', '--bogus', 'f']],
    [['list', '--table', 'inet']],                    // NAME missing
    [['list', '--table', 'inet6', 'x']],
    [['list', 'extra']],
    [['delete-table', '--netns', 'x', 'inet']],
  ])('rejects %j with a UsageError', async (argv) => {
    await expect(command.run(argv)).rejects.toThrow(UsageError);
  });
});

describe.skipIf(!privileged('nft'))('podwire nft in a netns', () => {
  it('applies a file, lists it as JSON, deletes the table', async () => {
    const ns = await freshNetns();
    const file = script('add table inet cli\nadd chain inet cli c { type filter hook input priority 0 ; }\nadd rule inet cli c tcp dport 22 accept\n');
    expect((await run(['apply', '--netns', ns.name, file])).code).toBe(0);

    const listed = await run(['list', '--netns', ns.name, '--json']);
    const rs = JSON.parse(listed.out) as NftRuleset;
    expect(rs).toEqual(JSON.parse(JSON.stringify(await nft.list(ns))));
    expect(rs.tables[0]!.chains[0]!.rules).toHaveLength(1);

    const text = await run(['list', '--netns', ns.name, '--table', 'inet', 'cli']);
    expect(text.out).toMatch(/^table inet cli \{/);

    expect((await run(['delete-table', '--netns', ns.name, 'inet', 'cli'])).code).toBe(0);
    expect((await run(['delete-table', '--netns', ns.name, 'inet', 'cli'])).code).toBe(0);
    expect((await nft.list(ns)).tables).toEqual([]);
  });

  it('points at the failing line of the file and rethrows the typed error', async () => {
    const ns = await freshNetns();
    const file = script('add table inet cli\nadd chain inet cli c\nadd rule inet cli c tcp dportx 22 accept\n');
    let err: unknown;
    let stderr = '';
    vi.spyOn(process.stderr, 'write').mockImplementation((s) => { stderr += String(s); return true; });
    try {
      await command.run(['apply', '--netns', ns.name, file]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ToolError);
    expect(err).toMatchObject({ line: 3, column: 25 });
    expect(stderr).toContain(`${file}:3:25:\n  add rule inet cli c tcp dportx 22 accept\n${' '.repeat(26)}^^^^^^\n`);
    expect((await nft.list(ns)).tables).toEqual([]);
  });
});
