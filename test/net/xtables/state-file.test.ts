// The iptables backend state file is written atomically and never through a
// symlink planted in its directory (lib/util/atomic-write.ts).
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { detectBackend } from '../../../lib/net/xtables/iptables.js';
import { writeFileAtomicSync } from '../../../lib/util/atomic-write.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-atomic-'));
  dirs.push(dir);
  return dir;
}

/** A file standing in for a root-owned file elsewhere, and symlinks to it at every name a writer might use. */
function plant(dir: string, file: string): { victim: string; links: string[] } {
  const victim = join(dir, 'victim');
  writeFileSync(victim, 'precious\n', { mode: 0o600 });
  const names = [`${file}.${process.pid}.tmp`, `${file}.tmp`, `${file}~`, join(dir, `.${file.split('/').pop()!}.tmp`)];
  for (const n of names) symlinkSync(victim, n);
  return { victim, links: names };
}

describe('writeFileAtomicSync', () => {
  it('replaces the file, fsyncs and leaves no temporary file', () => {
    const dir = tempDir();
    const file = join(dir, 'sub', 'state.json');
    writeFileAtomicSync(file, 'one\n', { mode: 0o644 });
    writeFileAtomicSync(file, 'two\n', { mode: 0o644 });
    expect(readFileSync(file, 'utf8')).toBe('two\n');
    expect(statSync(file).mode & 0o777).toBe(0o644);
    expect(readdirSync(join(dir, 'sub'))).toEqual(['state.json']);
  });

  it('defaults to mode 0600 whatever the umask', () => {
    const file = join(tempDir(), 'secret');
    const old = process.umask(0);
    try {
      writeFileAtomicSync(file, 'x');
    } finally {
      process.umask(old);
    }
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('never writes through a symlink at a temporary name or at the target', () => {
    const dir = tempDir();
    const file = join(dir, 'state.json');
    const { victim, links } = plant(dir, file);
    symlinkSync(victim, file);  // the target itself is a planted link
    writeFileAtomicSync(file, 'new\n');
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(lstatSync(file).isSymbolicLink()).toBe(false);
    expect(readFileSync(file, 'utf8')).toBe('new\n');
    for (const l of links) expect(lstatSync(l).isSymbolicLink()).toBe(true);  // left alone, not replaced
  });

  it('fails with the fs code when the directory cannot be used, leaving nothing behind', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'file'), '');
    let err: unknown;
    try {
      writeFileAtomicSync(join(dir, 'file', 'state.json'), 'x', { mkdir: false });
    } catch (e) {
      err = e;
    }
    expect((err as { code?: string }).code).toBe('ENOTDIR');
    expect(readdirSync(dir)).toEqual(['file']);
  });
});

describe.skipIf(!privileged('iptables-nft', 'ip6tables-nft'))('detectBackend state file', () => {
  it('does not follow a symlink planted at the old temporary path (a root-owned file was overwritten)', async () => {
    const ns = await freshNetns();
    const dir = tempDir();
    mkdirSync(join(dir, 'state'));
    const file = join(dir, 'state', 'iptables-backend.json');
    const { victim } = plant(join(dir, 'state'), file);
    const b = await detectBackend({ netns: ns, stateFile: file, env: { FORCE_IPTABLES_BINARY: 'nft' } });
    expect(b.source).toBe('env');
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(lstatSync(file).isFile()).toBe(true);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ mode: 'nft' });
    expect(existsSync(file)).toBe(true);
    expect((await detectBackend({ netns: ns, stateFile: file, env: {} })).source).toBe('state');
  });
});
