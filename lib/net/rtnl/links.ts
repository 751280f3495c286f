// Links (network interfaces) over rtnetlink, in iproute2's vocabulary.
import { Attrs, MsgWriter, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST, splitMessages } from '../nl/codec.js';
import type { NlTransport } from '../nl/transport.js';
import { DEVCONF_DISABLE_IPV6, IFF, IFLA, IFLA_INET6_CONF, IFLA_INFO, OPERSTATES, RTM, VETH_INFO_PEER, flagNames } from './constants.js';
import { AF_INET6, formatMac, parseMac } from '../ip.js';

/** A link by name or ifindex. */
export type LinkRef = string | number;

export interface Link {
  index: number;
  name: string;
  /** `veth`, `bridge`, ... (absent for plain devices such as lo). */
  kind?: string;
  mtu: number;
  address?: string;
  /** IFF_* names, as `ip link` prints them: `UP`, `LOWER_UP`, `LOOPBACK`, ... */
  flags: string[];
  up: boolean;
  operstate: (typeof OPERSTATES)[number] | string;
  /** ifindex of the bridge this link is enslaved to. */
  master?: number;
  /** IFLA_LINK: the peer's ifindex for veth (in `linkNetnsId` when set). */
  parentIndex?: number;
  linkNetnsId?: number;
  /**
   * The link's `net.ipv6.conf.<link>.disable_ipv6`, read from its IPv6 devconf;
   * absent when the link has no IPv6 state (IPv6 not available).
   */
  ipv6Disabled?: boolean;
}

/** Something that owns a netns fd: a `Netns`. */
export interface NetnsFdSource {
  readonly fd: number;
}

export type LinkSpec =
  | { kind: 'veth'; name: string; mtu?: number; address?: string; peer: { name: string; netns?: NetnsFdSource; address?: string } }
  | { kind: 'bridge'; name: string; mtu?: number; address?: string };

export interface LinkChanges {
  up?: boolean;
  mtu?: number;
  /** Bridge to enslave to; `null` releases (`nomaster`). */
  master?: LinkRef | null;
  /** Moves the link into another netns. */
  netns?: NetnsFdSource;
  address?: string;
  /** Renames the link. */
  name?: string;
}

const IFINFO_LEN = 16;
const LINK_CHANGES = new Set(['up', 'mtu', 'master', 'netns', 'address', 'name']);
const IFNAMSIZ = 16;

export function validateLinkName(name: unknown, what = 'link name'): string {
  if (typeof name !== 'string') throw new TypeError(`${what} must be a string`);
  if (name.length === 0 || Buffer.byteLength(name) >= IFNAMSIZ)
    throw new RangeError(`${what} ${JSON.stringify(name)} must be 1-15 bytes long`);
  if (name === '.' || name === '..' || /[\s/:]/.test(name))
    throw new TypeError(`${what} ${JSON.stringify(name)} contains a character the kernel rejects`);
  return name;
}

function validateIndex(index: number): number {
  if (!Number.isInteger(index) || index <= 0 || index > 0x7fffffff) throw new RangeError(`invalid ifindex ${index}`);
  return index;
}

function validateMtu(mtu: unknown): number {
  if (!Number.isInteger(mtu) || (mtu as number) < 68 || (mtu as number) > 65535)
    throw new RangeError(`mtu ${String(mtu)} is out of range 68-65535`);
  return mtu as number;
}

/** struct ifinfomsg */
export function ifinfomsg(family = 0, index = 0, flags = 0, change = 0): Buffer {
  const b = Buffer.alloc(IFINFO_LEN);
  b.writeUInt8(family, 0);
  b.writeInt32LE(index, 4);
  b.writeUInt32LE(flags >>> 0, 8);
  b.writeUInt32LE(change >>> 0, 12);
  return b;
}

// IFF_* names with their bits, listed once (every link of every dump needs them).
const IFF_NAMES = Object.entries(IFF);

export function parseLink(body: Buffer): Link {
  const flags = body.readUInt32LE(8);
  const a = new Attrs(body, IFINFO_LEN);
  const info = a.nested(IFLA.LINKINFO);
  const mac = a.raw(IFLA.ADDRESS);
  const link: Link = {
    index: body.readInt32LE(4),
    name: a.str(IFLA.IFNAME) ?? '',
    mtu: a.u32(IFLA.MTU) ?? 0,
    flags: flagNames(IFF_NAMES, flags),
    up: (flags & IFF.UP!) !== 0,
    operstate: OPERSTATES[a.u8(IFLA.OPERSTATE) ?? 0] ?? String(a.u8(IFLA.OPERSTATE)),
  };
  const kind = info?.str(IFLA_INFO.KIND);
  if (kind) link.kind = kind;
  if (mac && mac.length > 0) link.address = formatMac(mac);
  const master = a.u32(IFLA.MASTER);
  if (master) link.master = master;
  const parent = a.s32(IFLA.LINK);
  if (parent !== undefined && parent !== link.index && parent > 0) link.parentIndex = parent;
  const nsid = a.s32(IFLA.LINK_NETNSID);
  if (nsid !== undefined) link.linkNetnsId = nsid;
  const conf = a.nested(IFLA.AF_SPEC)?.nested(AF_INET6)?.raw(IFLA_INET6_CONF);
  if (conf && conf.length >= (DEVCONF_DISABLE_IPV6 + 1) * 4) link.ipv6Disabled = conf.readInt32LE(DEVCONF_DISABLE_IPV6 * 4) !== 0;
  return link;
}

export class Links {
  constructor(private readonly t: NlTransport) {}

  /** All links. Equivalent to: `ip link show`. */
  async list(): Promise<Link[]> {
    const msg = new MsgWriter(RTM.GETLINK, NLM_F_REQUEST | NLM_F_DUMP).raw(ifinfomsg()).finish();
    const replies = await this.t.dump(msg, 'RTM_GETLINK');
    return replies.filter((m) => m.type === RTM.NEWLINK).map((m) => parseLink(m.body));
  }

  /** One link by name or index; rejects with ENODEV when missing. Equivalent to: `ip link show dev NAME`. */
  async get(ref: LinkRef): Promise<Link> {
    const w = new MsgWriter(RTM.GETLINK, NLM_F_REQUEST | NLM_F_ACK);
    if (typeof ref === 'number') w.raw(ifinfomsg(0, validateIndex(ref)));
    else w.raw(ifinfomsg()).str(IFLA.IFNAME, validateLinkName(ref));
    const reply = await this.t.request(w.finish(), 'RTM_GETLINK');
    const m = splitMessages(reply).find((r) => r.type === RTM.NEWLINK);
    if (!m) throw new TypeError('RTM_GETLINK: the kernel sent no link');
    return parseLink(m.body);
  }

  /** ifindex of a link given by name (one GETLINK) or index (no I/O). */
  async index(ref: LinkRef): Promise<number> {
    return typeof ref === 'number' ? validateIndex(ref) : (await this.get(ref)).index;
  }

  /**
   * Creates a link; EEXIST when the name is taken.
   * Equivalent to: `ip link add NAME type veth peer name PEER [netns NS]` or `ip link add NAME type bridge`.
   */
  async add(spec: LinkSpec): Promise<void> {
    if (typeof spec !== 'object' || spec === null) throw new TypeError('link spec must be an object');
    const w = new MsgWriter(RTM.NEWLINK, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
    w.raw(ifinfomsg()).str(IFLA.IFNAME, validateLinkName(spec.name));
    if (spec.mtu !== undefined) w.u32(IFLA.MTU, validateMtu(spec.mtu));
    if (spec.address !== undefined) w.attr(IFLA.ADDRESS, parseMac(spec.address));
    w.begin(IFLA.LINKINFO);
    switch (spec.kind) {
      case 'veth': {
        if (typeof spec.peer !== 'object' || spec.peer === null) throw new TypeError('veth needs peer: { name }');
        w.str(IFLA_INFO.KIND, 'veth').begin(IFLA_INFO.DATA).begin(VETH_INFO_PEER);
        w.raw(ifinfomsg()).str(IFLA.IFNAME, validateLinkName(spec.peer.name, 'peer name'));
        if (spec.mtu !== undefined) w.u32(IFLA.MTU, spec.mtu);
        if (spec.peer.address !== undefined) w.attr(IFLA.ADDRESS, parseMac(spec.peer.address));
        if (spec.peer.netns) w.u32(IFLA.NET_NS_FD, spec.peer.netns.fd);
        w.end().end();
        break;
      }
      case 'bridge':
        w.str(IFLA_INFO.KIND, 'bridge');
        break;
      default:
        throw new TypeError(`unsupported link kind ${JSON.stringify((spec as { kind: unknown }).kind)} (veth, bridge)`);
    }
    w.end();
    await this.t.request(w.finish(), 'RTM_NEWLINK');
  }

  /**
   * Changes a link. Equivalent to: `ip link set dev NAME [up|down] [mtu N] [master BR|nomaster] [netns NS]
   * [address MAC] [name NEW]`.
   */
  async set(ref: LinkRef, changes: LinkChanges): Promise<void> {
    if (typeof changes !== 'object' || changes === null) throw new TypeError('link changes must be an object');
    for (const k in changes) if (!LINK_CHANGES.has(k)) throw new TypeError(`unknown link change "${k}"`);
    const index = await this.index(ref);
    const master = changes.master === undefined ? undefined : changes.master === null ? 0 : await this.index(changes.master);
    const w = new MsgWriter(RTM.NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
    const up = changes.up === undefined ? 0 : changes.up ? IFF.UP! : 0;
    w.raw(ifinfomsg(0, index, up, changes.up === undefined ? 0 : IFF.UP!));
    if (changes.mtu !== undefined) w.u32(IFLA.MTU, validateMtu(changes.mtu));
    if (master !== undefined) w.u32(IFLA.MASTER, master);
    if (changes.address !== undefined) w.attr(IFLA.ADDRESS, parseMac(changes.address));
    if (changes.name !== undefined) w.str(IFLA.IFNAME, validateLinkName(changes.name));
    if (changes.netns) w.u32(IFLA.NET_NS_FD, changes.netns.fd);
    await this.t.request(w.finish(), 'RTM_NEWLINK');
  }

  /** Deletes a link (a veth takes its peer with it). Equivalent to: `ip link del dev NAME`. */
  async del(ref: LinkRef): Promise<void> {
    const w = new MsgWriter(RTM.DELLINK, NLM_F_REQUEST | NLM_F_ACK);
    if (typeof ref === 'number') w.raw(ifinfomsg(0, validateIndex(ref)));
    else w.raw(ifinfomsg()).str(IFLA.IFNAME, validateLinkName(ref));
    await this.t.request(w.finish(), 'RTM_DELLINK');
  }
}
