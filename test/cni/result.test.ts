// The agent's pass-through output (lib/cni/result.ts) against upstream's real output: every case
// in test/fixtures/cni-results/goldens.json was printed by containernetworking/cni v1.3.0 through
// the calls upstream's istio-cni plugin makes (scripts/cni-goldens; regenerate there with Go).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CniError } from '../../lib/cni/errors.js';
import { goQuote, passThrough } from '../../lib/cni/result.js';
import { SUPPORTED_VERSIONS, type CniVersion } from '../../lib/cni/version.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'cni-results', 'goldens.json');

export interface Golden { name: string; stdin: string; stdout?: string; error?: string }
export const goldens = (): Golden[] => (JSON.parse(readFileSync(FIXTURES, 'utf8')) as { cases: Golden[] }).cases;

describe('pass-through result, byte for byte as upstream prints it', () => {
  const cases = goldens();

  it('the fixtures cover every supported version, with and without dns, and failures', () => {
    for (const v of SUPPORTED_VERSIONS) {
      const mine = cases.filter((c) => c.name.startsWith(`${v}/`));
      expect(mine.some((c) => c.name === `${v}/no-prevResult` && c.stdout !== undefined)).toBe(true);
      expect(mine.filter((c) => c.stdout !== undefined).length).toBeGreaterThan(20);
      expect(mine.some((c) => c.error !== undefined)).toBe(true);
    }
    // What the issue is about: 1.x omits an empty dns, 0.x prints it.
    expect(cases.find((c) => c.name === '1.0.0/no-prevResult')!.stdout).toBe('{\n    "cniVersion": "1.0.0"\n}');
    expect(cases.find((c) => c.name === '0.4.0/empty-dns@0.4.0')!.stdout).toBe('{\n    "cniVersion": "0.4.0",\n    "dns": {}\n}');
  });

  for (const c of cases) {
    it(c.name, () => {
      const conf = JSON.parse(c.stdin) as { cniVersion: CniVersion; prevResult?: unknown };
      if (c.stdout !== undefined) {
        expect(passThrough(conf.prevResult, conf.cniVersion)).toBe(c.stdout);
      } else {
        let err: unknown;
        try { passThrough(conf.prevResult, conf.cniVersion); } catch (e) { err = e; }
        expect(err).toBeInstanceOf(CniError);
        expect((err as CniError).cniCode).toBe(6);
      }
    });
  }

  it('quotes strings as Go does', () => {
    expect(goQuote('\b\f\x01\x7f<>&\u2028\u2029\ud800x\ud83d\ude00')).toBe('"\\b\\f\\u0001\x7f\\u003c\\u003e\\u0026\\u2028\\u2029\ufffdx\ud83d\ude00"');
  });
});
