import { describe, expect, it } from 'vitest';
import { NetError, errnoName, isExist, isNotFound } from '../../lib/net/errors.js';

describe('NetError', () => {
  it('derives code from errno and keeps op, extack and index', () => {
    const e = new NetError('boom', { errno: 17, op: 'RTM_NEWROUTE', extack: 'why', index: 2 });
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('NetError');
    expect(e.code).toBe('EEXIST');
    expect(e.op).toBe('RTM_NEWROUTE');
    expect(e.extack).toBe('why');
    expect(e.index).toBe(2);
    expect(isExist(e)).toBe(true);
    expect(isNotFound(e)).toBe(false);
  });

  it('names ipset private codes', () => {
    expect(errnoName(4103)).toBe('IPSET_ERR_EXIST');
    expect(errnoName(4102)).toBe('IPSET_ERR_TYPE_MISMATCH');
    expect(errnoName(99999)).toBe('ERRNO_99999');
  });

  it('classifies not-found codes, including IPSET_ERR_EXIST on delete', () => {
    for (const errno of [2, 3, 19, 99, 6]) expect(isNotFound(new NetError('x', { errno, op: 'x' }))).toBe(true);
    const delMissing = new NetError('x', { errno: 4103, op: 'IPSET_CMD_DEL' });
    expect(isNotFound(delMissing)).toBe(true);
    expect(isExist(delMissing)).toBe(false);
    expect(isExist(new NetError('x', { errno: 4103, op: 'IPSET_CMD_ADD' }))).toBe(true);
    expect(isExist({ code: 'EEXIST' })).toBe(true);
    expect(isExist(null)).toBe(false);
    expect(isNotFound('ENOENT')).toBe(false);
  });

  it('honours an explicit code', () => {
    const e = new NetError('x', { errno: 4, op: 'RTM_GETLINK', code: 'DUMP_INTERRUPTED' });
    expect(e.code).toBe('DUMP_INTERRUPTED');
    expect(e.errno).toBe(4);
  });
});
