import { describe, expect, it } from 'vitest';
import { freshNetns, ipJson } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

interface IpRule { priority: number; src: string; fwmark?: string; fwmask?: string; table?: string; action?: string; iif?: string; not?: null }

describe.skipIf(!privileged())('policy rules over rtnetlink, cross-checked with ip -j', () => {
  it('expresses `fwmark 0x111/0xfff lookup 100 pref 32764` for both families', async () => {
    const ns = await freshNetns();
    const nl = await ns.netlink();
    for (const family of [4, 6] as const) await nl.rules.add({ family, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 });
    for (const flag of ['-4', '-6']) {
      const r = ipJson<IpRule[]>(ns.name, flag, 'rule', 'show').find((x) => x.priority === 32764);
      expect(r).toMatchObject({ priority: 32764, src: 'all', fwmark: '0x111', fwmask: '0xfff', table: '100' });
    }
    const mine = await nl.rules.list();
    expect(mine.filter((r) => r.priority === 32764)).toEqual([
      { family: 4, priority: 32764, action: 'lookup', table: 100, fwmark: 0x111, fwmask: 0xfff },
      { family: 6, priority: 32764, action: 'lookup', table: 100, fwmark: 0x111, fwmask: 0xfff },
    ]);
    expect(mine.filter((r) => r.family === 4).map((r) => r.priority)).toEqual(ipJson<IpRule[]>(ns.name, '-4', 'rule', 'show').map((r) => r.priority));
    await expect(nl.rules.add({ family: 4, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 })).rejects.toMatchObject({ code: 'EEXIST', op: 'RTM_NEWRULE' });
    await nl.rules.del({ family: 4, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 });
    expect(ipJson<IpRule[]>(ns.name, '-4', 'rule', 'show').some((x) => x.priority === 32764)).toBe(false);
    await expect(nl.rules.del({ family: 4, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 })).rejects.toMatchObject({ code: 'ENOENT', op: 'RTM_DELRULE' });
  });

  it('handles src/dst/iif/not and non-lookup actions', async () => {
    const ns = await freshNetns();
    const nl = await ns.netlink();
    await nl.rules.add({ family: 4, src: '10.0.0.0/8', iif: 'lo', table: 200, priority: 1000, not: true });
    await nl.rules.add({ family: 4, dst: '192.0.2.0/24', action: 'blackhole', priority: 1001 });
    const theirs = ipJson<IpRule[]>(ns.name, '-4', 'rule', 'show');
    expect(theirs.find((r) => r.priority === 1000)).toMatchObject({ src: '10.0.0.0', iif: 'lo', table: '200' });
    expect(theirs.find((r) => r.priority === 1001)).toMatchObject({ action: 'blackhole' });
    const mine = await nl.rules.list({ family: 4 });
    expect(mine.find((r) => r.priority === 1000)).toMatchObject({ src: '10.0.0.0/8', iif: 'lo', table: 200, not: true });
    expect(mine.find((r) => r.priority === 1001)).toMatchObject({ dst: '192.0.2.0/24', action: 'blackhole' });
    await expect(nl.rules.add({ family: 4, action: 'blackhole', table: 5 })).rejects.toThrow(TypeError);
  });
});
