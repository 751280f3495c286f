// The layering of lib/ (docs/development.md "Layout"; the design map's rule: no folder imports one above it): a folder imports only folders of its own layer
// or below, never one above; lib/agent is imported by the CLI alone. Read from the sources, so a
// new upward import fails here rather than in review.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const LIB = resolve(dirname(fileURLToPath(import.meta.url)), '../../lib');

/**
 * Layer of each top-level part of lib/ (higher may import lower or equal, never the other way).
 * util/ holds leaf helpers (timeouts, atomic writes, locks, the logger, HTTP bounds) that import
 * nothing of lib/, so every layer may use them, the library in net/ included. settings/ (the
 * settings framework and the node's settings table, which compiles enablement selectors from
 * mesh/) sits just below the agent, installer and repair controller that read it.
 */
const LAYER: Record<string, number> = {
  'native.ts': 0,
  util: 0.5,
  net: 1,
  kube: 2, redirect: 2, zds: 2,
  mesh: 3, dataplane: 3, settings: 3,
  install: 4, cni: 4, ambient: 4, repair: 4,
  agent: 5,
  testing: 6, demo: 6,
  cli: 7,
  'index.ts': 8,
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

const partOf = (file: string) => relative(LIB, file).split(sep)[0]!;

/** Every relative import (static, dynamic, re-export, type-only) of a module, resolved to a lib/ path. */
function importsOf(file: string): string[] {
  const src = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of src.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)'(\.{1,2}\/[^']+)'/g)) out.push(resolve(dirname(file), m[1]!));
  return out;
}

const edges = files(LIB).flatMap((f) => importsOf(f).map((to) => ({ from: relative(LIB, f), fromPart: partOf(f), toPart: partOf(to), to: relative(LIB, to) })));

describe('lib/ layering', () => {
  it('knows every top-level part of lib/', () => {
    expect(readdirSync(LIB).filter((n) => !(n in LAYER))).toEqual([]);
    expect(edges.length).toBeGreaterThan(500);  // the scan found the imports at all
  });

  it('no import runs up a layer', () => {
    const up = edges.filter((e) => LAYER[e.toPart]! > LAYER[e.fromPart]!).map((e) => `${e.from} → ${e.to}`);
    expect(up).toEqual([]);
  });

  it('util/ is a leaf: it imports nothing of lib/', () => {
    expect(edges.filter((e) => e.fromPart === 'util' && e.toPart !== 'util').map((e) => `${e.from} → ${e.to}`)).toEqual([]);
  });

  it('lib/agent is imported only by the CLI (and the package entries)', () => {
    const users = edges.filter((e) => e.toPart === 'agent' && e.fromPart !== 'agent').map((e) => e.fromPart);
    expect([...new Set(users)].filter((p) => p !== 'cli' && p !== 'index.ts')).toEqual([]);
  });
});
