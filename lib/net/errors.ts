import { constants } from 'node:os';

/** Names of ipset's private error codes (kernel `ip_set.h`, protocol 7). */
export const IPSET_ERRORS: Readonly<Record<number, string>> = {
  4097: 'IPSET_ERR_PROTOCOL',
  4098: 'IPSET_ERR_FIND_TYPE',
  4099: 'IPSET_ERR_MAX_SETS',
  4100: 'IPSET_ERR_BUSY',
  4101: 'IPSET_ERR_EXIST_SETNAME2',
  4102: 'IPSET_ERR_TYPE_MISMATCH',
  4103: 'IPSET_ERR_EXIST',
  4104: 'IPSET_ERR_INVALID_CIDR',
  4105: 'IPSET_ERR_INVALID_NETMASK',
  4106: 'IPSET_ERR_INVALID_FAMILY',
  4107: 'IPSET_ERR_TIMEOUT',
  4108: 'IPSET_ERR_REFERENCED',
  4109: 'IPSET_ERR_IPADDR_IPV4',
  4110: 'IPSET_ERR_IPADDR_IPV6',
  4111: 'IPSET_ERR_COUNTER',
  4112: 'IPSET_ERR_COMMENT',
  4113: 'IPSET_ERR_INVALID_MARKMASK',
  4114: 'IPSET_ERR_SKBINFO',
  4115: 'IPSET_ERR_BITMASK_NETMASK_EXCL',
  // Type-specific codes start at 4352; podwire uses hash types (ip_set_hash.h).
  4352: 'IPSET_ERR_HASH_FULL',
  4353: 'IPSET_ERR_HASH_ELEM',
  4354: 'IPSET_ERR_INVALID_PROTO',
  4355: 'IPSET_ERR_MISSING_PROTO',
  4356: 'IPSET_ERR_HASH_RANGE_UNSUPPORTED',
  4357: 'IPSET_ERR_HASH_RANGE',
};

const ERRNO_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(constants.errno).map(([name, no]) => [no, name]),
);

/** Symbolic name of an errno (`17` → `EEXIST`), ipset's codes included. */
export function errnoName(errno: number): string {
  return ERRNO_NAMES[errno] ?? IPSET_ERRORS[errno] ?? `ERRNO_${errno}`;
}

export interface NetErrorDetails {
  /** Positive errno, or ipset's private code (≥ 4096). */
  errno: number;
  /** The operation that failed: `RTM_NEWROUTE`, `setns`, `spawn`, ... */
  op: string;
  /** Overrides the name derived from errno (e.g. `DUMP_INTERRUPTED`). */
  code?: string;
  /** The kernel's extended-ack message, when it sent one. */
  extack?: string;
  extackOffset?: number;
  /** Index of the failing message inside a multi-message request. */
  index?: number;
  /** The kernel's copy of the failing request message, when it sent one (ipset does). */
  echo?: Buffer;
  cause?: unknown;
}

/**
 * The one error class of podwire's kernel layer. Native code constructs it
 * (the class is handed to the addon at load time), so every failure carries
 * `code`, `errno` and `op`; branch on those (or on `isExist`/`isNotFound`),
 * never on the message text.
 */
export class NetError extends Error {
  readonly code: string;
  readonly errno: number;
  readonly op: string;
  // `declare`: optional fields exist only when set (no `undefined` noise).
  declare readonly extack?: string;
  declare readonly extackOffset?: number;
  declare readonly index?: number;
  declare readonly echo?: Buffer;
  /** Data received before a dump was interrupted (code DUMP_INTERRUPTED). */
  declare partial?: Buffer;

  constructor(message: string, details: NetErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.errno = details.errno;
    this.code = details.code ?? errnoName(details.errno);
    this.op = details.op;
    const self = this as { -readonly [K in keyof NetError]: NetError[K] };
    if (details.extack !== undefined) self.extack = details.extack;
    if (details.extackOffset !== undefined) self.extackOffset = details.extackOffset;
    if (details.index !== undefined) self.index = details.index;
    if (details.echo !== undefined) self.echo = details.echo;
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'NetError', enumerable: false });
  }
}

const EXIST = new Set(['EEXIST', 'IPSET_ERR_EXIST', 'IPSET_ERR_EXIST_SETNAME2']);
const NOT_FOUND = new Set(['ENOENT', 'ESRCH', 'ENODEV', 'EADDRNOTAVAIL', 'ENXIO']);

function fieldsOf(err: unknown): { code?: string; op?: string } {
  if (typeof err !== 'object' || err === null) return {};
  const { code, op } = err as { code?: unknown; op?: unknown };
  return { code: typeof code === 'string' ? code : undefined, op: typeof op === 'string' ? op : undefined };
}

// The kernel answers an ipset DEL of a missing element with IPSET_ERR_EXIST
// ("it's not added"), so that code means "missing" for deletions.
const ipsetDelMissing = (code?: string, op?: string) => code === 'IPSET_ERR_EXIST' && op === 'IPSET_CMD_DEL';

/** True when the object already exists (EEXIST, IPSET_ERR_EXIST on add, ...). */
export function isExist(err: unknown): boolean {
  const { code, op } = fieldsOf(err);
  return code !== undefined && EXIST.has(code) && !ipsetDelMissing(code, op);
}

/** True when the object is missing (ENOENT, ESRCH, ENODEV, EADDRNOTAVAIL, ENXIO; IPSET_ERR_EXIST on delete). */
export function isNotFound(err: unknown): boolean {
  const { code, op } = fieldsOf(err);
  return code !== undefined && (NOT_FOUND.has(code) || ipsetDelMissing(code, op));
}

/** A Node socket error (`code`, `errno` < 0) as a NetError with `op`; the original is the `cause`. */
export function fromNodeError(err: Error, op: string): NetError {
  if (err instanceof NetError) return err;
  const e = err as NodeJS.ErrnoException;
  const name = typeof e.code === 'string' ? e.code : undefined;
  const errno = typeof e.errno === 'number' ? Math.abs(e.errno) : name !== undefined ? (constants.errno as Record<string, number>)[name] ?? 0 : 0;
  return new NetError(err.message, { errno, op, ...(name !== undefined ? { code: name } : {}), cause: err });
}
