import { describe, expect, it } from 'vitest';
import { freshNetns, ip, ipJson } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

interface IpAddr { ifindex: number; ifname: string; addr_info: Array<{ family: string; local: string; prefixlen: number; scope: string }> }

const flat = (rows: IpAddr[]) =>
  rows.flatMap((r) => r.addr_info.map((a) => `${r.ifindex} ${a.family === 'inet' ? 4 : 6} ${a.local}/${a.prefixlen} ${a.scope === 'global' ? 'universe' : a.scope}`)).sort();

describe.skipIf(!privileged())('addresses over rtnetlink, cross-checked with ip -j', () => {
  it('adds, replaces, lists and deletes v4 and v6 addresses like ip addr', async () => {
    const ns = await freshNetns();
    ip(ns.name, 'link', 'add', 'a0', 'type', 'veth', 'peer', 'name', 'a1');
    const nl = await ns.netlink();
    await nl.links.set('a0', { up: true });
    await nl.addrs.add('a0', '10.9.0.1/24');
    await nl.addrs.add('a0', '10.9.1.1/16');
    await nl.addrs.add('a0', 'fd00:9::1/64', { noDad: true });
    await nl.addrs.replace('a0', '10.9.0.1/24');  // idempotent
    ip(ns.name, 'addr', 'add', '192.0.2.5/32', 'dev', 'a1');
    const mine = (await nl.addrs.list()).map((a) => `${a.index} ${a.family} ${a.cidr} ${a.scope}`).sort();
    expect(mine).toEqual(flat(ipJson<IpAddr[]>(ns.name, 'addr', 'show')).filter((l) => !l.includes(' fe80:')).concat(
      mine.filter((l) => l.includes(' fe80:'))).sort());
    expect((await nl.addrs.list({ link: 'a1' })).map((a) => a.cidr)).toEqual(['192.0.2.5/32']);
    expect((await nl.addrs.list({ link: 'a0', family: 6 })).map((a) => a.cidr)).toContain('fd00:9::1/64');
    const v6 = (await nl.addrs.list({ family: 6 })).find((a) => a.address === 'fd00:9::1')!;
    expect(v6.flags).toContain('nodad');
    await nl.addrs.del('a0', '10.9.1.1/16');
    expect(ip(ns.name, '-4', 'addr', 'show', 'dev', 'a0')).not.toContain('10.9.1.1');
  });

  it('reports EEXIST, EADDRNOTAVAIL and ENODEV by code', async () => {
    const ns = await freshNetns();
    const nl = await ns.netlink();
    await nl.addrs.add('lo', '10.77.0.1/32');
    await expect(nl.addrs.add('lo', '10.77.0.1/32')).rejects.toMatchObject({ code: 'EEXIST', op: 'RTM_NEWADDR' });
    await expect(nl.addrs.del('lo', '10.78.0.1/32')).rejects.toMatchObject({ code: 'EADDRNOTAVAIL', op: 'RTM_DELADDR' });
    await expect(nl.addrs.add('nodev0', '10.77.0.2/32')).rejects.toMatchObject({ code: 'ENODEV' });
    await expect(nl.addrs.add('lo', '10.77.0.300/32')).rejects.toThrow(TypeError);
    await expect(nl.addrs.list({ family: 5 as 4 })).rejects.toThrow(RangeError);
  });
});
