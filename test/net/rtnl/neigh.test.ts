import { describe, expect, it } from 'vitest';
import { freshNetns, ip, ipJson } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

interface IpNeigh { dst: string; dev: string; lladdr?: string; state: string[] }

describe.skipIf(!privileged())('neighbours over rtnetlink, cross-checked with ip -j', () => {
  it('adds, replaces, lists and deletes permanent v4 and v6 entries', async () => {
    const ns = await freshNetns();
    ip(ns.name, 'link', 'add', 'n0', 'type', 'veth', 'peer', 'name', 'n1');
    const nl = await ns.netlink();
    await nl.links.set('n0', { up: true });
    await nl.neigh.add({ dev: 'n0', address: '10.5.0.2', lladdr: '02:00:00:00:05:02' });
    await nl.neigh.add({ dev: 'n0', address: 'fd00:5::2', lladdr: '02:00:00:00:05:02' });
    await expect(nl.neigh.add({ dev: 'n0', address: '10.5.0.2', lladdr: '02:00:00:00:05:03' })).rejects.toMatchObject({ code: 'EEXIST' });
    await nl.neigh.replace({ dev: 'n0', address: '10.5.0.2', lladdr: '02:00:00:00:05:03' });
    const theirs = ipJson<IpNeigh[]>(ns.name, 'neigh', 'show', 'dev', 'n0');
    expect(theirs.map((n) => [n.dst, n.lladdr, n.state]).sort()).toEqual([
      ['10.5.0.2', '02:00:00:00:05:03', ['PERMANENT']],
      ['fd00:5::2', '02:00:00:00:05:02', ['PERMANENT']],
    ]);
    const mine = await nl.neigh.list({ link: 'n0' });
    expect(mine.map((n) => [n.address, n.lladdr, n.state]).sort()).toEqual([
      ['10.5.0.2', '02:00:00:00:05:03', ['permanent']],
      ['fd00:5::2', '02:00:00:00:05:02', ['permanent']],
    ]);
    await nl.neigh.del({ dev: 'n0', address: '10.5.0.2' });
    expect(ipJson<IpNeigh[]>(ns.name, '-4', 'neigh', 'show', 'dev', 'n0')).toEqual([]);
    await expect(nl.neigh.del({ dev: 'n0', address: '10.5.0.2' })).rejects.toMatchObject({ code: 'ENOENT', op: 'RTM_DELNEIGH' });
    await expect(nl.neigh.add({ dev: 'n0', address: '10.5.0.9' })).rejects.toThrow(TypeError);
    await expect(nl.neigh.add({ dev: 'n0', address: '10.5.0.9', lladdr: 'zz' })).rejects.toThrow(TypeError);
  });
});
