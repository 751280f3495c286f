// The compact form of nf_tables messages that verify compares: one record per
// message (kind, family, table, name, handle, shape, comment), decoded by the
// addon into one string (native/nft/nft_decode.cc VerifyRecords) and split
// here. A restart verifies every pod's ruleset; one object per chain and rule
// with every IR field costs several times the dump itself.
import { native } from '../binding.js';

/** One nf_tables object as verify compares it. */
export interface NftRecord {
  kind: string;
  family: number;
  table: string;
  /** Chain or set name; for a rule, its chain. */
  name: string;
  handle: bigint;
  /** A chain's hook and policy (`regular` for a regular chain), a set's key, a rule's expressions joined by `; `. */
  shape: string;
  comment?: string;
}

/** Fields per record (native kRecordFields). */
const FIELDS = 7;

/** Parses the addon's record string (each field followed by a NUL). */
export function parseRecords(s: string): NftRecord[] {
  if (s === '') return [];
  const f = s.split('\0');
  // Each field ends with a NUL, so the split leaves one empty string after the last.
  if ((f.length - 1) % FIELDS !== 0 || f[f.length - 1] !== '') throw new RangeError(`nft records: ${f.length - 1} fields is not a multiple of ${FIELDS}`);
  const out: NftRecord[] = [];
  for (let i = 0; i + FIELDS < f.length; i += FIELDS) {
    const r: NftRecord = { kind: f[i]!, family: Number(f[i + 1]), table: f[i + 2]!, name: f[i + 3]!, handle: BigInt(f[i + 4]!), shape: f[i + 5]! };
    const c = f[i + 6]!;
    if (c !== '') r.comment = c.slice(1);
    out.push(r);
  }
  return out;
}

/** The records of the nf_tables messages in `messages` (a batch, or dump replies). */
export function decodeRecords(messages: Buffer): NftRecord[] {
  return parseRecords(native().nftRecords(messages));
}

/** A rule's text as verify reports it: its expressions, then its comment. */
export const recordText = (r: NftRecord): string => `${r.shape}${r.comment !== undefined ? ` # ${JSON.stringify(r.comment)}` : ''}`;
