// nft -f / nft -j list / table deletion inside fresh netns, cross-checked
// against the nft binary run through `ip netns exec`.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NetError } from '../../../lib/net/errors.js';
import { nft, parseRuleset, type NftRuleset } from '../../../lib/net/nft/tool.js';
import { ToolError } from '../../../lib/net/tool-error.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

const GOLDEN = readFileSync(new URL('../../fixtures/istio-nft-default.golden', import.meta.url), 'utf8');

/** `add rule inet T C ...` lines per `T/C`. */
function rulesPerChain(script: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of script.matchAll(/^add rule \S+ (\S+) (\S+) /gm)) out[`${m[1]}/${m[2]}`] = (out[`${m[1]}/${m[2]}`] ?? 0) + 1;
  return out;
}

function counted(rs: NftRuleset): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of rs.tables) for (const c of t.chains) if (c.rules.length) out[`${t.name}/${c.name}`] = c.rules.length;
  return out;
}

const byTool = (name: string, ...args: string[]) =>
  execFileSync('ip', ['netns', 'exec', name, 'nft', ...args], { encoding: 'utf8' });

async function toolError(p: Promise<unknown>): Promise<ToolError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ToolError);
  expect(err).toBeInstanceOf(NetError);
  return err as ToolError;
}

describe.skipIf(!privileged('nft'))('nft in a netns', () => {
  it('applies Istio\'s nft ruleset and lists it back as typed objects, idempotently', async () => {
    const ns = await freshNetns();
    await nft.apply(ns, GOLDEN);
    const rs = await nft.list(ns);
    expect(rs).toEqual(parseRuleset(byTool(ns.name, '-j', 'list', 'ruleset')));
    expect(rs.version).toMatch(/^\d+\.\d+/);
    expect(rs.tables.map((t) => `${t.family} ${t.name}`)).toEqual(['inet istio-ambient-nat', 'inet istio-ambient-mangle', 'inet istio-ambient-raw']);
    expect(counted(rs)).toEqual(rulesPerChain(GOLDEN));
    const nat = rs.tables[0]!;
    expect(nat.chains.find((c) => c.name === 'prerouting')).toMatchObject({ type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' });
    expect(nat.chains.find((c) => c.name === 'istio-output')!.hook).toBeUndefined();
    const mangle = rs.tables[1]!;
    expect(mangle.chains.find((c) => c.name === 'output')).toMatchObject({ type: 'route', hook: 'output', priority: -150 });
    const jump = nat.chains.find((c) => c.name === 'output')!.rules[0]!;
    expect(jump.expr).toEqual([{ jump: { target: 'istio-output' } }]);
    expect(jump.handle).toBeGreaterThan(0);

    // add + flush table makes a re-apply a clean rewrite.
    await nft.apply(ns, GOLDEN);
    expect(counted(await nft.list(ns))).toEqual(rulesPerChain(GOLDEN));
  });

  it('lists one table, and a missing table as empty', async () => {
    const ns = await freshNetns();
    await nft.apply(ns, GOLDEN);
    const one = await nft.list(ns, { table: { family: 'inet', name: 'istio-ambient-raw' } });
    expect(one.tables.map((t) => t.name)).toEqual(['istio-ambient-raw']);
    expect(one).toEqual(parseRuleset(byTool(ns.name, '-j', 'list', 'table', 'inet', 'istio-ambient-raw')));
    expect((await nft.list(ns, { table: { family: 'ip', name: 'istio-ambient-raw' } })).tables).toEqual([]);
    expect(await nft.listText(ns, { table: { family: 'inet', name: 'istio-ambient-raw' } }))
      .toBe(byTool(ns.name, 'list', 'table', 'inet', 'istio-ambient-raw'));
  });

  it('reports the line and columns of a syntax error and commits nothing', async () => {
    const ns = await freshNetns();
    const script = 'add table inet t\nadd chain inet t c { type filter hook input priority 0 ; }\nadd rule inet t c tcp dportx 5 accept\n';
    const err = await toolError(nft.apply(ns, script));
    expect(err).toMatchObject({
      op: 'nft', code: 'NFT_EXIT_FAILURE', exitCode: 1, tool: 'nft',
      line: 3, column: 23, columnEnd: 28, lineText: 'add rule inet t c tcp dportx 5 accept',
    });
    expect(err.lineText!.slice(err.column! - 1, err.columnEnd)).toBe('dportx');
    expect((await nft.list(ns)).tables).toEqual([]);
  });

  it('reports the line the kernel rejected, and the transaction is atomic', async () => {
    const ns = await freshNetns();
    const err = await toolError(nft.apply(ns, 'add table inet t\nadd chain inet t c\nadd rule inet t nochain accept'));
    expect(err).toMatchObject({ code: 'NFT_EXIT_FAILURE', line: 3, lineText: 'add rule inet t nochain accept' });
    expect((await nft.list(ns)).tables).toEqual([]);
  });

  it('checks without committing', async () => {
    const ns = await freshNetns();
    await nft.apply(ns, 'add table inet t', { check: true });
    expect((await nft.list(ns)).tables).toEqual([]);
    const err = await toolError(nft.apply(ns, 'add table inet t\nadd chain inet t c { type nat hook bogus priority 0 ; }', { check: true }));
    expect(err.line).toBe(2);
  });

  it('deletes a table with everything in it, and tolerates a missing one', async () => {
    const ns = await freshNetns();
    await nft.apply(ns, GOLDEN);
    await nft.deleteTable(ns, 'inet', 'istio-ambient-nat');
    expect((await nft.list(ns)).tables.map((t) => t.name)).toEqual(['istio-ambient-mangle', 'istio-ambient-raw']);
    await nft.deleteTable(ns, 'inet', 'istio-ambient-nat');
    await nft.deleteTable(ns, 'ip', 'never-existed');
    expect((await nft.list(ns)).tables.map((t) => t.name)).toEqual(['istio-ambient-mangle', 'istio-ambient-raw']);
    await expect(nft.deleteTable(ns, 'inet', 'bad name')).rejects.toThrow(TypeError);
  });
});
