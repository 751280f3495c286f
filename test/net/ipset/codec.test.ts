// ipset codec without root: request bytes against hand-assembled vectors,
// list decoding against replies recorded from the kernel
// (test/fixtures/ipset/record.mjs), entry syntax and validation.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  IPSET_CMD, decodeList, decodeNames, decodeTypeReply, encodeAdtList, encodeCreate, encodeEntry, encodeList, encodeNames,
  entryOf, formatCreateLine, formatEntry, formatSave, normalizeEntry, parseEntryText, validateCreate, validateSetName, type NormEntry,
} from '../../../lib/net/ipset/codec.js';
import { MsgWriter, NLA_F_NESTED, splitMessages } from '../../../lib/net/nl/codec.js';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, '../../fixtures/ipset', name));
const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('ipset request encoding', () => {
  it('encodes CREATE hash:ip inet comment byte for byte', () => {
    const got = encodeCreate('s', { type: 'hash:ip', family: 4, comment: true }, 6, false);
    expect(got.toString('hex')).toBe(hex(`
      4c000000 0206 0502 00000000 00000000
      02000000
      05000100 07000000
      06000200 73000000
      0c000300 68617368 3a697000
      05000400 06000000
      05000500 02000000
      0c000780 08000840 00000010`).toString('hex'));
  });

  it('drops NLM_F_EXCL for exist and encodes sizes big-endian with NLA_F_NET_BYTEORDER', () => {
    const got = encodeCreate('x', { type: 'hash:net', family: 6, hashsize: 256, maxelem: 70000, timeout: 30 }, 7, true);
    expect(got.readUInt16LE(6)).toBe(0x0005);  // REQUEST|ACK
    const data = got.subarray(got.length - 28);
    expect(data.toString('hex')).toBe(hex(`
      1c000780
      08001240 00000100
      08001340 00011170
      08000640 0000001e`).toString('hex'));
    expect(got.readUInt8(got.indexOf(hex('05000500')) + 4)).toBe(10);  // NFPROTO_IPV6
  });

  it('encodes a single-element ADD with address, port, proto, timeout and comment', () => {
    const e = normalizeEntry({ address: '10.0.0.1', port: 80, proto: 'udp', timeout: 5, comment: 'ab' });
    const got = encodeEntry(IPSET_CMD.ADD, 'p', e, true);
    expect(got.toString('hex')).toBe(hex(`
      54000000 0906 0500 00000000 00000000
      02000000
      05000100 07000000
      06000200 70000000
      30000780
        0c000180 08000140 0a000001
        06000440 00500000
        05000700 11000000
        08000640 00000005
        07001a00 61620000`).toString('hex'));
  });

  it('writes an ADT list identical to the generic writer, with 1-based line numbers', () => {
    const entries: NormEntry[] = [
      normalizeEntry({ address: '10.0.0.1', comment: 'c0b1e7a2-aaaa' }),
      normalizeEntry('10.1.0.0/16'),
      normalizeEntry({ address: '10.0.0.3', port: 443, timeout: 100, comment: 'é' }),
    ];
    const got = encodeAdtList(IPSET_CMD.ADD, 'set-a', entries, false);
    const w = new MsgWriter((6 << 8) | 9, 0x205).raw(hex('02000000')).u8(1, 7).str(2, 'set-a').u32be(9 | 0x4000, 0)
      .begin(8, true);
    entries.forEach((e, i) => {
      w.begin(7, true).begin(1, true).attr(1 | 0x4000, e.addr).end();
      if (e.cidr !== undefined) w.u8(3, e.cidr);
      if (e.port !== undefined) w.u16be(4 | 0x4000, e.port).u8(7, e.proto!);
      if (e.timeout !== undefined) w.u32be(6 | 0x4000, e.timeout);
      if (e.comment !== undefined) w.str(26, e.comment);
      w.u32be(9 | 0x4000, i + 1).end();
    });
    expect(got.toString('hex')).toBe(w.end().finish().toString('hex'));
    expect(got.readUInt16LE(50)).toBe(8 | NLA_F_NESTED);  // IPSET_ATTR_ADT after PROTOCOL, SETNAME, LINENO
  });

  it('refuses an ADT list longer than a nested attribute can describe', () => {
    const many = Array.from({ length: 2000 }, (_, i) => normalizeEntry({ address: `10.0.${i >> 8}.${i & 255}`, comment: 'x'.repeat(20) }));
    expect(() => encodeAdtList(IPSET_CMD.ADD, 's', many, true)).toThrow(RangeError);
  });

  it('encodes LIST dumps without ACK, with the names/header flags', () => {
    const all = encodeList();
    expect(all.readUInt16LE(4)).toBe(0x0607);
    expect(all.readUInt16LE(6)).toBe(0x0301);  // REQUEST|ROOT|MATCH
    expect(all.length).toBe(28);
    const names = encodeList(undefined, 'names');
    expect(names.subarray(28).toString('hex')).toBe('08000640' + '00000002');
    const one = encodeList('abc', 'header');
    expect(one.subarray(28).toString('hex')).toBe(hex('08000200 61626300 08000640 00000004').toString('hex'));
  });

  it('encodes RENAME/SWAP with SETNAME2 and DESTROY with or without EXCL', () => {
    const swap = encodeNames(IPSET_CMD.SWAP, 'a', 'b');
    expect(swap.subarray(28).toString('hex')).toBe(hex('06000200 61000000 06000300 62000000').toString('hex'));
    expect(encodeNames(IPSET_CMD.DESTROY, 'a').readUInt16LE(6)).toBe(0x205);
    expect(encodeNames(IPSET_CMD.DESTROY, 'a', undefined, true).readUInt16LE(6)).toBe(0x005);
  });

  it('decodes an IPSET_CMD_TYPE reply', () => {
    const reply = new MsgWriter((6 << 8) | 13, 0).raw(hex('02000000')).u8(1, 7).str(3, 'hash:ip').u8(5, 2).u8(4, 6).u8(10, 0).finish();
    expect(decodeTypeReply(splitMessages(Buffer.from(reply)))).toEqual({ revision: 6, revisionMin: 0 });
  });
});

describe('ipset list decoding (recorded kernel replies)', () => {
  it('decodes a hash:ip inet set with comments and timeouts', () => {
    const [set, ...rest] = decodeList(splitMessages(fixture('list-rec-v4.bin')));
    expect(rest).toEqual([]);
    expect(set!.header).toMatchObject({
      name: 'rec-v4', type: 'hash:ip', family: 4, revision: 6, hashsize: 64, maxelem: 1000, timeout: 600,
      comment: true, references: 0, entries: 2,
    });
    expect(set!.header.memory).toBeGreaterThan(0);
    const byAddr = Object.fromEntries(set!.entries.map((e) => [e.address, e]));
    expect(byAddr['10.1.0.2']).toEqual({ address: '10.1.0.2', timeout: 0, comment: 'pod-b' });
    expect(byAddr['10.1.0.1']).toMatchObject({ address: '10.1.0.1', comment: '0b1e7a2c-0000-4000-8000-000000000001' });
    expect(byAddr['10.1.0.1']!.timeout).toBeGreaterThan(490);
    expect(byAddr['10.1.0.1']!.timeout).toBeLessThanOrEqual(500);
  });

  it('decodes a hash:net inet6 set (host entries without /128)', () => {
    const [set] = decodeList(splitMessages(fixture('list-rec-net6.bin')));
    expect(set!.header).toMatchObject({ name: 'rec-net6', type: 'hash:net', family: 6, comment: false, entries: 3 });
    expect(set!.header.timeout).toBeUndefined();
    expect(new Set(set!.entries.map(formatEntry))).toEqual(new Set(['fd00::/64', 'fd01:2::1', '2001:db8::/32']));
  });

  it('decodes a hash:ip,port set with protocols', () => {
    const [set] = decodeList(splitMessages(fixture('list-rec-ipport.bin')));
    expect(set!.header.type).toBe('hash:ip,port');
    expect(new Set(set!.entries.map(formatEntry))).toEqual(new Set(['10.2.0.1,tcp:80', '10.2.0.2,udp:53', '10.2.0.3,tcp:8080']));
  });

  it('formats ipset save text and reads names from a dump', () => {
    const sets = decodeList(splitMessages(fixture('list-rec-ipport.bin')));
    const text = formatSave(sets);
    expect(text.split('\n')[0]).toBe('create rec-ipport hash:ip,port family inet hashsize 1024 maxelem 65536');
    expect(text).toContain('add rec-ipport 10.2.0.2,udp:53\n');
    expect(decodeNames(splitMessages(fixture('list-rec-v4.bin')))).toEqual(['rec-v4']);
  });
});

describe('ipset entries', () => {
  it('parses ipset element syntax', () => {
    expect(parseEntryText('10.0.0.1')).toEqual({ address: '10.0.0.1' });
    expect(parseEntryText('10.0.0.0/24')).toEqual({ address: '10.0.0.0', cidr: 24 });
    expect(parseEntryText('10.0.0.1,tcp:80')).toEqual({ address: '10.0.0.1', port: 80, proto: 'tcp' });
    expect(parseEntryText('10.0.0.1,80')).toEqual({ address: '10.0.0.1', port: 80, proto: 'tcp' });
    expect(parseEntryText('fd00::1,udp:53')).toEqual({ address: 'fd00::1', port: 53, proto: 'udp' });
  });

  it('normalizes: masks host bits, drops a host cidr, round-trips through entryOf', () => {
    expect(entryOf(normalizeEntry('10.1.2.3/16'))).toEqual({ address: '10.1.0.0', cidr: 16 });
    expect(entryOf(normalizeEntry('10.1.2.3/32'))).toEqual({ address: '10.1.2.3' });
    expect(entryOf(normalizeEntry('fd00::1/128'))).toEqual({ address: 'fd00::1' });
    expect(entryOf(normalizeEntry({ address: '2001:db8:0:0:1::1', comment: 'x' }))).toEqual({ address: '2001:db8::1:0:0:1', comment: 'x' });
  });

  it('rejects bad input with TypeError/RangeError before any syscall', () => {
    expect(() => normalizeEntry('10.0.0.256')).toThrow(TypeError);
    expect(() => normalizeEntry('010.0.0.1')).toThrow(TypeError);
    expect(() => normalizeEntry('10.0.0.1/33')).toThrow(RangeError);
    expect(() => normalizeEntry('10.0.0.0/0')).toThrow(RangeError);
    expect(() => normalizeEntry('10.0.0.1,icmp:8')).toThrow(TypeError);
    expect(() => normalizeEntry('10.0.0.1,70000')).toThrow(RangeError);
    expect(() => normalizeEntry('10.0.0.1 comment x')).toThrow(TypeError);
    expect(() => normalizeEntry({ address: '10.0.0.1', comment: 'a"b' })).toThrow(TypeError);
    expect(() => normalizeEntry({ address: '10.0.0.1', comment: 'x'.repeat(256) })).toThrow(RangeError);
    expect(() => normalizeEntry({ address: '10.0.0.1', timeout: -1 })).toThrow(RangeError);
    expect(() => normalizeEntry({ address: '10.0.0.1', proto: 'udp' })).toThrow(TypeError);
    expect(() => normalizeEntry({ address: '10.0.0.1', color: 'red' } as never)).toThrow(TypeError);
    expect(() => validateSetName('')).toThrow(RangeError);
    expect(() => validateSetName('x'.repeat(32))).toThrow(RangeError);
    expect(validateSetName('x'.repeat(31))).toBe('x'.repeat(31));
    expect(() => encodeCreate('s', { type: 'bitmap:ip' as never }, 0, false)).toThrow(TypeError);
    expect(() => encodeCreate('s', { type: 'hash:ip', maxelem: 0 }, 0, false)).toThrow(RangeError);
  });
});

describe('ipset family vocabulary (4 | 6, like the rest of the library)', () => {
  it('takes 4 or 6, defaults to 4, and refuses ipset\'s own words', () => {
    expect(validateCreate({ type: 'hash:ip' }).family).toBe(4);
    expect(validateCreate({ type: 'hash:ip', family: 6 }).family).toBe(6);
    for (const bad of ['inet', 'inet6', 5]) expect(() => validateCreate({ type: 'hash:ip', family: bad as never })).toThrow(TypeError);
    // The wire family: NFPROTO_IPV4 / NFPROTO_IPV6 in IPSET_ATTR_FAMILY.
    expect(encodeCreate('s', { type: 'hash:ip', family: 6 }, 6, false)).not.toEqual(encodeCreate('s', { type: 'hash:ip', family: 4 }, 6, false));
  });

  it('save text still says ipset\'s `family inet6`', () => {
    expect(formatCreateLine({ name: 's', type: 'hash:ip', family: 6, revision: 6, comment: false, references: 0, entries: 0, memory: 0 }))
      .toBe('create s hash:ip family inet6');
  });
});
