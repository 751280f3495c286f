import { describe, expect, it } from 'vitest';
import { freshNetns, ip, ipJson } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';
import { isExist, isNotFound } from '../../../lib/net/errors.js';

interface IpLink { ifindex: number; ifname: string; mtu: number; address?: string; operstate: string; flags: string[]; master?: string; link_netnsid?: number }

describe.skipIf(!privileged())('links over rtnetlink, cross-checked with ip -j', () => {
  it('lists the same links as `ip -j link show`', async () => {
    const ns = await freshNetns();
    ip(ns.name, 'link', 'add', 'pa', 'type', 'veth', 'peer', 'name', 'pb');
    ip(ns.name, 'link', 'add', 'br9', 'type', 'bridge');
    ip(ns.name, 'link', 'set', 'pa', 'master', 'br9');
    const nl = await ns.netlink();
    const mine = await nl.links.list();
    const theirs = ipJson<IpLink[]>(ns.name, 'link', 'show');
    expect(mine.map((l) => [l.index, l.name, l.mtu, l.address, l.operstate]))
      .toEqual(theirs.map((l) => [l.ifindex, l.ifname, l.mtu, l.address, l.operstate]));
    for (const t of theirs) {
      const m = mine.find((l) => l.index === t.ifindex)!;
      for (const f of t.flags.filter((f) => f !== 'M-DOWN')) expect(m.flags).toContain(f);
      if (t.master) expect(mine.find((l) => l.index === m.master)?.name).toBe(t.master);
    }
    expect(mine.find((l) => l.name === 'pa')?.kind).toBe('veth');
    expect(mine.find((l) => l.name === 'br9')?.kind).toBe('bridge');
  });

  it('adds a veth pair across namespaces and a bridge, then changes and deletes them', async () => {
    const node = await freshNetns();
    const pod = await freshNetns();
    const nl = await node.netlink();
    await nl.links.add({ kind: 'bridge', name: 'pwbr0' });
    await nl.links.add({ kind: 'veth', name: 'veth-pod1', peer: { name: 'eth0', netns: pod } });
    await nl.links.set('veth-pod1', { master: 'pwbr0', up: true, mtu: 1400, address: '02:00:00:00:00:aa' });
    await nl.links.set('pwbr0', { up: true });
    const host = ipJson<IpLink[]>(node.name, 'link', 'show', 'veth-pod1')[0]!;
    expect(host).toMatchObject({ ifname: 'veth-pod1', mtu: 1400, address: '02:00:00:00:00:aa', master: 'pwbr0' });
    expect(host.flags).toContain('UP');
    const inPod = ipJson<IpLink[]>(pod.name, 'link', 'show', 'eth0')[0]!;
    expect(inPod.ifname).toBe('eth0');
    const podNl = await pod.netlink();
    const eth0 = await podNl.links.get('eth0');
    expect(eth0.index).toBe(inPod.ifindex);
    expect(eth0.linkNetnsId).toBeDefined();
    // release from the bridge, rename, move to another netns
    await nl.links.set('veth-pod1', { master: null, up: false, name: 'veth-x' });
    expect(ipJson<IpLink[]>(node.name, 'link', 'show', 'veth-x')[0]!.master).toBeUndefined();
    const third = await freshNetns();
    await nl.links.set('veth-x', { netns: third });
    expect(ipJson<IpLink[]>(third.name, 'link', 'show').map((l) => l.ifname)).toContain('veth-x');
    await (await third.netlink()).links.del('veth-x');
    expect(ipJson<IpLink[]>(pod.name, 'link', 'show').map((l) => l.ifname)).toEqual(['lo']);  // the peer went too
    await nl.links.del('pwbr0');
    expect(ipJson<IpLink[]>(node.name, 'link', 'show').map((l) => l.ifname)).toEqual(['lo']);
  });

  it("reads each link's IPv6 state (disable_ipv6) from its devconf", async () => {
    const ns = await freshNetns();
    const nl = await ns.netlink();
    expect((await nl.links.get('lo')).ipv6Disabled).toBe(false);
    await ns.sysctl.set('net.ipv6.conf.all.disable_ipv6', 1);  // propagates to every link
    expect((await nl.links.get('lo')).ipv6Disabled).toBe(true);
    await ns.sysctl.set('net.ipv6.conf.all.disable_ipv6', 0);
    expect((await nl.links.list()).find((l) => l.name === 'lo')?.ipv6Disabled).toBe(false);
  });

  it('reports kernel errors by code and bad input before any syscall', async () => {
    const ns = await freshNetns();
    const nl = await ns.netlink();
    await expect(nl.links.get('nope0')).rejects.toMatchObject({ code: 'ENODEV', op: 'RTM_GETLINK' });
    await expect(nl.links.del('nope0')).rejects.toSatisfy(isNotFound);
    await nl.links.add({ kind: 'bridge', name: 'dup0' });
    const dup = nl.links.add({ kind: 'bridge', name: 'dup0' });
    await expect(dup).rejects.toMatchObject({ code: 'EEXIST', op: 'RTM_NEWLINK' });
    await expect(nl.links.add({ kind: 'bridge', name: 'dup0' })).rejects.toSatisfy(isExist);
    await expect(nl.links.add({ kind: 'dummy' as 'bridge', name: 'd0' })).rejects.toThrow(TypeError);
    await expect(nl.links.add({ kind: 'bridge', name: 'waytoolongname0123' })).rejects.toThrow(RangeError);
    await expect(nl.links.add({ kind: 'bridge', name: 'a/b' })).rejects.toThrow(TypeError);
    await expect(nl.links.set('lo', { mtu: 10 })).rejects.toThrow(RangeError);
    await expect(nl.links.set('lo', { colour: 'red' } as never)).rejects.toThrow(TypeError);
    await expect(nl.links.get(0)).rejects.toThrow(RangeError);
  });
});
