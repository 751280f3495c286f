// Address parsing and formatting without the network: strict inet_pton-like
// parsing (so bad input fails in TS, before any syscall) and RFC 5952 output
// (what iproute2 prints, so results compare equal with `ip -j`).

export type Family = 4 | 6;

export interface Prefix {
  family: Family;
  /** 4 or 16 bytes, network order. */
  bytes: Buffer;
  /** Prefix length; 32/128 for a bare address. */
  prefixLen: number;
}

export const AF_INET = 2;
export const AF_INET6 = 10;
export const afOf = (family: Family): number => (family === 4 ? AF_INET : AF_INET6);
export const familyOfAf = (af: number): Family | undefined => (af === AF_INET ? 4 : af === AF_INET6 ? 6 : undefined);

/** Parses an IPv4 or IPv6 address (no prefix). Throws TypeError when invalid. */
export function parseIp(text: string): { family: Family; bytes: Buffer } {
  if (typeof text !== 'string') throw new TypeError(`expected an IP address string, got ${typeof text}`);
  // Only IPv6 text has a colon. Accepts exactly what node:net isIP() does, zones (`%eth0`) excepted.
  const v6 = text.includes(':');
  const bytes = v6 ? parseIpv6(text) : parseIpv4(text, 0, Buffer.alloc(4), 0);
  if (!bytes) throw new TypeError(`invalid IP address: ${JSON.stringify(text)}`);
  return { family: v6 ? 6 : 4, bytes };
}

// A hand-written scanner instead of isIP()'s regular expressions and splits:
// the agent parses every pod IP several times per enrollment.

/** Hex digit value, or -1. */
function hexDigit(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const l = c | 0x20;
  return l >= 97 && l <= 102 ? l - 87 : -1;
}

/** A dotted quad from `text[from]` to its end (no leading zeros, as isIP) into `out[at..at+4)`; undefined when invalid. */
function parseIpv4(text: string, from: number, out: Buffer, at: number): Buffer | undefined {
  let part = 0;
  let value = 0;
  let digits = 0;
  for (let i = from; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 46;  // the end closes the last part like a '.'
    if (c === 46) {
      if (digits === 0 || part === 4) return undefined;
      out[at + part++] = value;
      value = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57 && !(digits > 0 && value === 0)) {
      value = value * 10 + c - 48;
      if (value > 255) return undefined;
      digits++;
    } else {
      return undefined;
    }
  }
  return part === 4 ? out : undefined;
}

/** 1-4 hex digit groups separated by ':', at most one '::', an optional dotted quad last. */
function parseIpv6(text: string): Buffer | undefined {
  const out = Buffer.alloc(16);
  const n = text.length;
  let units = 0;  // 16-bit groups written
  let gap = -1;  // where '::' stands, in groups
  let i = 0;
  if (text.startsWith('::')) {
    gap = 0;
    i = 2;
  }
  while (i < n) {
    let j = i;
    let value = 0;
    while (j < n && j - i < 5) {
      const d = hexDigit(text.charCodeAt(j));
      if (d < 0) break;
      value = value * 16 + d;
      j++;
    }
    if (j < n && text.charCodeAt(j) === 46) {
      if (units > 6 || !parseIpv4(text, i, out, units * 2)) return undefined;
      units += 2;
      break;
    }
    if (j === i || j - i > 4 || units === 8) return undefined;
    out.writeUInt16BE(value, units++ * 2);
    if (j === n) break;
    if (text.charCodeAt(j) !== 58) return undefined;
    j++;
    if (j < n && text.charCodeAt(j) === 58) {
      if (gap >= 0) return undefined;
      gap = units;
      j++;
    } else if (j === n) {
      return undefined;  // a trailing single ':'
    }
    i = j;
  }
  if (gap < 0) return units === 8 ? out : undefined;
  if (units > 7) return undefined;
  // Move the groups after '::' to the end, zeros in between.
  out.copyWithin(16 - (units - gap) * 2, gap * 2, units * 2);
  out.fill(0, gap * 2, 16 - (units - gap) * 2);
  return out;
}

/** Formats 4 or 16 network-order bytes the way inet_ntop (and iproute2) does. */
export function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  if (bytes.length !== 16) throw new RangeError(`an address has 4 or 16 bytes, got ${bytes.length}`);
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push((bytes[i]! << 8) | bytes[i + 1]!);
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible forms as inet_ntop prints them.
  if ((g[0]! | g[1]! | g[2]! | g[3]! | g[4]!) === 0 && (g[5] === 0xffff || (g[5] === 0 && g[6] !== 0))) {
    const v4 = `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
    return g[5] === 0xffff ? `::ffff:${v4}` : `::${v4}`;
  }
  // Longest run (length ≥ 2) of zero groups becomes '::'; first one wins ties.
  let best = -1, bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) { i++; continue; }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) { best = i; bestLen = j - i; }
    i = j;
  }
  // Built in one pass (every pod IP is formatted on each enrollment).
  let out = '';
  for (let i = 0; i < 8; i++) {
    if (i === best) {
      out += '::';
      i += bestLen - 1;
    } else {
      out += (i === 0 || i === best + bestLen ? '' : ':') + g[i]!.toString(16);
    }
  }
  return out;
}

/**
 * Parses `addr`, `addr/len` or `default` (with `family` for default).
 * Throws TypeError for malformed text and RangeError for a bad length.
 */
export function parsePrefix(text: string, family?: Family): Prefix {
  if (typeof text !== 'string') throw new TypeError(`expected a CIDR string, got ${typeof text}`);
  if (text === 'default' || text === 'all' || text === 'any') {
    if (!family) throw new TypeError(`"${text}" needs a family (4 or 6)`);
    return { family, bytes: Buffer.alloc(family === 4 ? 4 : 16), prefixLen: 0 };
  }
  const slash = text.indexOf('/');
  const ip = parseIp(slash < 0 ? text : text.slice(0, slash));
  const max = ip.family === 4 ? 32 : 128;
  let prefixLen = max;
  if (slash >= 0) {
    const lenText = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(lenText)) throw new TypeError(`invalid prefix length in ${JSON.stringify(text)}`);
    prefixLen = Number(lenText);
    if (prefixLen > max) throw new RangeError(`prefix length ${prefixLen} is out of range 0-${max} in ${JSON.stringify(text)}`);
  }
  if (family && ip.family !== family) throw new TypeError(`${text} is not an IPv${family} prefix`);
  return { family: ip.family, bytes: ip.bytes, prefixLen };
}

/** `a.b.c.d/len` (or the address alone when it is a host prefix and `short`). */
export function formatPrefix(bytes: Uint8Array, prefixLen: number, short = false): string {
  const addr = formatIp(bytes);
  const max = bytes.length === 4 ? 32 : 128;
  return short && prefixLen === max ? addr : `${addr}/${prefixLen}`;
}

/** Parses a MAC address `aa:bb:cc:dd:ee:ff`. */
export function parseMac(text: string): Buffer {
  if (typeof text !== 'string' || !/^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/.test(text))
    throw new TypeError(`invalid MAC address: ${JSON.stringify(text)}`);
  return Buffer.from(text.split(':').map((h) => parseInt(h, 16)));
}

// Every link of every dump is formatted: a byte → text table, no arrays per call.
const HEX_BYTE = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

export function formatMac(b: Uint8Array): string {
  let out = '';
  for (let i = 0; i < b.length; i++) out += i === 0 ? HEX_BYTE[b[i]!] : `:${HEX_BYTE[b[i]!]}`;
  return out;
}
