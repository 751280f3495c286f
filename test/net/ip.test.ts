import { describe, expect, it } from 'vitest';
import { formatIp, formatMac, parseIp, parseMac, parsePrefix } from '../../lib/net/ip.js';

describe('ip parsing and formatting', () => {
  it.each([
    ['10.0.0.1', '10.0.0.1'],
    ['fd00::1', 'fd00::1'],
    ['FD00:0:0:0:0:0:0:1', 'fd00::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:db8::', '2001:db8::'],
    ['::', '::'],
    ['::1', '::1'],
    ['1:0:2:0:3:0:4:0', '1:0:2:0:3:0:4:0'],
    ['::ffff:10.1.2.3', '::ffff:10.1.2.3'],
    ['::1.2.3.4', '::1.2.3.4'],
    ['fe80::a:0:0:0:b', 'fe80:0:0:a::b'],
  ])('round-trips %s as %s (inet_ntop form)', (input, canonical) => {
    expect(formatIp(parseIp(input).bytes)).toBe(canonical);
  });

  it('rejects malformed addresses with TypeError', () => {
    for (const bad of ['10.0.0.256', '10.0.0', 'fd00:::1', 'hello', '', '1.2.3.4/24', 'fe80::1%eth0']) {
      expect(() => parseIp(bad), bad).toThrow(TypeError);
    }
  });

  it('parses prefixes, default and bare addresses', () => {
    expect(parsePrefix('10.0.0.0/24')).toMatchObject({ family: 4, prefixLen: 24 });
    expect(parsePrefix('fd00::1')).toMatchObject({ family: 6, prefixLen: 128 });
    expect(parsePrefix('default', 6)).toMatchObject({ family: 6, prefixLen: 0 });
    expect(() => parsePrefix('default')).toThrow(TypeError);
    expect(() => parsePrefix('10.0.0.0/33')).toThrow(RangeError);
    expect(() => parsePrefix('10.0.0.0/x')).toThrow(TypeError);
    expect(() => parsePrefix('fd00::/64', 4)).toThrow(TypeError);
  });

  it('parses and formats MAC addresses', () => {
    expect(formatMac(parseMac('02:AA:bb:00:01:ff'))).toBe('02:aa:bb:00:01:ff');
    expect(() => parseMac('02:aa:bb:00:01')).toThrow(TypeError);
  });
});
