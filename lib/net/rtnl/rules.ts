// Policy-routing rules (`ip rule`) over rtnetlink.
import { Attrs, MsgWriter, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL, NLM_F_REQUEST } from '../nl/codec.js';
import type { NlTransport } from '../nl/transport.js';
import { FIB_RULE_INVERT, FRA, FR_ACT, RTM, RULE_ACTIONS, TABLES } from './constants.js';
import { afOf, type Family, familyOfAf, formatPrefix, parsePrefix } from '../ip.js';
import { tableId } from './routes.js';
import { validateLinkName } from './links.js';

export interface Rule {
  family: Family;
  priority: number;
  /** `lookup`, `goto`, `nop`, `blackhole`, `unreachable`, `prohibit`. */
  action: string;
  table: number;
  fwmark?: number;
  fwmask?: number;
  src?: string;
  dst?: string;
  iif?: string;
  oif?: string;
  not?: boolean;
}

export interface RuleSpec {
  family: Family;
  /** `pref`: 0-4294967295. Required for deletion by exact match in practice. */
  priority?: number;
  table?: number | 'main' | 'local' | 'default';
  action?: 'lookup' | 'blackhole' | 'unreachable' | 'prohibit' | 'nop';
  fwmark?: number;
  /** Mask for fwmark (`fwmark 0x111/0xfff`). */
  mask?: number;
  src?: string;
  dst?: string;
  iif?: string;
  oif?: string;
  not?: boolean;
}

const HDR_LEN = 12;
const RULE_FIELDS = new Set(['family', 'priority', 'table', 'action', 'fwmark', 'mask', 'src', 'dst', 'iif', 'oif', 'not']);

function hdr(af: number, dstLen: number, srcLen: number, table: number, action: number, flags: number): Buffer {
  const b = Buffer.alloc(HDR_LEN);
  b.writeUInt8(af, 0);
  b.writeUInt8(dstLen, 1);
  b.writeUInt8(srcLen, 2);
  b.writeUInt8(table > 255 ? 0 : table, 4);
  b.writeUInt8(action, 7);
  b.writeUInt32LE(flags, 8);
  return b;
}

function u32(v: unknown, what: string): number {
  if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > 0xffffffff)
    throw new RangeError(`${what} ${String(v)} is out of range 0-4294967295`);
  return v as number;
}

export function parseRule(body: Buffer): Rule | undefined {
  const family = familyOfAf(body.readUInt8(0));
  if (!family) return undefined;
  const a = new Attrs(body, HDR_LEN);
  const actionNo = body.readUInt8(7);
  const r: Rule = {
    family,
    priority: a.u32(FRA.PRIORITY) ?? 0,
    action: RULE_ACTIONS[actionNo] ?? String(actionNo),
    table: a.u32(FRA.TABLE) ?? body.readUInt8(4),
  };
  const mark = a.u32(FRA.FWMARK);
  if (mark !== undefined) r.fwmark = mark;
  const mask = a.u32(FRA.FWMASK);
  if (mask !== undefined) r.fwmask = mask;
  const src = a.raw(FRA.SRC);
  if (src) r.src = formatPrefix(src, body.readUInt8(2));
  const dst = a.raw(FRA.DST);
  if (dst) r.dst = formatPrefix(dst, body.readUInt8(1));
  const iif = a.str(FRA.IIFNAME);
  if (iif) r.iif = iif;
  const oif = a.str(FRA.OIFNAME);
  if (oif) r.oif = oif;
  if (body.readUInt32LE(8) & FIB_RULE_INVERT) r.not = true;
  return r;
}

const ACTIONS: Record<string, number> = {
  lookup: FR_ACT.TO_TBL, blackhole: FR_ACT.BLACKHOLE, unreachable: FR_ACT.UNREACHABLE,
  prohibit: FR_ACT.PROHIBIT, nop: FR_ACT.NOP,
};

export class Rules {
  constructor(private readonly t: NlTransport) {}

  /** Rules of one or both families. Equivalent to: `ip [-4|-6] rule show`. */
  async list(filter: { family?: Family } = {}): Promise<Rule[]> {
    if (filter.family !== undefined && filter.family !== 4 && filter.family !== 6) throw new RangeError('family must be 4 or 6');
    // AF_UNSPEC dumps every family in one request.
    const msg = new MsgWriter(RTM.GETRULE, NLM_F_REQUEST | NLM_F_DUMP).raw(hdr(filter.family ? afOf(filter.family) : 0, 0, 0, 0, 0, 0)).finish();
    const out: Rule[] = [];
    for (const m of await this.t.dump(msg, 'RTM_GETRULE')) {
      if (m.type !== RTM.NEWRULE) continue;
      const r = parseRule(m.body);
      if (r && (!filter.family || r.family === filter.family)) out.push(r);
    }
    // Same order as `ip rule` lists them per family: IPv4 first.
    return out.sort((a, b) => a.family - b.family);
  }

  /**
   * Adds a rule; EEXIST when an identical one exists.
   * Equivalent to: `ip rule add fwmark 0x111/0xfff lookup 100 pref 32764`.
   */
  async add(spec: RuleSpec): Promise<void> {
    await this.t.request(this.encode(RTM.NEWRULE, NLM_F_CREATE | NLM_F_EXCL, spec), 'RTM_NEWRULE');
  }

  /** Deletes the first rule matching every given field; ENOENT when none. Equivalent to: `ip rule del ...`. */
  async del(spec: RuleSpec): Promise<void> {
    await this.t.request(this.encode(RTM.DELRULE, 0, spec), 'RTM_DELRULE');
  }

  encode(type: number, flags: number, spec: RuleSpec): Buffer {
    if (typeof spec !== 'object' || spec === null) throw new TypeError('rule spec must be an object');
    for (const k in spec) if (!RULE_FIELDS.has(k)) throw new TypeError(`unknown rule field "${k}"`);
    if (spec.family !== 4 && spec.family !== 6) throw new RangeError('rule family must be 4 or 6');
    const isAdd = type === RTM.NEWRULE;
    const table = spec.table === undefined ? (isAdd ? TABLES.main! : 0) : tableId(spec.table);
    const action = spec.action === undefined ? (isAdd || spec.table !== undefined ? FR_ACT.TO_TBL : 0) : ACTIONS[spec.action];
    if (action === undefined) throw new TypeError(`unknown rule action ${JSON.stringify(spec.action)}`);
    if (spec.action !== undefined && spec.action !== 'lookup' && spec.table !== undefined)
      throw new TypeError(`a "${spec.action}" rule takes no table`);
    const src = spec.src === undefined ? undefined : parsePrefix(spec.src, spec.family);
    const dst = spec.dst === undefined ? undefined : parsePrefix(spec.dst, spec.family);
    const w = new MsgWriter(type, NLM_F_REQUEST | NLM_F_ACK | flags).raw(
      hdr(afOf(spec.family), dst?.prefixLen ?? 0, src?.prefixLen ?? 0, action === FR_ACT.TO_TBL ? table : 0, action,
        spec.not ? FIB_RULE_INVERT : 0),
    );
    if (action === FR_ACT.TO_TBL && table) w.u32(FRA.TABLE, table);
    if (spec.priority !== undefined) w.u32(FRA.PRIORITY, u32(spec.priority, 'priority'));
    if (spec.fwmark !== undefined) w.u32(FRA.FWMARK, u32(spec.fwmark, 'fwmark'));
    if (spec.mask !== undefined) {
      if (spec.fwmark === undefined) throw new TypeError('mask needs fwmark');
      w.u32(FRA.FWMASK, u32(spec.mask, 'mask'));
    }
    if (src) w.attr(FRA.SRC, src.bytes);
    if (dst) w.attr(FRA.DST, dst.bytes);
    if (spec.iif !== undefined) w.str(FRA.IIFNAME, validateLinkName(spec.iif, 'iif'));
    if (spec.oif !== undefined) w.str(FRA.OIFNAME, validateLinkName(spec.oif, 'oif'));
    return w.finish();
  }
}
