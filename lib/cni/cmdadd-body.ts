// Types and the body parser of the CNI event endpoint (istio-cni.md §2.5, §5.5): what upstream's
// plugin (`cnieventclient.go`) POSTs to `<CNI_AGENT_RUN_DIR>/pluginevent.sock` `/cmdadd`.
//
// The wire body is Go's `json.Marshal` of a struct without JSON tags, so its keys are capitalised:
//   {"Netns":"/var/run/netns/cni-…","PodName":"web-0","PodNamespace":"default",
//    "IPs":[{"Interface":0,"Address":{"IP":"10.244.0.5","Mask":"////AA=="},"Gateway":"10.244.0.1"}]}
// `IPs` is `null` when the plugin had no prevResult. Parsing follows Go's `json.Unmarshal` into that
// struct where it matters for compatibility: keys match case-insensitively (the last matching key
// wins), unknown keys are ignored, `Interface` is an integer or null, `Mask` is base64. Where Go
// would accept a body the agent cannot act on (empty pod name/namespace/netns, an empty IP), we
// answer 400 up front instead of failing later with a 500: the intended behaviour, stated here.
import { formatIp, parseIp } from '../net/ip.js';
import { nameProblem, type InvalidNameReason, type NameRule } from '../kube/names.js';
import { isJsonObject } from '../util/json.js';

/** One entry of prevResult.ips as the plugin forwards it (Go `IPConfig`). */
export interface CniIpConfig {
  /** Index into prevResult.interfaces, or null. */
  interface: number | null;
  /** `Address.IP` canonicalised (RFC 5952; an IPv4-mapped address stays mapped here, `::ffff:a.b.c.d`). */
  ip: string;
  /** `Address.Mask` decoded from base64; null when absent/null. */
  mask: Buffer | null;
  /** `Gateway`, or null when absent, null or "" (Go's nil IP). */
  gateway: string | null;
}

/** A validated `POST /cmdadd` body. */
export interface CmdAddRequest {
  /** CNI_NETNS of the sandbox, e.g. `/var/run/netns/cni-…`. */
  netns: string;
  podName: string;
  podNamespace: string;
  /** `IPs[*].Address.IP`, IPv4-mapped addresses unmapped (as upstream's agent does), in order. */
  ips: string[];
  /** The `IPs` entries in full; empty when the plugin sent `null` (no prevResult). */
  ipConfigs: CniIpConfig[];
}

export type CmdAddBodyErrorCode =
  | 'ERR_CNI_EVENT_EMPTY' | 'ERR_CNI_EVENT_JSON' | 'ERR_CNI_EVENT_FIELD'
  /** PodName is not a DNS-1123 subdomain or PodNamespace not a DNS-1123 label (`field` names it). */
  | 'ERR_CNI_EVENT_NAME';

/** The body of a `POST /cmdadd` is not what upstream's plugin sends (the client gets a 400). */
export class CmdAddBodyError extends Error {
  constructor(
    readonly code: CmdAddBodyErrorCode,
    message: string,
    /** The offending field as a JSON path (`IPs[0].Address.IP`), when there is one. */
    readonly field?: string,
    opts?: { cause?: unknown; nameReason?: InvalidNameReason },
  ) {
    super(message, opts?.cause === undefined ? undefined : { cause: opts.cause });
    if (opts?.nameReason) this.nameReason = opts.nameReason;
  }

  /** With ERR_CNI_EVENT_NAME: how the name is invalid. */
  readonly nameReason?: InvalidNameReason;

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'CmdAddBodyError', enumerable: false });
  }
}

type Obj = Record<string, unknown>;


/** Go `encoding/json` field lookup: case-insensitive, the last matching key in the object wins. */
function field(obj: Obj, name: string): unknown {
  const lname = name.toLowerCase();
  let value: unknown;
  for (const key of Object.keys(obj)) if (key.toLowerCase() === lname) value = obj[key];
  return value;
}

const bad = (path: string, what: string) => new CmdAddBodyError('ERR_CNI_EVENT_FIELD', `${path}: ${what}`, path);

function requiredString(obj: Obj, name: string): string {
  const v = field(obj, name);
  if (v === undefined || v === null || v === '') throw bad(name, 'required, must be a non-empty string');
  if (typeof v !== 'string') throw bad(name, `must be a string, got ${jsonType(v)}`);
  return v;
}

function objectName(v: string, name: string, rule: NameRule): string {
  const p = nameProblem(v, rule);
  if (p) throw new CmdAddBodyError('ERR_CNI_EVENT_NAME', `${name}: ${p.detail}`, name, { nameReason: p.reason });
  return v;
}

function jsonType(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}

/**
 * Canonical (RFC 5952, inet_ntop) text of an IP address, or undefined when `s` is not one
 * (lib/net/ip's strict parser: no zone, no leading zeros, like Go's `net.ParseIP`).
 */
function canonicalIp(s: string): string | undefined {
  try {
    return formatIp(parseIp(s).bytes);
  } catch {
    return undefined;
  }
}

/** `::ffff:a.b.c.d` → `a.b.c.d` (upstream's `netip.Addr.Unmap()`); other addresses unchanged. */
export function unmapIp(ip: string): string {
  let bytes: Buffer;
  try {
    bytes = parseIp(ip).bytes;
  } catch {
    return ip;
  }
  const mapped = bytes.length === 16 && bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  return mapped ? formatIp(bytes.subarray(12)) : ip;
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function parseIpConfig(v: unknown, path: string): CniIpConfig {
  if (!isJsonObject(v)) throw bad(path, `must be an object, got ${jsonType(v)}`);

  const iface = field(v, 'Interface');
  if (iface !== undefined && iface !== null && !(typeof iface === 'number' && Number.isSafeInteger(iface))) {
    throw bad(`${path}.Interface`, 'must be an integer or null');
  }

  const addr = field(v, 'Address');
  if (!isJsonObject(addr)) throw bad(`${path}.Address`, `required, must be an object, got ${jsonType(addr ?? null)}`);
  const rawIp = field(addr, 'IP');
  if (typeof rawIp !== 'string' || rawIp === '') throw bad(`${path}.Address.IP`, 'required, must be an IP address string');
  const ip = canonicalIp(rawIp);
  if (ip === undefined) throw bad(`${path}.Address.IP`, `not an IP address: ${JSON.stringify(rawIp)}`);

  const rawMask = field(addr, 'Mask');
  let mask: Buffer | null = null;
  if (rawMask !== undefined && rawMask !== null) {
    if (typeof rawMask !== 'string' || !BASE64.test(rawMask)) throw bad(`${path}.Address.Mask`, 'must be base64 mask bytes or null');
    mask = Buffer.from(rawMask, 'base64');
  }

  const rawGw = field(v, 'Gateway');
  let gateway: string | null = null;
  if (rawGw !== undefined && rawGw !== null && rawGw !== '') {
    if (typeof rawGw !== 'string') throw bad(`${path}.Gateway`, 'must be an IP address string or null');
    const gw = canonicalIp(rawGw);
    if (gw === undefined) throw bad(`${path}.Gateway`, `not an IP address: ${JSON.stringify(rawGw)}`);
    gateway = gw;
  }

  return { interface: typeof iface === 'number' ? iface : null, ip, mask, gateway };
}

/** Parses and validates a `POST /cmdadd` body (UTF-8 JSON). Throws `CmdAddBodyError`. */
export function parseCmdAddBody(body: Buffer | string): CmdAddRequest {
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (text.trim() === '') throw new CmdAddBodyError('ERR_CNI_EVENT_EMPTY', 'empty request body');
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new CmdAddBodyError('ERR_CNI_EVENT_JSON', `invalid JSON: ${(e as Error).message}`, undefined, { cause: e });
  }
  if (!isJsonObject(doc)) throw new CmdAddBodyError('ERR_CNI_EVENT_JSON', `body must be a JSON object, got ${jsonType(doc)}`);

  const netns = requiredString(doc, 'Netns');
  // Validated before anything looks them up: `..` as a pod name reached the API path as is.
  const podName = objectName(requiredString(doc, 'PodName'), 'PodName', 'dns-subdomain');
  const podNamespace = objectName(requiredString(doc, 'PodNamespace'), 'PodNamespace', 'dns-label');

  const rawIps = field(doc, 'IPs');
  if (rawIps !== undefined && rawIps !== null && !Array.isArray(rawIps)) throw bad('IPs', `must be an array or null, got ${jsonType(rawIps)}`);
  const ipConfigs = (rawIps ?? []).map((c, i) => parseIpConfig(c, `IPs[${i}]`));

  return { netns, podName, podNamespace, ips: ipConfigs.map((c) => unmapIp(c.ip)), ipConfigs };
}
