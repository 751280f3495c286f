// PodInfo is checked before anything is written for a pod: a pod that can
// never succeed (no UID, a name that is not a string, an IP that does not
// parse, fields too big for a ZDS record) must fail at once as non-retryable
// and leave nothing behind, instead of getting rules and then failing (and
// staying cached) at the ztunnel stage.
import { parseIp } from '../net/ip.js';
import type { PodInfo } from './types.js';

/** Kubernetes UIDs are 36-character UUIDs; anything longer than this is not one. */
export const MAX_UID_LENGTH = 128;
/** DNS-1123 subdomain (pod and service account names). */
export const MAX_NAME_LENGTH = 253;
/** DNS-1123 label (namespace names). */
export const MAX_NAMESPACE_LENGTH = 63;
/** A pod has one IP per family; a few more are tolerated, not thousands. */
export const MAX_POD_IPS = 8;
/** Annotations as a whole (Kubernetes caps them at 256 KiB). */
export const MAX_ANNOTATION_BYTES = 256 * 1024;

export class InvalidPodError extends TypeError {
  readonly code = 'ERR_INVALID_POD';
  constructor(readonly field: string, message: string) {
    super(`invalid pod ${field}: ${message}`);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'InvalidPodError', enumerable: false });
  }
}

// No control characters: these strings end up in ZDS records, comments and logs.
// (A loop, not /^[\x21-\x7e]+$/: every enrollment checks four strings.)
function printable(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

function text(value: unknown, field: string, max: number, opts: { optional?: boolean } = {}): void {
  if (value === undefined && opts.optional) return;
  if (typeof value !== 'string') throw new InvalidPodError(field, `must be a string, got ${typeof value}`);
  if (value.length === 0 && opts.optional) return;
  if (value.length === 0) throw new InvalidPodError(field, 'must not be empty');
  if (value.length > max) throw new InvalidPodError(field, `is ${value.length} characters, more than ${max}`);
  if (!printable(value)) throw new InvalidPodError(field, 'must be printable ASCII without spaces');
}

/** Throws InvalidPodError (code ERR_INVALID_POD) naming the first bad field. */
export function validatePod(pod: unknown): asserts pod is PodInfo {
  if (typeof pod !== 'object' || pod === null) throw new InvalidPodError('info', 'must be an object');
  const p = pod as Record<string, unknown>;
  text(p.uid, 'uid', MAX_UID_LENGTH);
  text(p.name, 'name', MAX_NAME_LENGTH);
  text(p.namespace, 'namespace', MAX_NAMESPACE_LENGTH);
  text(p.serviceAccount, 'serviceAccount', MAX_NAME_LENGTH, { optional: true });
  if (!Array.isArray(p.ips)) throw new InvalidPodError('ips', 'must be an array of IP strings');
  if (p.ips.length > MAX_POD_IPS) throw new InvalidPodError('ips', `has ${p.ips.length} entries, more than ${MAX_POD_IPS}`);
  for (const ip of p.ips) {
    if (typeof ip !== 'string') throw new InvalidPodError('ips', 'must hold strings only');
    try {
      parseIp(ip);
    } catch {
      throw new InvalidPodError('ips', `${JSON.stringify(ip.slice(0, 64))} is not an IP address`);
    }
  }
  if (p.annotations !== undefined) {
    if (typeof p.annotations !== 'object' || p.annotations === null || Array.isArray(p.annotations))
      throw new InvalidPodError('annotations', 'must be an object of strings');
    let bytes = 0;
    for (const [k, v] of Object.entries(p.annotations)) {
      if (typeof v !== 'string') throw new InvalidPodError('annotations', `${JSON.stringify(k.slice(0, 64))} is not a string`);
      bytes += k.length + v.length;
    }
    if (bytes > MAX_ANNOTATION_BYTES) throw new InvalidPodError('annotations', `are ${bytes} bytes, more than ${MAX_ANNOTATION_BYTES}`);
  }
}
