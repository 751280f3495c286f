// nf_tables dumps over a netlink transport, decoded by the addon into the
// same objects a compiled batch decodes to (so verify compares like with like).
import { native } from '../../native.js';
import { NetError } from '../errors.js';
import type { NftObject } from './ir.js';
import { DUMP_RETRIES, type NlTransport } from '../nl/transport.js';

const GET_NAMES: Record<number, string> = {
  1: 'NFT_MSG_GETTABLE', 4: 'NFT_MSG_GETCHAIN', 7: 'NFT_MSG_GETRULE', 10: 'NFT_MSG_GETSET', 13: 'NFT_MSG_GETSETELEM',
};

/**
 * Runs one NFT_MSG_GET* dump (family 0 = every family; `table` narrows rule
 * and set dumps; GETSETELEM needs table and set) and decodes the replies.
 * An interrupted dump is re-run a bounded number of times.
 */
export async function dumpObjects(nf: NlTransport, msg: number, family: number, table?: string, set?: string): Promise<NftObject[]> {
  const op = GET_NAMES[msg] ?? `NFT_MSG_${msg}`;
  for (let attempt = 0; ; attempt++) {
    const req = native().nftDumpRequest(msg, family, table, set);
    try {
      const data = await nf.request(req, op);
      return data ? native().nftDecode(data) : [];
    } catch (err) {
      if (err instanceof NetError && err.code === 'DUMP_INTERRUPTED' && attempt < DUMP_RETRIES) continue;
      throw err;
    }
  }
}
