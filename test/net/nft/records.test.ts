// The addon's compact records of nf_tables messages (what verify compares), parsed.
import { describe, expect, it } from 'vitest';
import { compile } from '../../../lib/net/nft/batch.js';
import { decodeRecords, parseRecords, recordText } from '../../../lib/net/nft/records.js';
import { native } from '../../../lib/net/binding.js';

describe('nft records', () => {
  it('one record per decoded message, with the fields the IR has', () => {
    const c = compile('add table inet t\nadd chain inet t out { type nat hook output priority -100 ; }\nadd chain inet t c\n'
      + 'add rule inet t c meta mark 0x539 counter accept comment "why"\nadd set inet t s { type ipv4_addr ; }\n');
    expect(c.path).toBe('netlink');
    const objs = c.expected();
    const recs = decodeRecords(c.batch!);
    expect(recs.map((r) => r.kind)).toEqual(objs.map((o) => o.kind));
    expect(recs.map((r) => r.table)).toEqual(objs.map((o) => o.table));
    expect(recs.map((r) => r.name)).toEqual(objs.map((o) => o.name));
    expect(recs.map((r) => r.handle)).toEqual(objs.map((o) => o.handle));
    expect(recs.map((r) => r.family)).toEqual(objs.map((o) => o.family));
    const rule = recs.find((r) => r.kind === 'rule')!;
    expect(rule.shape).toBe(objs.find((o) => o.kind === 'rule')!.exprs!.join('; '));
    expect(rule.comment).toBe('why');
    expect(recordText(rule)).toBe(`${rule.shape} # "why"`);
    expect(recs.find((r) => r.kind === 'chain' && r.name === 'out')!.shape).toBe('type nat hook 3 priority -100 policy 1');
    expect(recs.find((r) => r.kind === 'chain' && r.name === 'c')!.shape).toBe('regular');
    expect(recs.find((r) => r.kind === 'set')!.shape).toMatch(/^key type \d+ len 4$/);
    expect(recs.find((r) => r.kind === 'table')!.comment).toBeUndefined();
  });

  it('nothing decodes to no records; broken framing and a bad field count are RangeErrors', () => {
    expect(decodeRecords(Buffer.alloc(0))).toEqual([]);
    expect(parseRecords('')).toEqual([]);
    expect(() => native().nftRecords(Buffer.from([1, 2, 3]))).toThrow(RangeError);
    expect(() => parseRecords('rule\0' + '1\0t\0c\0' + '7\0')).toThrow(RangeError);  // 5 fields
    expect(() => parseRecords('rule\x001\0t\0c\x007\0x\0\0tail')).toThrow(RangeError);  // not NUL-ended
    expect(parseRecords('rule\x001\0t\0c\x007\0x\0#hi\0')).toEqual([{ kind: 'rule', family: 1, table: 't', name: 'c', handle: 7n, shape: 'x', comment: 'hi' }]);
  });
});
