import { describe, expect, it } from 'vitest';
import { legacyTables, nftTableCount, packetFilterEmpty } from '../../lib/redirect/pristine.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

describe.skipIf(!privileged('nft', 'iptables-legacy'))('packet-filter emptiness without exec', () => {
  it('sees a fresh netns as empty, and any nf_tables or legacy table as state', async () => {
    const a = await freshNetns();
    expect(await packetFilterEmpty(a, [4, 6])).toBe(true);
    expect((await a.spawn(['nft', 'add', 'table', 'inet', 'someone'])).code).toBe(0);
    expect(await nftTableCount(a)).toBe(1);
    expect(await packetFilterEmpty(a, [4])).toBe(false);

    const b = await freshNetns();
    expect((await b.spawn(['iptables-legacy', '-t', 'nat', '-A', 'OUTPUT', '-j', 'ACCEPT'])).code).toBe(0);
    expect(await legacyTables(b, [4, 6])).toEqual([expect.arrayContaining(['nat']), []]);
    expect(await packetFilterEmpty(b, [4])).toBe(false);
    expect(await packetFilterEmpty(b, [6])).toBe(true);  // only the v4 family holds state
    // iptables-nft writes nf_tables tables, so it is seen too.
    const c = await freshNetns();
    expect((await c.spawn(['iptables-nft', '-t', 'mangle', '-N', 'X'])).code).toBe(0);
    expect(await packetFilterEmpty(c, [4])).toBe(false);
  });

  it('reads /proc/net of the netns, not of the process', async () => {
    const ns = await freshNetns();
    const dev = await ns.readProcNet('dev');
    expect(dev).toContain('lo:');
    expect(dev.split('\n').filter((l) => l.includes(':')).length).toBe(1);  // only lo, not the host's links
    await expect(async () => ns.readProcNet('../self/environ')).rejects.toThrow(TypeError);
  });
});
