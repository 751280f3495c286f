// Value checks shared by the configurations. Bad input fails here with a
// TypeError (malformed) or RangeError (out of range), before any rule text
// exists, so nothing half-valid ever reaches iptables or nft.
import { formatPrefix, parseIp, parsePrefix, formatIp } from '../net/ip.js';
import type { Family } from './model.js';

/** Go's strconv.ParseBool, which Istio uses for annotations and proxy env. */
export function parseGoBool(text: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(text)) return false;
  return undefined;
}

export function checkBool(v: unknown, what: string): boolean | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'boolean') throw new TypeError(`${what} must be a boolean, got ${JSON.stringify(v)}`);
  return v;
}

/** A port number 0–65535 (Istio parses ports as uint16). */
export function checkPort(v: unknown, what: string): number {
  if (typeof v === 'string' && /^\d+$/.test(v.trim())) v = Number(v.trim());
  if (typeof v !== 'number' || !Number.isInteger(v)) throw new TypeError(`${what}: ${JSON.stringify(v)} is not a port number`);
  if (v < 0 || v > 65535) throw new RangeError(`${what}: port ${v} is out of range 0-65535`);
  return v;
}

/** `a,b,c` with blanks trimmed (Istio's parsePorts); empty text = no ports. */
export function parsePortList(text: string, what: string): number[] {
  if (text.trim() === '') return [];
  return text.split(',').map((p) => {
    const t = p.trim();
    if (!/^\d+$/.test(t)) throw new TypeError(`${what}: ${JSON.stringify(p)} is not a port number`);
    return checkPort(Number(t), what);
  });
}

export type PortSpec = '*' | number[];

/** `*` or a port list, as text or already split. */
export function checkPortSpec(v: unknown, what: string): PortSpec {
  if (v === '*') return '*';
  if (typeof v === 'string') return parsePortList(v, what);
  if (Array.isArray(v)) return v.map((p) => checkPort(p, what));
  throw new TypeError(`${what} must be "*" or a list of ports, got ${JSON.stringify(v)}`);
}

/**
 * One CIDR `addr/len` (Go's netip.ParsePrefix: the length is required, no
 * blanks). Returns it in canonical text (RFC 5952 for IPv6).
 */
export function checkCidr(text: unknown, what: string): string {
  if (typeof text !== 'string') throw new TypeError(`${what}: expected a CIDR string, got ${JSON.stringify(text)}`);
  if (!text.includes('/')) throw new TypeError(`${what}: ${JSON.stringify(text)} is not a CIDR (addr/len)`);
  let p;
  try {
    p = parsePrefix(text);
  } catch (err) {
    if (err instanceof RangeError) throw new RangeError(`${what}: ${err.message}`);
    throw new TypeError(`${what}: ${JSON.stringify(text)} is not a valid CIDR`);
  }
  return formatPrefix(p.bytes, p.prefixLen);
}

/** A comma-separated CIDR list as Istio validates it (no trimming, no empty items). */
export function parseCidrList(text: string, what: string): string[] {
  if (text === '') return [];
  return text.split(',').map((c) => checkCidr(c, what));
}

export type CidrSpec = '*' | string[];

export function checkCidrSpec(v: unknown, what: string, wildcard: boolean): CidrSpec {
  if (v === '*' && wildcard) return '*';
  if (typeof v === 'string') return parseCidrList(v, what);
  if (Array.isArray(v)) return v.map((c) => checkCidr(c, what));
  throw new TypeError(`${what} must be ${wildcard ? '"*" or ' : ''}a list of CIDRs, got ${JSON.stringify(v)}`);
}

export const cidrFamily = (cidr: string): Family => (cidr.includes(':') ? 6 : 4);

/** Whether a CIDR's address is a loopback address (127/8, ::1), as Go's IsLoopback. */
export function isLoopbackCidr(cidr: string): boolean {
  const p = parsePrefix(cidr);
  if (p.family === 4) return p.bytes[0] === 127;
  return p.bytes.subarray(0, 15).every((b) => b === 0) && p.bytes[15] === 1;
}

/** One IP address of the given family, in canonical text. */
export function checkAddress(v: unknown, family: Family, what: string): string {
  if (typeof v !== 'string') throw new TypeError(`${what}: expected an IP address string, got ${JSON.stringify(v)}`);
  let ip;
  try {
    ip = parseIp(v);
  } catch {
    throw new TypeError(`${what}: ${JSON.stringify(v)} is not an IP address`);
  }
  if (ip.family !== family) throw new TypeError(`${what}: ${v} is not an ${family === 4 ? 'IPv4' : 'IPv6'} address`);
  return formatIp(ip.bytes);
}

const IFACE_RE = /^[a-zA-Z][a-zA-Z0-9_.-]*$/;

/** An interface name as Istio validates it (letter first, ≤ 15 chars). */
export function checkInterface(v: unknown, what: string): string {
  if (typeof v !== 'string') throw new TypeError(`${what}: expected an interface name, got ${JSON.stringify(v)}`);
  const name = v.trim();
  if (name === '') throw new TypeError(`${what}: empty interface name`);
  if (name.length > 15) throw new RangeError(`${what}: interface name ${JSON.stringify(name)} is longer than 15 characters`);
  if (!IFACE_RE.test(name)) throw new TypeError(`${what}: interface name ${JSON.stringify(name)} has invalid characters`);
  return name;
}

/** A list of interface names, as text (`a,b`) or already split. */
export function checkInterfaces(v: unknown, what: string): string[] {
  if (v === undefined) return [];
  if (typeof v === 'string') return v === '' ? [] : v.split(',').map((n) => checkInterface(n, what));
  if (Array.isArray(v)) return v.map((n) => checkInterface(n, what));
  throw new TypeError(`${what} must be a list of interface names, got ${JSON.stringify(v)}`);
}

/** A uid/gid: a non-negative integer (group lists also accept names). */
export function checkId(v: unknown, what: string, allowName = false): string {
  if (typeof v === 'number' || (typeof v === 'string' && /^\d+$/.test(v))) {
    const n = Number(v);
    if (!Number.isInteger(n)) throw new TypeError(`${what}: ${JSON.stringify(v)} is not an id`);
    if (n < 0 || n > 0xfffffffe) throw new RangeError(`${what}: ${n} is out of range 0-4294967294`);
    return String(n);
  }
  if (allowName && typeof v === 'string' && /^[a-zA-Z_][a-zA-Z0-9_.-]*\$?$/.test(v)) return v;
  throw new TypeError(`${what}: ${JSON.stringify(v)} is not a ${allowName ? 'group name or ' : ''}numeric id`);
}
