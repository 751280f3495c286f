// prevResult passed through (§2.2): the previous plugin's result, parsed the way upstream's
// istio-cni plugin parses it and printed byte for byte as it prints it (containernetworking/cni
// v1.3.0, the version istio pins): the config's own version decodes the prevResult (a 0.3.x/0.4.0
// config takes a 0.3.0–0.4.0 result, a 1.x config a 1.x one; any other cniVersion is an error),
// only the spec's typed fields survive, and the output is Go's json.MarshalIndent (4 spaces, no
// trailing newline, `<>&` and U+2028/9 escaped). 0.3.x/0.4.0 print struct order with `dns`
// always; 1.x print keys sorted (libcni round-trips the result through a map) and drop an empty
// `dns`. test/fixtures/cni-results/goldens.json holds upstream's real output for each case
// (scripts/cni-goldens makes it); native/cni-shim/cni_result.cc is the same code in C++.
// Known gaps against Go, all for inputs no CNI plugin emits: keys are matched case-insensitively
// in ASCII only (Go also folds U+212A and U+017F), and an integer written as 1.0 or 1e0 is
// accepted here (JSON.parse cannot tell) where Go refuses it.
import { CNI_CODES, CniError } from './errors.js';
import { isV1, type CniVersion } from './version.js';
import { isJsonObject } from '../util/json.js';

type Obj = Record<string, unknown>;

function bad(what: string): CniError {
  return new CniError(CNI_CODES.DECODE, `prevResult: ${what}`);
}

// ---------------------------------------------------------------- addresses (Go's net/netip)

/** An address as 16 bytes (IPv4 as ::ffff:a.b.c.d). */
interface Addr { b: number[] }

function parseIPv4(s: string): number[] | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^[0-9]{1,3}$/.test(p) || (p.length > 1 && p[0] === '0')) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    out.push(n);
  }
  return out;
}

function parseIPv6(s: string): number[] | undefined {
  const b: number[] = [];
  let ellipsis = -1;
  let i = 0;
  if (s.startsWith('::')) {
    ellipsis = 0;
    i = 2;
    if (i === s.length) return new Array(16).fill(0);
  }
  while (b.length < 16) {
    const m = /^[0-9a-fA-F]{1,4}/.exec(s.slice(i));
    if (!m) return undefined;
    if (i + m[0].length < s.length && s[i + m[0].length] === '.') {
      // Embedded IPv4 in the last 32 bits.
      if (b.length + 4 > 16) return undefined;
      const v4 = parseIPv4(s.slice(i));
      if (!v4) return undefined;
      b.push(...v4);
      i = s.length;
      break;
    }
    const v = parseInt(m[0], 16);
    b.push(v >> 8, v & 0xff);
    i += m[0].length;
    if (i === s.length) break;
    if (s[i] !== ':' || i + 1 === s.length) return undefined;
    i++;
    if (s[i] === ':') {
      if (ellipsis >= 0) return undefined;
      ellipsis = b.length;
      i++;
      if (i === s.length) break;
    }
  }
  if (i !== s.length) return undefined;
  if (b.length < 16) {
    if (ellipsis < 0) return undefined;
    const fill = new Array(16 - b.length).fill(0);
    b.splice(ellipsis, 0, ...fill);
  } else if (ellipsis >= 0) {
    return undefined;  // "::" must stand for at least one group
  }
  return b;
}

function parseAddr(s: string): Addr | undefined {
  if (s.includes('%')) return undefined;  // zones are refused
  if (s.includes(':')) {
    const b = parseIPv6(s);
    return b && { b };
  }
  const v4 = parseIPv4(s);
  return v4 && { b: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...v4] };
}

const isMapped = (b: number[]) => b.slice(0, 10).every((x) => x === 0) && b[10] === 0xff && b[11] === 0xff;

/** net.IP.String: IPv4 and IPv4-mapped dotted, else RFC 5952 (first longest run of ≥ 2 zero groups). */
function ipString(b: number[]): string {
  if (isMapped(b)) return b.slice(12).join('.');
  const g: number[] = [];
  for (let i = 0; i < 16; i += 2) g.push((b[i]! << 8) | b[i + 1]!);
  let zs = -1, zl = 0;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i >= 2 && j - i > zl) { zs = i; zl = j - i; }
    i = j === i ? i + 1 : j;
  }
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(':');
  return zs < 0 ? hex(g) : `${hex(g.slice(0, zs))}::${hex(g.slice(zs + zl))}`;
}

/** A CIDR as Go's types.IPNet prints it, and whether it is IPv4 (To4), or null for Go's zero IPNet. */
interface Cidr { text: string; v4: boolean }

function parseCidr(s: string, what: string): Cidr {
  const slash = s.indexOf('/');
  const a = slash < 0 ? undefined : parseAddr(s.slice(0, slash));
  const mask = slash < 0 ? '' : s.slice(slash + 1);
  if (!a || !/^[0-9]+$/.test(mask)) throw bad(`${what}: invalid CIDR address: ${s}`);
  const n = Number(mask);
  const written4 = !s.slice(0, slash).includes(':');
  if (n > (written4 ? 32 : 128)) throw bad(`${what}: invalid CIDR address: ${s}`);
  const v4 = isMapped(a.b);
  const prefix = written4 ? n : v4 ? Math.max(0, n - 96) : n;
  return { text: `${ipString(a.b)}/${prefix}`, v4 };
}

function parseIp(s: string, what: string): string | undefined {
  if (s === '') return undefined;
  const a = parseAddr(s);
  if (!a) throw bad(`${what}: invalid IP address: ${s}`);
  return ipString(a.b);
}

// ---------------------------------------------------------------- Go's typed decoding

/** The value Go's decoder would store into field `name`: keys match case-insensitively, the last in sorted order wins. */
function field(o: Obj, name: string): unknown {
  const want = name.toLowerCase();
  let key: string | undefined;
  for (const k of Object.keys(o)) {
    if (k.replace(/[A-Z]/g, (c) => c.toLowerCase()) !== want) continue;
    if (key === undefined || Buffer.compare(Buffer.from(k), Buffer.from(key)) > 0) key = k;
  }
  return key === undefined ? undefined : o[key];
}

function str(v: unknown, what: string): string {
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw bad(`${what} must be a string`);
  return v;
}

function int(v: unknown, what: string): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || Math.abs(v) >= 2 ** 63) throw bad(`${what} must be an integer`);
  return v;
}

function objects(v: unknown, what: string): Obj[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every(isJsonObject)) throw bad(`${what} must be a list of objects`);
  return v as Obj[];
}

function strings(v: unknown, what: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw bad(`${what} must be a list of strings`);
  return v.map((x, i) => str(x, `${what}[${i}]`));
}

interface Iface { name: string; mac: string; mtu: number; sandbox: string; socketPath: string; pciID: string }
interface IpConfig { iface?: number; address: Cidr | null; gateway?: string }
interface Route { dst: Cidr | null; gw?: string; mtu: number; advmss: number; priority: number; table?: number; scope?: number }
interface Dns { nameservers: string[]; domain: string; search: string[]; options: string[] }

/** A prevResult as libcni holds it (types100.Result). */
export interface TypedResult { interfaces: Iface[]; ips: IpConfig[]; routes: Route[]; dns: Dns }

const FAMILY_0 = ['0.3.0', '0.3.1', '0.4.0'];
const FAMILY_1 = ['1.0.0', '1.1.0'];

/**
 * Decodes `raw` (the config's prevResult) as a result of the config's version `conf`, as
 * upstream's plugin does before anything else. Throws CNI code 6 where upstream fails.
 */
export function parsePrevResult(raw: unknown, conf: CniVersion): TypedResult {
  if (!isJsonObject(raw)) throw bad('must be an object');
  const v1 = isV1(conf);
  const cidr = (v: unknown, what: string): Cidr | null => {
    if (v === undefined) return null;  // Go leaves a zero IPNet, printed "<nil>"
    if (typeof v !== 'string') throw bad(`${what} must be a CIDR string`);
    return parseCidr(v, what);
  };
  const ip = (v: unknown, what: string) => parseIp(str(v, what), what);
  const interfaces = objects(field(raw, 'interfaces'), 'interfaces').map((o, i): Iface => ({
    name: str(field(o, 'name'), `interfaces[${i}].name`), mac: str(field(o, 'mac'), `interfaces[${i}].mac`),
    sandbox: str(field(o, 'sandbox'), `interfaces[${i}].sandbox`),
    // 0.3.x/0.4.0 interfaces have no such fields: they are ignored there, not checked.
    mtu: v1 ? int(field(o, 'mtu'), `interfaces[${i}].mtu`) ?? 0 : 0,
    socketPath: v1 ? str(field(o, 'socketPath'), `interfaces[${i}].socketPath`) : '',
    pciID: v1 ? str(field(o, 'pciID'), `interfaces[${i}].pciID`) : '',
  }));
  const ips = objects(field(raw, 'ips'), 'ips').map((o, i): IpConfig => {
    if (!v1) str(field(o, 'version'), `ips[${i}].version`);  // decoded (so type-checked), then recomputed
    return { iface: int(field(o, 'interface'), `ips[${i}].interface`), address: cidr(field(o, 'address'), `ips[${i}].address`), gateway: ip(field(o, 'gateway'), `ips[${i}].gateway`) };
  });
  const routes = objects(field(raw, 'routes'), 'routes').map((o, i): Route => ({
    dst: cidr(field(o, 'dst'), `routes[${i}].dst`), gw: ip(field(o, 'gw'), `routes[${i}].gw`),
    mtu: int(field(o, 'mtu'), `routes[${i}].mtu`) ?? 0, advmss: int(field(o, 'advmss'), `routes[${i}].advmss`) ?? 0,
    priority: int(field(o, 'priority'), `routes[${i}].priority`) ?? 0,
    table: int(field(o, 'table'), `routes[${i}].table`), scope: int(field(o, 'scope'), `routes[${i}].scope`),
  }));
  const d = field(raw, 'dns');
  if (d !== undefined && d !== null && !isJsonObject(d)) throw bad('dns must be an object');
  const dobj = isJsonObject(d) ? d : {};
  const dns: Dns = {
    nameservers: strings(field(dobj, 'nameservers'), 'dns.nameservers'), domain: str(field(dobj, 'domain'), 'dns.domain'),
    search: strings(field(dobj, 'search'), 'dns.search'), options: strings(field(dobj, 'options'), 'dns.options'),
  };
  // The version check comes after decoding, as in Go (an error either way).
  const version = str(field(raw, 'cniVersion'), 'cniVersion');
  if (!(v1 ? FAMILY_1 : FAMILY_0).includes(version)) {
    throw bad(`result type supports ${(v1 ? FAMILY_1 : FAMILY_0).join(', ')} but its cniVersion is ${JSON.stringify(version)}`);
  }
  return { interfaces, ips, routes, dns };
}

// ---------------------------------------------------------------- Go's json.MarshalIndent

/** A value to print: Go's JSON for strings, numbers, arrays and objects (fields in print order). */
type GoVal = string | number | GoVal[] | GoObj;
class GoObj { constructor(readonly f: Array<[string, GoVal]>) {} }

/** A Go JSON string literal: HTML characters and U+2028/9 escaped, \b \f \n \r \t short, other controls \u00xx. */
export function goQuote(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i]!;
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += '\\\\';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x08) out += '\\b';
    else if (c === 0x0c) out += '\\f';
    else if (c < 0x20 || c === 0x3c || c === 0x3e || c === 0x26 || c === 0x2028 || c === 0x2029) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff) { out += ch + s[i + 1]; i++; }
    else if (c >= 0xd800 && c <= 0xdfff) out += '\ufffd';  // a lone surrogate: Go's decoder made it U+FFFD
    else out += ch;
  }
  return `${out}"`;
}

function indent(v: GoVal, pad: string): string {
  if (typeof v === 'string') return goQuote(v);
  if (typeof v === 'number') return String(v);
  const inner = `${pad}    `;
  if (v instanceof GoObj) {
    if (v.f.length === 0) return '{}';
    return `{\n${v.f.map(([k, x]) => `${inner}${goQuote(k)}: ${indent(x, inner)}`).join(',\n')}\n${pad}}`;
  }
  if (v.length === 0) return '[]';
  return `[\n${v.map((x) => `${inner}${indent(x, inner)}`).join(',\n')}\n${pad}]`;
}

/** An object from [key, value | undefined] pairs (undefined: omitted), keys sorted when `sorted`. */
function obj(pairs: Array<[string, GoVal | undefined]>, sorted: boolean): GoObj {
  const f = pairs.filter((p): p is [string, GoVal] => p[1] !== undefined);
  if (sorted) f.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return new GoObj(f);
}

const nz = (n: number | undefined) => (n ? n : undefined);
const ne = (s: string) => (s === '' ? undefined : s);
const nl = <T>(xs: T[]) => (xs.length ? xs : undefined);

/**
 * Exactly what upstream's plugin prints for an ADD it passes through: `prev` (undefined: no
 * prevResult, an empty result) in version `to`. No trailing newline (Go's PrintTo writes none).
 */
export function printResult(prev: TypedResult | undefined, to: CniVersion): string {
  const r = prev ?? { interfaces: [], ips: [], routes: [], dns: { nameservers: [], domain: '', search: [], options: [] } };
  const v1 = isV1(to);
  const s = v1;  // 1.x: every level's keys sorted (the result goes through a Go map)
  const cidr = (c: Cidr | null) => (c ? c.text : '<nil>');
  const interfaces = r.interfaces.map((x) => obj([
    ['name', x.name], ['mac', ne(x.mac)],
    ...(v1 ? [['mtu', nz(x.mtu)], ['sandbox', ne(x.sandbox)], ['socketPath', ne(x.socketPath)], ['pciID', ne(x.pciID)]] as Array<[string, GoVal | undefined]> : [['sandbox', ne(x.sandbox)]] as Array<[string, GoVal | undefined]>),
  ], s));
  const ips = r.ips.map((x) => obj([
    ...(v1 ? [] : [['version', x.address?.v4 ? '4' : '6']] as Array<[string, GoVal]>),
    ['interface', x.iface], ['address', cidr(x.address)], ['gateway', x.gateway],
  ], s));
  const routes = r.routes.map((x) => obj([
    ['dst', cidr(x.dst)], ['gw', x.gw], ['mtu', nz(x.mtu)], ['advmss', nz(x.advmss)], ['priority', nz(x.priority)], ['table', x.table], ['scope', x.scope],
  ], s));
  const d = r.dns;
  const dns = obj([['nameservers', nl(d.nameservers)], ['domain', ne(d.domain)], ['search', nl(d.search)], ['options', nl(d.options)]], s);
  const dnsEmpty = dns.f.length === 0;
  const top = obj([
    ['cniVersion', to], ['interfaces', nl(interfaces)], ['ips', nl(ips)],
    ['routes', nl(routes)], ['dns', v1 && dnsEmpty ? undefined : dns],
  ], s);
  return indent(top, '');
}

/** What the plugin prints passing an ADD through: the config's prevResult (may be absent) in its version. */
export function passThrough(prevResult: unknown, to: CniVersion): string {
  return printResult(prevResult === undefined || prevResult === null ? undefined : parsePrevResult(prevResult, to), to);
}

/** The pod IPs (address without the prefix length) of a result, in order. */
export function resultIps(result: unknown): string[] {
  if (!isJsonObject(result) || !Array.isArray(result.ips)) return [];
  return result.ips
    .map((x) => (isJsonObject(x) && typeof x.address === 'string' ? x.address.split('/')[0]! : ''))
    .filter((x) => x !== '');
}
