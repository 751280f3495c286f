import { isIP } from 'node:net';
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

  // parseIp is a hand-written scanner; this is the isIP()-based parser it replaced, as the oracle.
  function slowParseIp(text: string): { family: number; bytes: Buffer } | undefined {
    const kind = isIP(text);
    if (kind === 4) return { family: 4, bytes: Buffer.from(text.split('.').map(Number)) };
    if (kind !== 6 || text.includes('%')) return undefined;
    const groups = (part: string): number[] => part === '' ? [] : part.split(':').flatMap((g) => {
      if (!g.includes('.')) return [parseInt(g, 16)];
      const v4 = g.split('.').map(Number);
      return [(v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!];
    });
    const dbl = text.indexOf('::');
    const h = groups(dbl >= 0 ? text.slice(0, dbl) : text);
    const t = dbl >= 0 ? groups(text.slice(dbl + 2)) : [];
    const all = dbl >= 0 ? [...h, ...new Array<number>(8 - h.length - t.length).fill(0), ...t] : h;
    const out = Buffer.alloc(16);
    all.forEach((g, i) => out.writeUInt16BE(g, i * 2));
    return { family: 6, bytes: out };
  }
  const fastParseIp = (text: string) => {
    try {
      return parseIp(text);
    } catch (err) {
      expect(err).toBeInstanceOf(TypeError);
      return undefined;
    }
  };

  it('accepts and decodes exactly what the isIP()-based parser did', () => {
    const tricky = [
      '0.0.0.0', '255.255.255.255', '1.2.3.4', '01.2.3.4', '1.2.3.04', '1.2.3.00', '1.2.3.0', '256.1.1.1', '1.2.3', '1.2.3.4.5',
      '1..2.3', '.1.2.3', '1.2.3.', ' 1.2.3.4', '1.2.3.4 ', '1.2.3.4\n', '١.2.3.4', '1.2.3.4%eth0', '1e1.2.3.4', '0x1.2.3.4',
      '::', ':::', '::1', '1::', ':1', '1:', '::1:', ':1::', '1::2::3', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:7',
      '1:2:3:4:5:6:7::', '::2:3:4:5:6:7:8', '1:2:3:4:5:6::8', '1::3:4:5:6:7:8', '1:2:3:4:5:6:7:8::', '::1:2:3:4:5:6:7:8',
      'FFFF:ffff:FfFf::', 'abcd:EF01::', '12345::', '0000:0000::', '00000::', 'g::', '::ffff:1.2.3.4', '::FFFF:10.1.2.3',
      '::1.2.3.4', '::1.2.3.04', '::1.2.3', '::256.1.1.1', '1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5::1.2.3.4', '1:2:3:4:5:6::1.2.3.4',
      '1:2:3:4:5:6:7:1.2.3.4', '::1:2:3:4:5:1.2.3.4', '::1:2:3:4:5:6:1.2.3.4', '1.2.3.4::', '::1.2.3.4:1', '::ffff:1.2.3.4.5',
      'fe80::1%eth0', 'fe80::1%', '::%1', 'fe80::1/64', '[::1]', '::1 ', '', ':', '.', 'hello', '1:2:3:4:5:6:7:8%x',
    ];
    // Plus random strings over the characters that matter and mutations of valid addresses (a fixed seed: reproducible).
    let seed = 0x5eed;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % n;
    const alphabet = '0123456789abcdefABCDEFg:.%';
    const inputs = [...tricky];
    for (let k = 0; k < 20_000; k++) inputs.push(Array.from({ length: 1 + rnd(24) }, () => alphabet[rnd(alphabet.length)]).join(''));
    const valid = ['10.0.0.1', 'fd00::1', '2001:db8:0:0:1:0:0:1', '::ffff:10.1.2.3', '1:2:3:4:5:6:7:8', '::1.2.3.4'];
    for (let k = 0; k < 20_000; k++) {
      const chars = [...valid[rnd(valid.length)]!];
      for (let m = 1 + rnd(3); m > 0; m--) {
        const at = rnd(chars.length + 1);
        if (rnd(2) === 0) chars.splice(at, 1); else chars.splice(at, 0, alphabet[rnd(alphabet.length)]!);
      }
      inputs.push(chars.join(''));
    }
    let accepted = 0;
    for (const text of inputs) {
      const want = slowParseIp(text);
      expect(fastParseIp(text), JSON.stringify(text)).toEqual(want);
      if (want) accepted++;
    }
    expect(accepted).toBeGreaterThan(1000);  // the mutations keep many addresses valid
  });

  // formatIp builds its text in one pass; this is the array-based version it replaced, as the oracle.
  function slowFormatIpv6(bytes: Uint8Array): string {
    const g: number[] = [];
    for (let i = 0; i < 16; i += 2) g.push((bytes[i]! << 8) | bytes[i + 1]!);
    if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || (g[5] === 0 && g[6] !== 0))) {
      const v4 = `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
      return g[5] === 0xffff ? `::ffff:${v4}` : `::${v4}`;
    }
    let best = -1, bestLen = 0;
    for (let i = 0; i < 8;) {
      if (g[i] !== 0) { i++; continue; }
      let j = i;
      while (j < 8 && g[j] === 0) j++;
      if (j - i > bestLen && j - i >= 2) { best = i; bestLen = j - i; }
      i = j;
    }
    const hex = g.map((x) => x.toString(16));
    if (best < 0) return hex.join(':');
    return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
  }

  it('formats IPv6 exactly as the array-based formatter did (every zero-run layout)', () => {
    const groups = [0, 1, 0xffff, 0xabc, 0x1000];
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 8) % n;
    // Every pattern of zero / non-zero groups, with assorted non-zero values, plus the IPv4-embedding forms.
    for (let mask = 0; mask < 256; mask++) {
      for (let k = 0; k < 8; k++) {
        const b = Buffer.alloc(16);
        for (let i = 0; i < 8; i++) if (mask & (1 << i)) b.writeUInt16BE(groups[1 + rnd(groups.length - 1)]!, i * 2);
        expect(formatIp(b), b.toString('hex')).toBe(slowFormatIpv6(b));
      }
    }
    for (const hex of ['00000000000000000000ffff0a010203', '00000000000000000000000001020304', '00000000000000000000000000000001', '00000000000000000000fffe01020304']) {
      const b = Buffer.from(hex, 'hex');
      expect(formatIp(b), hex).toBe(slowFormatIpv6(b));
    }
  });
});

