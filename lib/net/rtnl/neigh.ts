// Neighbour (ARP / NDP) entries over rtnetlink, in iproute2's vocabulary.
// Permanent entries are exempt from the kernel's neighbour garbage
// collection and from its table-size thresholds, which are global to the
// machine: pinning them keeps large simulated nodes within the host's limits.
import { Attrs, MsgWriter, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST } from '../nl/codec.js';
import type { NlTransport } from '../nl/transport.js';
import { afOf, type Family, familyOfAf, formatIp, formatMac, parseIp, parseMac } from '../ip.js';
import { flagNames } from './constants.js';
import type { LinkRef, Links } from './links.js';

export const RTM_NEWNEIGH = 28;
export const RTM_DELNEIGH = 29;
export const RTM_GETNEIGH = 30;
const NDA_DST = 1;
const NDA_LLADDR = 2;
const NDMSG_LEN = 12;

export const NUD: Record<string, number> = {
  incomplete: 0x01, reachable: 0x02, stale: 0x04, delay: 0x08, probe: 0x10, failed: 0x20, noarp: 0x40, permanent: 0x80,
};
const NUD_NAMES = Object.entries(NUD);

export interface Neigh {
  family: Family;
  index: number;
  address: string;
  lladdr?: string;
  state: string[];
}

export interface NeighSpec {
  dev: LinkRef;
  address: string;
  /** Link-layer address; required to add. */
  lladdr?: string;
  /** Default `permanent`. */
  state?: 'permanent' | 'reachable' | 'stale' | 'noarp';
}

function ndmsg(af: number, index: number, state: number): Buffer {
  const b = Buffer.alloc(NDMSG_LEN);
  b.writeUInt8(af, 0);
  b.writeInt32LE(index, 4);
  b.writeUInt16LE(state, 8);
  return b;
}

export function parseNeigh(body: Buffer): Neigh | undefined {
  const family = familyOfAf(body.readUInt8(0));
  if (!family) return undefined;
  const a = new Attrs(body, NDMSG_LEN);
  const dst = a.raw(NDA_DST);
  if (!dst) return undefined;
  const state = body.readUInt16LE(8);
  const n: Neigh = {
    family, index: body.readInt32LE(4), address: formatIp(dst),
    state: flagNames(NUD_NAMES, state),
  };
  const ll = a.raw(NDA_LLADDR);
  if (ll && ll.length) n.lladdr = formatMac(ll);
  return n;
}

export class Neighbours {
  constructor(private readonly t: NlTransport, private readonly links: Links) {}

  /** Equivalent to: `ip [-4|-6] neigh show [dev NAME]`. */
  async list(filter: { link?: LinkRef; family?: Family } = {}): Promise<Neigh[]> {
    const index = filter.link === undefined ? 0 : await this.links.index(filter.link);
    const msg = new MsgWriter(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP).raw(ndmsg(filter.family ? afOf(filter.family) : 0, 0, 0)).finish();
    const out: Neigh[] = [];
    for (const m of await this.t.dump(msg, 'RTM_GETNEIGH')) {
      if (m.type !== RTM_NEWNEIGH) continue;
      const n = parseNeigh(m.body);
      if (n && (!index || n.index === index)) out.push(n);
    }
    return out;
  }

  /** Equivalent to: `ip neigh add ADDR lladdr MAC dev NAME nud permanent`. EEXIST when present. */
  add(spec: NeighSpec): Promise<void> {
    return this.modify(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_EXCL, spec, 'RTM_NEWNEIGH');
  }

  /** Equivalent to: `ip neigh replace ADDR lladdr MAC dev NAME nud permanent` (idempotent). */
  replace(spec: NeighSpec): Promise<void> {
    return this.modify(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, spec, 'RTM_NEWNEIGH');
  }

  /** Equivalent to: `ip neigh del ADDR dev NAME`. */
  del(spec: Omit<NeighSpec, 'lladdr' | 'state'>): Promise<void> {
    return this.modify(RTM_DELNEIGH, 0, spec, 'RTM_DELNEIGH');
  }

  private async modify(type: number, flags: number, spec: NeighSpec, op: string): Promise<void> {
    if (typeof spec !== 'object' || spec === null) throw new TypeError('neighbour spec must be an object');
    const ip = parseIp(spec.address);
    const state = NUD[spec.state ?? 'permanent'];
    if (state === undefined) throw new TypeError(`unknown neighbour state ${JSON.stringify(spec.state)}`);
    if (type === RTM_NEWNEIGH && spec.lladdr === undefined) throw new TypeError('adding a neighbour needs lladdr');
    const lladdr = spec.lladdr === undefined ? undefined : parseMac(spec.lladdr);
    const index = await this.links.index(spec.dev);
    const w = new MsgWriter(type, NLM_F_REQUEST | NLM_F_ACK | flags).raw(ndmsg(afOf(ip.family), index, type === RTM_NEWNEIGH ? state : 0));
    w.attr(NDA_DST, ip.bytes);
    if (lladdr) w.attr(NDA_LLADDR, lladdr);
    await this.t.request(w.finish(), op);
  }
}
