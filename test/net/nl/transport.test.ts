// Unit tests of the dump retry policy with a scripted socket (beside the real
// kernel tests, which cannot force NLM_F_DUMP_INTR on demand).
import { describe, expect, it } from 'vitest';
import { NetError } from '../../../lib/net/errors.js';
import { MsgWriter } from '../../../lib/net/nl/codec.js';
import { DUMP_RETRIES, SocketTransport } from '../../../lib/net/nl/transport.js';
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
