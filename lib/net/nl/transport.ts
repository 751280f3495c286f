// The seam between the typed API and the native socket: request/ack and
// dumps with bounded retry of interrupted dumps. Tests can substitute a fake.
import type { NativeNlSocket } from '../../native.js';
import { NetError } from '../errors.js';
import { splitMessages, type RawMsg } from './codec.js';

export interface NlTransport {
  /** Sends messages; resolves when every ACK/DONE arrived; returns data replies. */
  request(msgs: Buffer, op: string, atomic?: boolean): Promise<Buffer | undefined>;
  /** Runs a dump request, retrying when the kernel flags it as interrupted. */
  dump(msg: Buffer, op: string): Promise<RawMsg[]>;
  close(): void;
}

/** How many times an interrupted dump (NLM_F_DUMP_INTR) is re-run. */
export const DUMP_RETRIES = 5;

/**
 * Runs a dump (`run` sends a fresh request each time) and re-runs it when the
 * kernel flags it as interrupted, at most DUMP_RETRIES times; then the
 * DUMP_INTERRUPTED NetError (with the partial data attached) is thrown rather
 * than a partial list returned. The one retry loop of every netlink dump.
 */
export async function retryInterruptedDump<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (err instanceof NetError && err.code === 'DUMP_INTERRUPTED' && attempt < DUMP_RETRIES) continue;
      throw err;
    }
  }
}

export class SocketTransport implements NlTransport {
  constructor(private readonly sock: NativeNlSocket) {}

  request(msgs: Buffer, op: string, atomic = false): Promise<Buffer | undefined> {
    return this.sock.request(msgs, op, atomic);
  }

  dump(msg: Buffer, op: string): Promise<RawMsg[]> {
    return retryInterruptedDump(async () => splitMessages(await this.sock.request(msg, op)));
  }

  close(): void {
    this.sock.close();
  }
}
