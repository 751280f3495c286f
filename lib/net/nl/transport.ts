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

export class SocketTransport implements NlTransport {
  constructor(private readonly sock: NativeNlSocket) {}

  request(msgs: Buffer, op: string, atomic = false): Promise<Buffer | undefined> {
    return this.sock.request(msgs, op, atomic);
  }

  async dump(msg: Buffer, op: string): Promise<RawMsg[]> {
    for (let attempt = 0; ; attempt++) {
      try {
        return splitMessages(await this.sock.request(msg, op));
      } catch (err) {
        // Retry a bounded number of times, then report it as its own error
        // (with the partial data attached) rather than return a partial list.
        if (err instanceof NetError && err.code === 'DUMP_INTERRUPTED' && attempt < DUMP_RETRIES) continue;
        throw err;
      }
    }
  }

  close(): void {
    this.sock.close();
  }
}
