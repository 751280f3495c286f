// The ZDS codec against the byte vectors of zds.md §2.4 and proto3 rules.
import { describe, expect, it } from 'vitest';
import { decodeHello, decodeRequest, decodeResponse, encodeHello, encodeRequest, encodeResponse } from '../../lib/zds/codec.js';
import { ZdsError } from '../../lib/zds/errors.js';

const hex = (s: string) => Buffer.from(s.replace(/\s+/g, ''), 'hex');

describe('ZDS codec: byte vectors', () => {
  const add = { type: 'add' as const, uid: 'uid-1', workloadInfo: { name: 'p', namespace: 'ns', serviceAccount: 'sa' } };
  const vectors: Array<[string, Buffer, string]> = [
    ['hello V1', encodeHello(), '08 01'],
    ['ack ok', encodeResponse(), '0a 00'],
    ['nack boom', encodeResponse('boom'), '0a 06 0a 04 62 6f 6f 6d'],
    ['snapshot_sent', encodeRequest({ type: 'snapshot_sent' }), '1a 00'],
    ['keep', encodeRequest({ type: 'keep', uid: 'uid-1' }), '2a 07 0a 05 75 69 64 2d 31'],
    ['del', encodeRequest({ type: 'del', uid: 'uid-1' }), '12 07 12 05 75 69 64 2d 31'],
    ['add', encodeRequest(add), '0a 14 0a 05 75 69 64 2d 31 12 0b 0a 01 70 12 02 6e 73 1a 02 73 61'],
  ];
  for (const [name, got, want] of vectors) {
    it(`encodes ${name}`, () => expect(got.toString('hex')).toBe(hex(want).toString('hex')));
  }

  it('decodes every vector back', () => {
    expect(decodeHello(hex('08 01'))).toEqual({ version: 1 });
    expect(decodeResponse(hex('0a 00'))).toEqual({ ack: { error: '' } });
    expect(decodeResponse(hex('0a 06 0a 04 62 6f 6f 6d'))).toEqual({ ack: { error: 'boom' } });
    expect(decodeRequest(hex('1a 00'))).toEqual({ type: 'snapshot_sent' });
    expect(decodeRequest(hex('2a 07 0a 05 75 69 64 2d 31'))).toEqual({ type: 'keep', uid: 'uid-1' });
    expect(decodeRequest(hex('12 07 12 05 75 69 64 2d 31'))).toEqual({ type: 'del', uid: 'uid-1' });
    expect(decodeRequest(hex('0a 14 0a 05 75 69 64 2d 31 12 0b 0a 01 70 12 02 6e 73 1a 02 73 61'))).toEqual(add);
  });
});

describe('ZDS codec: proto3 rules', () => {
  it('writes an all-empty workload_info as present (12 00) and omits empty strings', () => {
    const b = encodeRequest({ type: 'add', uid: 'u', workloadInfo: { name: '', namespace: '', serviceAccount: '' } });
    expect(b.toString('hex')).toBe('0a050a01751200');
    expect(decodeRequest(b)).toEqual({ type: 'add', uid: 'u', workloadInfo: { name: '', namespace: '', serviceAccount: '' } });
    // Without workload_info: absent after decoding (ztunnel ≥ 1.24 rejects that).
    expect(decodeRequest(encodeRequest({ type: 'add', uid: 'u', workloadInfo: undefined }))).toEqual({ type: 'add', uid: 'u', workloadInfo: undefined });
  });

  it('never encodes an empty record except a NOT_USED hello', () => {
    expect(encodeRequest({ type: 'del', uid: '' }).length).toBeGreaterThan(0);
    expect(encodeRequest({ type: 'snapshot_sent' }).length).toBe(2);
    expect(encodeResponse('').length).toBe(2);
    expect(encodeHello(0).length).toBe(2);  // explicit 08 00, never the empty (EOF-like) record
  });

  it('skips unknown fields of every wire type, including the reserved trust_domain', () => {
    // add{uid, workload_info{name, trust_domain(4)="td", 9:varint 300, 10:fixed64, 11:fixed32}}, plus an unknown top-level field 7
    const info = hex('0a 01 70  22 02 74 64  48 ac 02  51 01 02 03 04 05 06 07 08  5d 01 02 03 04');
    const addBody = Buffer.concat([hex('0a 01 75 12'), Buffer.from([info.length]), info]);
    const msg = Buffer.concat([hex('3a 01 00'), hex('0a'), Buffer.from([addBody.length]), addBody]);
    expect(decodeRequest(msg)).toEqual({ type: 'add', uid: 'u', workloadInfo: { name: 'p', namespace: '', serviceAccount: '' } });
    expect(decodeHello(hex('10 05 08 01'))).toEqual({ version: 1 });
    expect(decodeResponse(hex('0a 04 12 02 68 69'))).toEqual({ ack: { error: '' } });
  });

  it('decodes an unknown oneof member (e.g. the never-used 4) as no payload', () => {
    expect(decodeRequest(hex('22 02 0a 00'))).toEqual({ type: 'none' });
    expect(decodeRequest(hex(''))).toEqual({ type: 'none' });
    expect(decodeResponse(hex('12 00'))).toEqual({ ack: undefined });
  });

  it('lets the last oneof member win', () => {
    expect(decodeRequest(hex('1a 00 12 07 12 05 75 69 64 2d 31'))).toEqual({ type: 'del', uid: 'uid-1' });
  });

  it('rejects malformed bytes with ZDS_DECODE', () => {
    for (const bad of ['0a', '0a 05 00', '08', '08 ff ff ff ff ff ff ff ff ff ff 01', '0b 00', '00 00', '2a 03 0a 01 ff',
      '0f']) {
      let err: unknown;
      try {
        decodeRequest(hex(bad));
      } catch (e) {
        err = e;
      }
      expect(err, bad).toBeInstanceOf(ZdsError);
      expect((err as ZdsError).code).toBe('ZDS_DECODE');
    }
    expect(() => decodeHello(hex('0a 00'))).toThrow(ZdsError);  // version with a wrong wire type
  });

  it('round-trips non-ASCII text and long uids', () => {
    const uid = 'x'.repeat(300);
    expect(decodeRequest(encodeRequest({ type: 'keep', uid }))).toEqual({ type: 'keep', uid });
    expect(decodeResponse(encodeResponse('échec ✗'))).toEqual({ ack: { error: 'échec ✗' } });
  });

  it('rejects bad input types', () => {
    expect(() => encodeRequest({ type: 'keep', uid: 5 as never })).toThrow(TypeError);
    expect(() => encodeRequest({ type: 'bogus' } as never)).toThrow(TypeError);
    expect(() => encodeHello(-1)).toThrow(RangeError);
  });
});

describe('ZDS codec: varints wider than what is kept (found by the fuzz harness)', () => {
  // Each decoded as something else before: a length of 2^35 as 0 (an `add`
  // with an empty uid), a field key wider than 32 bits as field 5 (`keep`).
  const cases: Array<[string, string]> = [
    ['a length of 2^35', '0a 80 80 80 80 80 01'],
    ['a field key wider than 32 bits', 'aa 80 80 80 80 80 01 00'],
    ['a tenth varint byte above 1', '0a ff ff ff ff ff ff ff ff ff 02'],
  ];
  for (const [name, bytes] of cases) {
    it(`rejects ${name} with ZDS_DECODE`, () => {
      let err: unknown;
      try {
        decodeRequest(hex(bytes));
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ZdsError);
      expect(err).toMatchObject({ code: 'ZDS_DECODE' });
    });
  }
});
