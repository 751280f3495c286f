// Routes over rtnetlink, in iproute2's vocabulary and with its defaults
// (protocol boot, scope derived from the type and gateway, table main).
import {
  Attrs, MsgWriter, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST,
} from '../nl/codec.js';
import type { NlTransport } from '../nl/transport.js';
import { PROTOCOLS, ROUTE_TYPES, RTA, RTM, type RouteType, SCOPES, TABLES, scopeName } from './constants.js';
import { afOf, type Family, familyOfAf, formatIp, formatPrefix, parseIp, parsePrefix } from '../ip.js';
import type { LinkRef, Links } from './links.js';

export interface Route {
  family: Family;
  /** `default` or a prefix; host routes keep their `/32` or `/128`. */
  dst: string;
  table: number;
  type: RouteType;
  scope: string;
  protocol: string;
  gateway?: string;
  /** Output ifindex and, when resolvable, its name. */
  ifindex?: number;
  dev?: string;
  metric?: number;
  /** Preferred source (`src` in `ip route`). */
  src?: string;
}

export interface RouteSpec {
  /** `default`, `a.b.c.d/len`, `addr` (host route) or IPv6 equivalents. */
  dst: string;
  /** Needed when dst is `default` and nothing else reveals the family. */
  family?: Family;
  gateway?: string;
  dev?: LinkRef;
  /** Table id (1-2^32-1) or `main`/`local`/`default`; `main` when omitted. */
  table?: number | 'main' | 'local' | 'default';
  type?: Exclude<RouteType, 'unspec'>;
  scope?: keyof typeof SCOPES | number;
  metric?: number;
  src?: string;
  protocol?: number;
  /** Accept the gateway without a route to it (`onlink`; needs `dev`). */
  onlink?: boolean;
}

const RTMSG_LEN = 12;
const RTNH_F_ONLINK = 4;
const ROUTE_FIELDS = new Set(['dst', 'family', 'gateway', 'dev', 'table', 'type', 'scope', 'metric', 'src', 'protocol', 'onlink']);

function rtmsg(af: number, dstLen: number, table: number, protocol: number, scope: number, type: number, flags = 0): Buffer {
  const b = Buffer.alloc(RTMSG_LEN);
  b.writeUInt32LE(flags, 8);
  b.writeUInt8(af, 0);
  b.writeUInt8(dstLen, 1);
  b.writeUInt8(table > 255 ? 0 : table, 4);  // RT_TABLE_UNSPEC + RTA_TABLE for large ids
  b.writeUInt8(protocol, 5);
  b.writeUInt8(scope, 6);
  b.writeUInt8(type, 7);
  return b;
}

export function tableId(t: RouteSpec['table'] | 'all'): number {
  if (t === undefined) return TABLES.main!;
  if (t === 'all') return 0;
  if (typeof t === 'string') {
    const v = TABLES[t];
    if (v === undefined) throw new TypeError(`unknown table ${JSON.stringify(t)}`);
    return v;
  }
  if (!Number.isInteger(t) || t < 1 || t > 0xffffffff) throw new RangeError(`table ${t} is out of range 1-4294967295`);
  return t;
}

function u32(v: unknown, what: string): number {
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > 0xffffffff)
    throw new RangeError(`${what} ${String(v)} is out of range 0-4294967295`);
  return v as number;
}

export function parseRoute(body: Buffer, names?: Map<number, string>): Route | undefined {
  const family = familyOfAf(body.readUInt8(0));
  if (!family) return undefined;
  const dstLen = body.readUInt8(1);
  const a = new Attrs(body, RTMSG_LEN);
  const dst = a.raw(RTA.DST);
  const proto = body.readUInt8(5);
  const r: Route = {
    family,
    dst: dst ? formatPrefix(dst, dstLen) : dstLen === 0 ? 'default' : `?/${dstLen}`,
    table: a.u32(RTA.TABLE) ?? body.readUInt8(4),
    type: ROUTE_TYPES[body.readUInt8(7)] ?? 'unspec',
    scope: scopeName(body.readUInt8(6)),
    protocol: PROTOCOLS[proto] ?? String(proto),
  };
  const gw = a.raw(RTA.GATEWAY);
  if (gw) r.gateway = formatIp(gw);
  const oif = a.u32(RTA.OIF);
  if (oif !== undefined) {
    r.ifindex = oif;
    const name = names?.get(oif);
    if (name) r.dev = name;
  }
  const metric = a.u32(RTA.PRIORITY);
  if (metric !== undefined) r.metric = metric;
  const src = a.raw(RTA.PREFSRC);
  if (src) r.src = formatIp(src);
  return r;
}

export class Routes {
  constructor(private readonly t: NlTransport, private readonly links: Links) {}

  /**
   * Routes of one table (`main` when omitted; `'all'` for every table), optionally one family.
   * `names: false` leaves `dev` out (saves a link dump). Equivalent to: `ip [-4|-6] route show table T`.
   */
  async list(filter: { table?: RouteSpec['table'] | 'all'; family?: Family; names?: boolean } = {}): Promise<Route[]> {
    if (filter.family !== undefined && filter.family !== 4 && filter.family !== 6) throw new RangeError('family must be 4 or 6');
    const table = tableId(filter.table);
    const af = filter.family ? afOf(filter.family) : 0;
    const w = new MsgWriter(RTM.GETROUTE, NLM_F_REQUEST | NLM_F_DUMP).raw(rtmsg(af, 0, 0, 0, 0, 0));
    if (table) w.u32(RTA.TABLE, table);  // strict dump: the kernel filters by table
    // `names: false` skips the link dump that fills in `dev` (ifindex only).
    const [replies, links] = await Promise.all([this.t.dump(w.finish(), 'RTM_GETROUTE'), filter.names === false ? [] : this.links.list()]);
    const names = new Map(links.map((l) => [l.index, l.name]));
    const out: Route[] = [];
    for (const m of replies) {
      if (m.type !== RTM.NEWROUTE) continue;
      const r = parseRoute(m.body, names);
      if (r && (!table || r.table === table) && (!filter.family || r.family === filter.family)) out.push(r);
    }
    return out;
  }

  /** Adds a route; EEXIST when present. Equivalent to: `ip route add ... [onlink]`. */
  add(spec: RouteSpec): Promise<void> {
    return this.modify(RTM.NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, spec, 'RTM_NEWROUTE');
  }

  /** Adds or replaces a route (idempotent). Equivalent to: `ip route replace ...`. */
  replace(spec: RouteSpec): Promise<void> {
    return this.modify(RTM.NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, spec, 'RTM_NEWROUTE');
  }

  /** Appends a route with the same destination. Equivalent to: `ip route append ...`. */
  append(spec: RouteSpec): Promise<void> {
    return this.modify(RTM.NEWROUTE, NLM_F_CREATE | NLM_F_APPEND, spec, 'RTM_NEWROUTE');
  }

  /** Deletes a route; ESRCH when absent. Equivalent to: `ip route del ...`. */
  del(spec: RouteSpec): Promise<void> {
    return this.modify(RTM.DELROUTE, 0, spec, 'RTM_DELROUTE');
  }

  /** Builds the message (exported for tests and batching). */
  async encode(type: number, flags: number, spec: RouteSpec): Promise<Buffer> {
    if (typeof spec !== 'object' || spec === null) throw new TypeError('route spec must be an object');
    for (const k in spec) if (!ROUTE_FIELDS.has(k)) throw new TypeError(`unknown route field "${k}"`);
    const gw = spec.gateway === undefined ? undefined : parseIp(spec.gateway);
    const family = spec.family ?? gw?.family;
    const dst = parsePrefix(spec.dst, spec.dst === 'default' ? family ?? 4 : family);
    if (gw && gw.family !== dst.family) throw new TypeError(`gateway ${spec.gateway} is not IPv${dst.family}`);
    const isDel = type === RTM.DELROUTE;
    const rtype = spec.type ?? (isDel ? undefined : 'unicast');
    const typeNo = rtype === undefined ? 0 : ROUTE_TYPES.indexOf(rtype);
    if (typeNo < 0) throw new TypeError(`unknown route type ${JSON.stringify(spec.type)}`);
    let scope: number;
    if (spec.scope !== undefined) {
      scope = typeof spec.scope === 'number' ? u32(spec.scope, 'scope') : SCOPES[spec.scope] ?? -1;
      if (scope < 0 || scope > 255) throw new TypeError(`unknown scope ${JSON.stringify(spec.scope)}`);
    } else if (rtype === 'local' || rtype === 'nat') {
      scope = SCOPES.host!;
    } else if (rtype === 'broadcast' || rtype === 'multicast' || rtype === 'anycast') {
      scope = SCOPES.link!;
    } else if (isDel) {
      scope = SCOPES.nowhere!;
    } else {
      scope = gw ? SCOPES.universe! : SCOPES.link!;
    }
    const table = tableId(spec.table);
    const protocol = spec.protocol === undefined ? (isDel ? 0 : 3 /* boot */) : u32(spec.protocol, 'protocol');
    if (protocol > 255) throw new RangeError(`protocol ${protocol} is out of range 0-255`);
    if (spec.onlink && (spec.dev === undefined || !gw)) throw new TypeError('onlink needs dev and gateway');
    const w = new MsgWriter(type, NLM_F_REQUEST | NLM_F_ACK | flags)
      .raw(rtmsg(afOf(dst.family), dst.prefixLen, table, protocol, scope, typeNo, spec.onlink ? RTNH_F_ONLINK : 0));
    if (table > 255) w.u32(RTA.TABLE, table);
    if (dst.prefixLen > 0) w.attr(RTA.DST, dst.bytes);
    if (gw) w.attr(RTA.GATEWAY, gw.bytes);
    if (spec.dev !== undefined) w.u32(RTA.OIF, await this.links.index(spec.dev));
    if (spec.metric !== undefined) w.u32(RTA.PRIORITY, u32(spec.metric, 'metric'));
    if (spec.src !== undefined) {
      const src = parseIp(spec.src);
      if (src.family !== dst.family) throw new TypeError(`src ${spec.src} is not IPv${dst.family}`);
      w.attr(RTA.PREFSRC, src.bytes);
    }
    return w.finish();
  }

  private async modify(type: number, flags: number, spec: RouteSpec, op: string): Promise<void> {
    await this.t.request(await this.encode(type, flags, spec), op);
  }
}
