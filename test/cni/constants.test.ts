// One source for what podwire-cni (C++) and the agent (TypeScript) must agree on: every
// constant in native/cni-shim/shim_constants.h names its twin in lib/cni/constants.ts
// (`// ts: NAME`), and the values must be equal; every export of constants.ts must have a
// twin there. Changing either file alone fails here.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as ts from '../../lib/cni/constants.js';

const HEADER = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'native', 'cni-shim', 'shim_constants.h');

type Value = string | number | string[];

/** The header's constants: C++ name → { TypeScript name, value }. */
function parseHeader(text: string): Map<string, { ts: string; value: Value }> {
  const out = new Map<string, { ts: string; value: Value }>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('inline constexpr')) continue;
    const m = /^inline constexpr [\w:]+ (k\w+)(\[\])? = (.+);\s*\/\/ ts: (\w+)$/.exec(line);
    if (!m) throw new Error(`shim_constants.h: a constant not in the \`inline constexpr T kName = value;  // ts: NAME\` form: ${line}`);
    const [, name, isArray, raw, tsName] = m as unknown as [string, string, string | undefined, string, string];
    const str = (s: string) => {
      if (!/^"[^"\\]*"$/.test(s)) throw new Error(`${name}: not a plain string literal: ${s}`);
      return s.slice(1, -1);
    };
    let value: Value;
    if (isArray) {
      const inner = /^\{(.*)\}$/.exec(raw.trim());
      if (!inner) throw new Error(`${name}: not a braced list: ${raw}`);
      value = inner[1]!.split(',').map((s) => str(s.trim()));
    } else if (/^-?[0-9]+$/.test(raw.trim())) {
      value = Number(raw.trim());
    } else {
      value = str(raw.trim());
    }
    if (out.has(name)) throw new Error(`${name} twice`);
    out.set(name, { ts: tsName, value });
  }
  return out;
}

describe('constants shared by podwire-cni and the agent', () => {
  const header = parseHeader(readFileSync(HEADER, 'utf8'));
  const exported = ts as unknown as Record<string, unknown>;

  it('the header holds the shared names', () => {
    expect([...header.keys()].sort()).toEqual([
      'kAgentPodNamePrefix', 'kCurrentVersion', 'kDecisionFileName', 'kDecisionFileVersion', 'kDefaultRunDir',
      'kDelQueueDirName', 'kDelQueueMax', 'kSocketName', 'kSupportedVersions',
    ]);
  });

  for (const [name, { ts: tsName, value }] of header) {
    it(`${name} = ${tsName}`, () => {
      expect(Object.keys(exported)).toContain(tsName);
      expect(exported[tsName]).toEqual(value);
    });
  }

  it('every export of lib/cni/constants.ts has its twin in the header', () => {
    const twins = new Set([...header.values()].map((v) => v.ts));
    expect(Object.keys(exported).filter((k) => !twins.has(k))).toEqual([]);
  });

  it('the parser refuses what it cannot read (so a new constant cannot slip past)', () => {
    expect(() => parseHeader('inline constexpr int kX = 1;')).toThrow();
    expect(() => parseHeader('inline constexpr std::string_view kX = "a" "b";  // ts: X')).toThrow();
    expect(parseHeader('inline constexpr std::string_view kL[] = {"a", "b"};  // ts: L').get('kL')).toEqual({ ts: 'L', value: ['a', 'b'] });
  });
});
