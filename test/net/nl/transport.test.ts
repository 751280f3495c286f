// Unit tests of the dump retry policy with a scripted socket (beside the real
// kernel tests, which cannot force NLM_F_DUMP_INTR on demand).
import { describe, expect, it } from 'vitest';
import { NetError } from '../../../lib/net/errors.js';
import { MsgWriter } from '../../../lib/net/nl/codec.js';
import { DUMP_RETRIES, retryInterruptedDump, SocketTransport, type NlTransport } from '../../../lib/net/nl/transport.js';
import { dumpObjects } from '../../../lib/net/nft/dump.js';
import { NFT_MSG } from '../../../lib/net/nft/ir.js';
import type { NativeNlSocket } from '../../../lib/native.js';

function scripted(failures: number): { sock: NativeNlSocket; calls: () => number } {
  let calls = 0;
  const reply = new MsgWriter(16, 2).raw(Buffer.alloc(16)).finish();
  const sock = {
    fd: 3, pending: 0, close: () => undefined,
    request: async () => {
      calls++;
      if (calls <= failures) {
        const e = new NetError('interrupted', { errno: 4, op: 'RTM_GETLINK', code: 'DUMP_INTERRUPTED' });
        e.partial = reply;
        throw e;
      }
      return Buffer.concat([reply, reply]);
    },
  } as NativeNlSocket;
  return { sock, calls: () => calls };
}

describe('dump retry', () => {
  it('retries an interrupted dump and returns the complete one', async () => {
    const s = scripted(2);
    const msgs = await new SocketTransport(s.sock).dump(Buffer.alloc(16), 'RTM_GETLINK');
    expect(msgs).toHaveLength(2);
    expect(s.calls()).toBe(3);
  });

  it('gives up after a bounded number of retries with its own error and the partial data', async () => {
    const s = scripted(100);
    const err = await new SocketTransport(s.sock).dump(Buffer.alloc(16), 'RTM_GETLINK').catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DUMP_INTERRUPTED', op: 'RTM_GETLINK' });
    expect((err as NetError).partial?.length).toBeGreaterThan(0);
    expect(s.calls()).toBe(DUMP_RETRIES + 1);
  });
});

describe('retryInterruptedDump (the one retry loop)', () => {
  const interrupted = () => new NetError('interrupted', { errno: 4, op: 'NFT_MSG_GETRULE', code: 'DUMP_INTERRUPTED' });

  it('re-runs the dump until it completes', async () => {
    let calls = 0;
    const out = await retryInterruptedDump(async () => {
      if (++calls < 3) throw interrupted();
      return 'done';
    });
    expect([out, calls]).toEqual(['done', 3]);
  });

  it('stops after DUMP_RETRIES re-runs and does not retry other errors', async () => {
    let calls = 0;
    await expect(retryInterruptedDump(async () => { calls++; throw interrupted(); })).rejects.toMatchObject({ code: 'DUMP_INTERRUPTED' });
    expect(calls).toBe(DUMP_RETRIES + 1);
    calls = 0;
    await expect(retryInterruptedDump(async () => { calls++; throw new NetError('x', { errno: 16, op: 'NFT_MSG_GETRULE' }); })).rejects.toMatchObject({ code: 'EBUSY' });
    expect(calls).toBe(1);
  });

  it('is what nf_tables dumps use (dumpObjects), with a fresh request per attempt', async () => {
    const seen: Buffer[] = [];
    const nf: NlTransport = {
      request: async (msg) => {
        seen.push(msg);
        if (seen.length <= 2) throw interrupted();
        return undefined;
      },
      dump: async () => [],
      close: () => undefined,
    };
    expect(await dumpObjects(nf, NFT_MSG.GETTABLE, 0)).toEqual([]);
    expect(seen).toHaveLength(3);
    expect(new Set(seen).size).toBe(3);
    seen.length = 0;
    const always: NlTransport = { ...nf, request: async (msg) => { seen.push(msg); throw interrupted(); } };
    await expect(dumpObjects(always, NFT_MSG.GETRULE, 0)).rejects.toMatchObject({ code: 'DUMP_INTERRUPTED' });
    expect(seen).toHaveLength(DUMP_RETRIES + 1);
  });
});
