// Batching and failure localisation of Ipset.add/del against a fake
// transport that plays the kernel's ADT-list rules (apply in order, stop at
// the first failure), without root.
import { describe, expect, it } from 'vitest';
import { NetError } from '../../../lib/net/errors.js';
import { ADT_BATCH_BYTES, Ipset, type IpsetError } from '../../../lib/net/ipset/ipset.js';
import { Attrs, splitMessages, type RawMsg } from '../../../lib/net/nl/codec.js';
import type { NlTransport } from '../../../lib/net/nl/transport.js';

const ADT = 8, DATA = 7, IP = 1;

/** A one-set kernel: elements by address; `bad` addresses fail with `code`. */
class FakeKernel implements NlTransport {
  readonly set = new Set<string>();
  readonly sent: Buffer[] = [];
  constructor(private readonly bad: Map<string, [string, number]> = new Map()) {}

  async request(buf: Buffer, op: string): Promise<Buffer | undefined> {
    this.sent.push(Buffer.from(buf));
    const [msg] = splitMessages(buf);
    const exist = (msg!.flags & 0x200) === 0;
    const a = new Attrs(msg!.body, 4);
    const datas = a.has(ADT) ? new Attrs(a.raw(ADT)!).all.filter(([t]) => t === DATA).map(([, p]) => p) : [a.raw(DATA)!];
    for (const d of datas) {
      const addr = [...new Attrs(d).nested(IP)!.raw(1)!].join('.');
      const fail = this.bad.get(addr);
      if (fail) throw new NetError(`${op}: error`, { errno: fail[1], op, code: fail[0], index: 0 });
      const has = this.set.has(addr);
      if (op === 'IPSET_CMD_ADD') {
        if (has && !exist) throw new NetError(`${op}: error`, { errno: 4103, op, index: 0 });
        this.set.add(addr);
      } else {
        if (!has && !exist) throw new NetError(`${op}: error`, { errno: 4103, op, index: 0 });
        this.set.delete(addr);
      }
    }
    return undefined;
  }
  async dump(): Promise<RawMsg[]> { return []; }
  close(): void {}
}

const ip = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
const comment = 'f'.repeat(36);

describe('Ipset batching (fake transport)', () => {
  it('packs elements into ADT lists under the byte cap and sends them in order', async () => {
    const k = new FakeKernel();
    await new Ipset(k).add('s', Array.from({ length: 5000 }, (_, i) => ({ address: ip(i), comment })), { exist: true });
    expect(k.set.size).toBe(5000);
    expect(k.sent.length).toBeGreaterThan(4);
    expect(k.sent.length).toBeLessThan(8);
    for (const m of k.sent) expect(m.length).toBeLessThanOrEqual(ADT_BATCH_BYTES + 64);
    expect(k.sent.every((m) => (m.readUInt16LE(6) & 0x200) === 0)).toBe(true);  // exist: no NLM_F_EXCL
  });

  it('stops at the failing message and pins the element by replaying it with exist semantics', async () => {
    const k = new FakeKernel(new Map([[ip(3100), ['IPSET_ERR_COMMENT', 4112]]]));
    const input = Array.from({ length: 5000 }, (_, i) => ip(i));
    let err: IpsetError | undefined;
    await new Ipset(k).add('s', input).catch((e: IpsetError) => { err = e; });
    expect(err).toBeInstanceOf(NetError);
    expect(err!.code).toBe('IPSET_ERR_COMMENT');
    expect(err!.index).toBe(3100);
    expect(err!.entry).toBe(ip(3100));
    expect(err!.message).toContain('entry 3100');
    expect(k.set.size).toBe(3100);  // nothing after the failing element
    const replayed = k.sent.filter((m) => !new Attrs(splitMessages(m)[0]!.body, 4).has(ADT));
    expect(replayed.length).toBeGreaterThan(0);
    expect(replayed.every((m) => (m.readUInt16LE(6) & 0x200) === 0)).toBe(true);  // replay uses exist
  });

  it('reports the batch range for an ambiguous IPSET_ERR_EXIST and drops the socket message index', async () => {
    const k = new FakeKernel();
    k.set.add(ip(7));
    let err: IpsetError | undefined;
    await new Ipset(k).add('s', Array.from({ length: 20 }, (_, i) => ip(i))).catch((e: IpsetError) => { err = e; });
    expect(err!.code).toBe('IPSET_ERR_EXIST');
    expect(err!.index).toBeUndefined();
    expect(err!.batch).toEqual({ start: 0, end: 20 });

    const single = await new Ipset(k).del('s', ip(99)).catch((e: IpsetError) => e);
    expect((single as IpsetError).index).toBe(0);
    expect((single as IpsetError).message).toContain('not in the set');
  });

  it('keeps set-level errors unpinned', async () => {
    const k = new FakeKernel(new Map([[ip(0), ['ENOENT', 2]]]));
    const err = await new Ipset(k).add('gone', [ip(0), ip(1)]).catch((e: IpsetError) => e);
    expect((err as IpsetError).code).toBe('ENOENT');
    expect((err as IpsetError).index).toBeUndefined();
    expect((err as IpsetError).entry).toBeUndefined();
  });
});
