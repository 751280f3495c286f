// Interface addresses over rtnetlink, in iproute2's vocabulary.
import { Attrs, MsgWriter, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST } from '../nl/codec.js';
import type { NlTransport } from '../nl/transport.js';
import { IFA, IFA_F, RTM, SCOPES, flagNames, scopeName } from './constants.js';
import { afOf, type Family, familyOfAf, formatIp, parseIp, parsePrefix } from '../ip.js';
import type { LinkRef, Links } from './links.js';

export interface Addr {
  family: Family;
  /** ifindex of the link. */
  index: number;
  address: string;
  prefixLen: number;
  /** `address/prefixLen` */
  cidr: string;
  scope: string;
  label?: string;
  broadcast?: string;
  /** Peer address of a point-to-point link, when it differs. */
  peer?: string;
  flags: string[];
}

export interface AddrOptions {
  /** IPv6: skip duplicate address detection (`nodad`), so the address is usable at once. */
  noDad?: boolean;
  scope?: keyof typeof SCOPES | number;
  broadcast?: string;
  label?: string;
}

const IFADDR_LEN = 8;
const IFA_F_NAMES = Object.entries(IFA_F);

function ifaddrmsg(family: number, prefixLen: number, flags: number, scope: number, index: number): Buffer {
  const b = Buffer.alloc(IFADDR_LEN);
  b.writeUInt8(family, 0);
  b.writeUInt8(prefixLen, 1);
  b.writeUInt8(flags & 0xff, 2);
  b.writeUInt8(scope, 3);
  b.writeUInt32LE(index, 4);
  return b;
}

export function parseAddr(body: Buffer): Addr | undefined {
  const family = familyOfAf(body.readUInt8(0));
  if (!family) return undefined;
  const prefixLen = body.readUInt8(1);
  const a = new Attrs(body, IFADDR_LEN);
  const local = a.raw(IFA.LOCAL);
  const addr = a.raw(IFA.ADDRESS);
  const mine = local ?? addr;
  if (!mine) return undefined;
  const flagBits = a.u32(IFA.FLAGS) ?? body.readUInt8(2);
  const address = formatIp(mine);
  const out: Addr = {
    family,
    index: body.readUInt32LE(4),
    address,
    prefixLen,
    cidr: `${address}/${prefixLen}`,
    scope: scopeName(body.readUInt8(3)),
    flags: flagNames(IFA_F_NAMES, flagBits),
  };
  const label = a.str(IFA.LABEL);
  if (label) out.label = label;
  const brd = a.raw(IFA.BROADCAST);
  if (brd) out.broadcast = formatIp(brd);
  if (local && addr && !local.equals(addr)) out.peer = formatIp(addr);
  return out;
}

function scopeValue(scope: AddrOptions['scope']): number | undefined {
  if (scope === undefined) return undefined;
  if (typeof scope === 'number') {
    if (!Number.isInteger(scope) || scope < 0 || scope > 255) throw new RangeError(`scope ${scope} is out of range 0-255`);
    return scope;
  }
  const v = SCOPES[scope];
  if (v === undefined) throw new TypeError(`unknown scope ${JSON.stringify(scope)}`);
  return v;
}

export class Addrs {
  constructor(private readonly t: NlTransport, private readonly links: Links) {}

  /** Addresses, optionally of one link and/or family. Equivalent to: `ip [-4|-6] addr show [dev NAME]`. */
  async list(filter: { link?: LinkRef; family?: Family } = {}): Promise<Addr[]> {
    if (filter.family !== undefined && filter.family !== 4 && filter.family !== 6) throw new RangeError('family must be 4 or 6');
    const index = filter.link === undefined ? 0 : await this.links.index(filter.link);
    const af = filter.family ? afOf(filter.family) : 0;
    // With strict checking the kernel filters by ifa_index itself.
    const msg = new MsgWriter(RTM.GETADDR, NLM_F_REQUEST | NLM_F_DUMP).raw(ifaddrmsg(af, 0, 0, 0, index)).finish();
    const replies = await this.t.dump(msg, 'RTM_GETADDR');
    const out: Addr[] = [];
    for (const m of replies) {
      if (m.type !== RTM.NEWADDR) continue;
      const a = parseAddr(m.body);
      if (a && (!index || a.index === index) && (!filter.family || a.family === filter.family)) out.push(a);
    }
    return out;
  }

  /** Adds an address; EEXIST when present. Equivalent to: `ip addr add CIDR dev NAME`. */
  add(link: LinkRef, cidr: string, opts: AddrOptions = {}): Promise<void> {
    return this.modify(RTM.NEWADDR, NLM_F_CREATE | NLM_F_EXCL, link, cidr, opts, 'RTM_NEWADDR');
  }

  /** Adds or updates an address (idempotent). Equivalent to: `ip addr replace CIDR dev NAME`. */
  replace(link: LinkRef, cidr: string, opts: AddrOptions = {}): Promise<void> {
    return this.modify(RTM.NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, link, cidr, opts, 'RTM_NEWADDR');
  }

  /** Removes an address; EADDRNOTAVAIL when absent. Equivalent to: `ip addr del CIDR dev NAME`. */
  del(link: LinkRef, cidr: string): Promise<void> {
    return this.modify(RTM.DELADDR, 0, link, cidr, {}, 'RTM_DELADDR');
  }

  private async modify(type: number, flags: number, link: LinkRef, cidr: string, opts: AddrOptions, op: string) {
    const p = parsePrefix(cidr);
    const scope = scopeValue(opts.scope) ?? (p.family === 4 && p.bytes[0] === 127 ? SCOPES.host! : 0);
    const index = await this.links.index(link);
    const ifaFlags = opts.noDad ? IFA_F.nodad! : 0;
    const w = new MsgWriter(type, NLM_F_REQUEST | NLM_F_ACK | flags)
      .raw(ifaddrmsg(afOf(p.family), p.prefixLen, ifaFlags, scope, index))
      .attr(IFA.LOCAL, p.bytes)
      .attr(IFA.ADDRESS, p.bytes);
    if (ifaFlags) w.u32(IFA.FLAGS, ifaFlags);
    if (opts.broadcast !== undefined) {
      const b = parseIp(opts.broadcast);
      if (b.family !== 4) throw new TypeError('broadcast is IPv4 only');
      w.attr(IFA.BROADCAST, b.bytes);
    }
    if (opts.label !== undefined) w.str(IFA.LABEL, opts.label);
    await this.t.request(w.finish(), op);
  }
}
