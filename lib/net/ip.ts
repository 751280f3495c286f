// Address parsing and formatting without the network: strict inet_pton-like
// parsing (so bad input fails in TS, before any syscall) and RFC 5952 output
// (what iproute2 prints, so results compare equal with `ip -j`).
import { isIP } from 'node:net';

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
  const kind = isIP(text);
  if (kind === 4) return { family: 4, bytes: Buffer.from(text.split('.').map(Number)) };
  if (kind === 6 && !text.includes('%')) return { family: 6, bytes: parseIpv6(text) };
  throw new TypeError(`invalid IP address: ${JSON.stringify(text)}`);
}

function parseIpv6(text: string): Buffer {
  const out = Buffer.alloc(16);
  let head = text;
  let tail = '';
  const dbl = text.indexOf('::');
  if (dbl >= 0) {
    head = text.slice(0, dbl);
    tail = text.slice(dbl + 2);
  }
  const groups = (part: string): number[] => {
    if (part === '') return [];
    const res: number[] = [];
    for (const g of part.split(':')) {
      if (g.includes('.')) {
        const v4 = g.split('.').map(Number);
        res.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
      } else {
        res.push(parseInt(g, 16));
      }
    }
    return res;
  };
  const h = groups(head);
  const t = groups(tail);
  const all = dbl >= 0 ? [...h, ...new Array(8 - h.length - t.length).fill(0), ...t] : h;
  all.forEach((g, i) => out.writeUInt16BE(g, i * 2));
  return out;
}

/** Formats 4 or 16 network-order bytes the way inet_ntop (and iproute2) does. */
export function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  if (bytes.length !== 16) throw new RangeError(`an address has 4 or 16 bytes, got ${bytes.length}`);
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push((bytes[i]! << 8) | bytes[i + 1]!);
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible forms as inet_ntop prints them.
  if (g.slice(0, 5).every((x) => x === 0) && (g[5] === 0xffff || (g[5] === 0 && g[6] !== 0))) {
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
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
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

export const formatMac = (b: Uint8Array): string => [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
