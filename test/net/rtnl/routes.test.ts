import { describe, expect, it } from 'vitest';
import { freshNetns, ip, ipJson } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';
import { isExist, isNotFound } from '../../../lib/net/errors.js';

interface IpRoute { type?: string; dst: string; gateway?: string; dev?: string; table?: string; protocol?: string; scope?: string; metric?: number; prefsrc?: string }

async function podLike() {
  const ns = await freshNetns();
  ip(ns.name, 'link', 'add', 'r0', 'type', 'veth', 'peer', 'name', 'r1');
  ip(ns.name, 'link', 'set', 'r0', 'up');
  ip(ns.name, 'link', 'set', 'r1', 'up');
  ip(ns.name, 'addr', 'add', '10.8.0.2/24', 'dev', 'r0');
  ip(ns.name, '-6', 'addr', 'add', 'fd00:8::2/64', 'dev', 'r0', 'nodad');
  return ns;
}

describe.skipIf(!privileged())('routes over rtnetlink, cross-checked with ip -j', () => {
  it('expresses `local default dev lo table 100` for both families, exactly as ip shows it', async () => {
    const ns = await podLike();
    const nl = await ns.netlink();
    await nl.routes.add({ dst: 'default', family: 4, type: 'local', dev: 'lo', table: 100 });
    await nl.routes.add({ dst: 'default', family: 6, type: 'local', dev: 'lo', table: 100 });
    expect(ipJson<IpRoute[]>(ns.name, 'route', 'show', 'table', '100'))
      .toEqual([{ type: 'local', dst: 'default', dev: 'lo', scope: 'host', flags: [] }]);
    expect(ipJson<IpRoute[]>(ns.name, '-6', 'route', 'show', 'table', '100')).toMatchObject([{ type: 'local', dst: 'default', dev: 'lo' }]);
    const mine = await nl.routes.list({ table: 100 });
    expect(mine.map((r) => [r.family, r.type, r.dst, r.dev, r.scope, r.protocol, r.table]).sort()).toEqual([
      [4, 'local', 'default', 'lo', 'host', 'boot', 100],
      [6, 'local', 'default', 'lo', 'universe', 'boot', 100],
    ]);
    await expect(nl.routes.add({ dst: 'default', family: 4, type: 'local', dev: 'lo', table: 100 })).rejects.toSatisfy(isExist);
    await nl.routes.replace({ dst: 'default', family: 4, type: 'local', dev: 'lo', table: 100 });  // idempotent
    await nl.routes.del({ dst: 'default', family: 4, type: 'local', dev: 'lo', table: 100 });
    expect(ipJson<IpRoute[]>(ns.name, 'route', 'show', 'table', '100')).toEqual([]);
  });

  it('adds gateway, metric and src routes in main and big tables, matching ip route show', async () => {
    const ns = await podLike();
    const nl = await ns.netlink();
    await nl.routes.add({ dst: 'default', gateway: '10.8.0.1' });
    await nl.routes.add({ dst: '192.0.2.0/24', gateway: '10.8.0.1', metric: 50, src: '10.8.0.2' });
    await nl.routes.add({ dst: '198.51.100.7', dev: 'r1' });
    await nl.routes.add({ dst: '203.0.113.77', gateway: '192.0.2.254', dev: 'r1', onlink: true });  // gateway not on any subnet
    expect(ipJson<IpRoute[]>(ns.name, 'route', 'show', '203.0.113.77')).toMatchObject([{ gateway: '192.0.2.254', dev: 'r1', flags: ['onlink'] }]);
    await nl.routes.add({ dst: 'fd00:99::/64', gateway: 'fd00:8::1' });
    await nl.routes.add({ dst: '203.0.113.0/24', type: 'blackhole', table: 100000 });
    const main4 = ipJson<IpRoute[]>(ns.name, 'route', 'show');
    const mine4 = await nl.routes.list({ family: 4 });
    expect(mine4.map((r) => [r.dst.replace(/\/32$/, ''), r.gateway, r.dev, r.metric, r.src]))
      .toEqual(main4.map((r) => [r.dst, r.gateway, r.dev, r.metric, r.prefsrc]));
    const main6 = ipJson<IpRoute[]>(ns.name, '-6', 'route', 'show');
    const mine6 = await nl.routes.list({ family: 6 });
    expect(mine6.map((r) => [r.dst, r.gateway, r.dev])).toEqual(main6.map((r) => [r.dst, r.gateway, r.dev]));
    expect(ipJson<IpRoute[]>(ns.name, 'route', 'show', 'table', '100000')).toMatchObject([{ type: 'blackhole', dst: '203.0.113.0/24' }]);
    const big = await nl.routes.list({ table: 100000 });
    expect(big).toMatchObject([{ table: 100000, type: 'blackhole', dst: '203.0.113.0/24' }]);
    const all = await nl.routes.list({ table: 'all' });
    expect(all.some((r) => r.table === 255 && r.type === 'local')).toBe(true);
    expect(all.length).toBe(ipJson<IpRoute[]>(ns.name, '-4', 'route', 'show', 'table', 'all').length + ipJson<IpRoute[]>(ns.name, '-6', 'route', 'show', 'table', 'all').length);
  });

  it('reports ESRCH, ENETUNREACH and bad input by code/type', async () => {
    const ns = await podLike();
    const nl = await ns.netlink();
    await expect(nl.routes.del({ dst: '192.0.2.0/24' })).rejects.toMatchObject({ code: 'ESRCH', op: 'RTM_DELROUTE' });
    await expect(nl.routes.del({ dst: '192.0.2.0/24' })).rejects.toSatisfy(isNotFound);
    await expect(nl.routes.add({ dst: '192.0.2.0/24', gateway: '172.16.0.1' })).rejects.toMatchObject({ code: 'ENETUNREACH' });
    await expect(nl.routes.add({ dst: '192.0.2.0/24', dev: 'nodev9' })).rejects.toMatchObject({ code: 'ENODEV' });
    await expect(nl.routes.add({ dst: 'not-a-cidr' })).rejects.toThrow(TypeError);
    await expect(nl.routes.add({ dst: '10.0.0.0/8', type: 'weird' as 'local' })).rejects.toThrow(TypeError);
  });

  it('surfaces the kernel extended ack message', async () => {
    const ns = await podLike();
    const nl = await ns.netlink();
    // A gateway route with a non-zero host part in dst is refused with an extack text.
    const err = await nl.routes.add({ dst: '192.0.2.1/24', gateway: '10.8.0.1' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EINVAL', op: 'RTM_NEWROUTE' });
    expect(typeof (err as { extack?: string }).extack).toBe('string');
    expect((err as { extack: string }).extack.length).toBeGreaterThan(0);
  });
});
