// The CNI spec versions podwire's plugin speaks (config parsing and result
// conversion). 0.1.0 and 0.2.0 predate chaining (no prevResult): refused.
import { CNI_CODES, CniError } from './errors.js';

import { CURRENT_VERSION as CURRENT, SUPPORTED_VERSIONS } from './constants.js';

export { SUPPORTED_VERSIONS };
export type CniVersion = (typeof SUPPORTED_VERSIONS)[number];
/** The version podwire implements (VERSION answers it). */
export const CURRENT_VERSION: CniVersion = CURRENT;

export function checkVersion(v: unknown): CniVersion {
  if (typeof v !== 'string' || v === '') throw new CniError(CNI_CODES.INVALID_CONFIG, 'cniVersion is missing from the network configuration');
  if (!(SUPPORTED_VERSIONS as readonly string[]).includes(v)) {
    throw new CniError(CNI_CODES.INCOMPATIBLE_VERSION, `incompatible CNI version ${v}`, `supported: ${SUPPORTED_VERSIONS.join(', ')}`);
  }
  return v as CniVersion;
}

/** Results of 1.x drop the per-IP `version` field that 0.3.x/0.4.0 carry. */
export const isV1 = (v: CniVersion): boolean => v.startsWith('1.');
