// nf_tables dumps over netlink: listTables against the nft binary, and the
// single `nft -a list ruleset` producer, whose failures are never an empty listing.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { listTables } from '../../../lib/net/nft/dump.js';
import { nativeNftSender } from '../../../lib/net/nft/batch.js';
import { nft } from '../../../lib/net/nft/tool.js';
import { NFPROTO_INET, NFPROTO_IPV4, NFPROTO_IPV6 } from '../../../lib/net/nl/nfnl.js';
import { ToolError } from '../../../lib/net/tool-error.js';
import { execNft } from '../../../lib/redirect/engine-types.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

let dirs: string[] = [];
const savedPath = process.env.PATH;
afterEach(() => {
  process.env.PATH = savedPath;
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

/** Puts an `nft` first on PATH that fails the way a broken or killed nft does. */
function failingNft(exitCode: number): void {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-fakenft-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'nft'), `#!/bin/sh\necho 'Error: simulated failure' >&2\nexit ${exitCode}\n`);
  chmodSync(join(dir, 'nft'), 0o755);
  process.env.PATH = `${dir}:${savedPath ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`;
}

describe.skipIf(!privileged('nft'))('nf_tables dumps', () => {
  it('listTables names every table of every family, like `nft list tables`', async () => {
    const ns = await freshNetns();
    expect(await listTables(ns)).toEqual([]);
    await nft.apply(ns, 'add table inet a\nadd table ip b\nadd table ip6 c\n');
    const got = await listTables(ns);
    expect([...got].sort((x, y) => x.name.localeCompare(y.name))).toEqual([
      { family: NFPROTO_INET, name: 'a' }, { family: NFPROTO_IPV4, name: 'b' }, { family: NFPROTO_IPV6, name: 'c' },
    ]);
    const byTool = (await nft.list(ns)).tables.map((t) => t.name).sort();
    expect(got.map((t) => t.name).sort()).toEqual(byTool);
  });

  it('`nft -a list ruleset` has handles, and a failing nft is a ToolError, not an empty ruleset (both seams)', async () => {
    const ns = await freshNetns();
    await nft.apply(ns, 'add table inet t\nadd chain inet t c\nadd rule inet t c accept\n');
    for (const sender of [nativeNftSender, execNft]) expect(await sender.listText(ns)).toMatch(/accept # handle \d+$/m);
    expect(await nft.listText(ns, { handles: true })).toMatch(/# handle \d+/);
    expect(await nft.listText(ns)).not.toMatch(/# handle/);
    failingNft(1);
    for (const sender of [nativeNftSender, execNft]) {
      const err = await sender.listText(ns).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ToolError);
      expect(err).toMatchObject({ op: 'nft', code: 'NFT_EXIT_FAILURE', exitCode: 1 });
    }
  });

  it('listText of a missing table is a ToolError with NFT_EXIT_FAILURE (callers decide by code)', async () => {
    const ns = await freshNetns();
    const err = await nft.listText(ns, { table: { family: 'inet', name: 'missing' } }).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ op: 'nft', code: 'NFT_EXIT_FAILURE' });
  });
});
