import { describe, expect, it } from 'vitest';
import { Attrs, MsgWriter, NLM_F_ACK, NLM_F_REQUEST, splitMessages } from '../../../lib/net/nl/codec.js';
import { Routes } from '../../../lib/net/rtnl/routes.js';
import { Rules } from '../../../lib/net/rtnl/rules.js';
import type { Links } from '../../../lib/net/rtnl/links.js';
import type { NlTransport } from '../../../lib/net/nl/transport.js';
import { RTM } from '../../../lib/net/rtnl/constants.js';

const hex = (b: Buffer) => b.toString('hex');
const noTransport = {} as NlTransport;
const fakeLinks = { index: async (r: string | number) => (r === 'lo' ? 1 : Number(r)) } as unknown as Links;

describe('netlink codec', () => {
  it('builds header, family header and padded attributes', () => {
    const m = new MsgWriter(24, NLM_F_REQUEST | NLM_F_ACK).raw(Buffer.from([1, 2, 3])).str(3, 'lo').u32(15, 100).finish();
    expect(m.length).toBe(16 + 4 + 8 + 8);
    expect(m.readUInt32LE(0)).toBe(m.length);
    expect(m.readUInt16LE(4)).toBe(24);
    expect(m.readUInt16LE(6)).toBe(5);
    expect(hex(m.subarray(16))).toBe('01020300' + '0700' + '0300' + '6c6f0000' + '0800' + '0f00' + '64000000');
  });

  it('nests attributes and parses them back', () => {
    const m = new MsgWriter(16, 1).raw(Buffer.alloc(16)).begin(18).str(1, 'veth').begin(2, true).u16(5, 7).end().end().finish();
    const [msg] = splitMessages(m);
    const a = new Attrs(msg!.body, 16);
    const info = a.nested(18)!;
    expect(info.str(1)).toBe('veth');
    expect(info.nested(2)!.u16(5)).toBe(7);
    expect(() => new MsgWriter(1, 1).begin(1).finish()).toThrow();
  });

  it('rejects a truncated message buffer', () => {
    const m = new MsgWriter(16, 1).raw(Buffer.alloc(16)).finish();
    expect(() => splitMessages(m.subarray(0, 20))).toThrow(RangeError);
  });

  it('encodes `ip route add local default dev lo table 100` like iproute2', async () => {
    const routes = new Routes(noTransport, fakeLinks);
    const m = await routes.encode(RTM.NEWROUTE, 0x400 | 0x200, { dst: 'default', family: 4, type: 'local', dev: 'lo', table: 100 });
    const body = splitMessages(m)[0]!.body;
    // family inet, dst_len 0, table 100, proto boot, scope host, type local
    expect([...body.subarray(0, 8)]).toEqual([2, 0, 0, 0, 100, 3, 254, 2]);
    const a = new Attrs(body, 12);
    expect(a.u32(4)).toBe(1);  // RTA_OIF
    expect(a.has(1)).toBe(false);  // no RTA_DST for a default route
  });

  it('validates route and rule specs before any I/O', async () => {
    const routes = new Routes(noTransport, fakeLinks);
    await expect(routes.encode(RTM.NEWROUTE, 0, { dst: '10.0.0.0/33' })).rejects.toThrow(RangeError);
    await expect(routes.encode(RTM.NEWROUTE, 0, { dst: '10.0.0.0/8', gateway: 'fd00::1' })).rejects.toThrow(TypeError);
    await expect(routes.encode(RTM.NEWROUTE, 0, { dst: '10.0.0.0/8', table: -1 })).rejects.toThrow(RangeError);
    await expect(routes.encode(RTM.NEWROUTE, 0, { dst: '10.0.0.0/8', bogus: 1 } as never)).rejects.toThrow(TypeError);
    const rules = new Rules(noTransport);
    expect(() => rules.encode(RTM.NEWRULE, 0, { family: 4, priority: -1, table: 100 })).toThrow(RangeError);
    expect(() => rules.encode(RTM.NEWRULE, 0, { family: 5 as 4, table: 100 })).toThrow(RangeError);
    expect(() => rules.encode(RTM.NEWRULE, 0, { family: 4, mask: 0xfff, table: 100 })).toThrow(TypeError);
    const rule = splitMessages(rules.encode(RTM.NEWRULE, 0, { family: 4, fwmark: 0x111, mask: 0xfff, table: 100, priority: 32764 }))[0]!;
    const a = new Attrs(rule.body, 12);
    expect([a.u32(10), a.u32(16), a.u32(6), a.u32(15)]).toEqual([0x111, 0xfff, 32764, 100]);
    expect(rule.body.readUInt8(7)).toBe(1);  // FR_ACT_TO_TBL
  });
});
