// prevResult passed through (§2.2): the previous plugin's result, parsed as
// a CNI result of its version and printed in the config's version. podwire
// never adds interfaces or IPs. Like Go's typed results, only the spec's
// top-level fields survive (cniVersion, interfaces, ips, routes, dns) and
// `dns` is always present; 0.3.x/0.4.0 IPs carry `version`, 1.x IPs do not.
import { CNI_CODES, CniError } from './errors.js';
import { checkVersion, isV1, type CniVersion } from './version.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

function bad(what: string): CniError {
  return new CniError(CNI_CODES.DECODE, `prevResult: ${what}`);
}

function list(r: Obj, key: string): Obj[] | undefined {
  const v = r[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every(isObj)) throw bad(`${key} must be a list of objects`);
  return v as Obj[];
}

/** Converts a result (any supported version) to `to`. */
export function convertResult(result: unknown, to: CniVersion): Obj {
  if (!isObj(result)) throw bad('must be an object');
  checkVersion(result.cniVersion ?? to);
  const out: Obj = { cniVersion: to };
  const interfaces = list(result, 'interfaces');
  if (interfaces?.length) out.interfaces = interfaces;
  const ips = list(result, 'ips');
  if (ips?.length) {
    out.ips = ips.map((ip, i) => {
      if (typeof ip.address !== 'string') throw bad(`ips[${i}].address must be a CIDR string`);
      const { version: _drop, ...rest } = ip;
      return isV1(to) ? rest : { version: ip.address.includes(':') ? '6' : '4', ...rest };
    });
  }
  const routes = list(result, 'routes');
  if (routes?.length) out.routes = routes;
  const dns = result.dns;
  if (dns !== undefined && dns !== null && !isObj(dns)) throw bad('dns must be an object');
  out.dns = dns ?? {};
  return out;
}

/** What a plugin without a prevResult prints: an empty result of the config's version. */
export function emptyResult(to: CniVersion): Obj {
  return { cniVersion: to, dns: {} };
}

/** The pod IPs (address without the prefix length) of a result, in order. */
export function resultIps(result: unknown): string[] {
  if (!isObj(result) || !Array.isArray(result.ips)) return [];
  return result.ips
    .map((ip) => (isObj(ip) && typeof ip.address === 'string' ? ip.address.split('/')[0]! : ''))
    .filter((ip) => ip !== '');
}
