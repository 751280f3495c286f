// The one atomic-write module (the installer's CNI files, the decision file, state files): both
// variants replace a symlink at the target instead of writing through it, set the mode whatever
// the umask, leave no temporary behind, and name 'suffix' temporaries as removeTmpLeftovers expects.
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { removeTmpLeftovers, tmpPrefix, writeFileAtomic, writeFileAtomicSync } from '../../lib/util/atomic-write.js';

const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });
const scratch = () => { const d = mkdtempSync(join(tmpdir(), 'pwt-aw-')); dirs.push(d); return d; };

describe.each([
  ['sync', (f: string, d: string, o: Parameters<typeof writeFileAtomicSync>[2]) => (async () => writeFileAtomicSync(f, d, o))()],
  ['async', (f: string, d: string, o: Parameters<typeof writeFileAtomic>[2]) => writeFileAtomic(f, d, o)],
] as const)('writeFileAtomic (%s)', (_kind, write) => {
  it('replaces a symlink at the target, never the file it points to, with the mode asked for', async () => {
    const dir = scratch();
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'keep');
    const target = join(dir, 'state.json');
    symlinkSync(victim, target);
    const umask = process.umask(0o077);
    try {
      await write(target, 'new', { mode: 0o644 });
    } finally {
      process.umask(umask);
    }
    expect(readFileSync(victim, 'utf8')).toBe('keep');
    expect(lstatSync(target).isFile()).toBe(true);
    expect(lstatSync(target).mode & 0o777).toBe(0o644);
    expect(readFileSync(target, 'utf8')).toBe('new');
    expect(readdirSync(dir).sort()).toEqual(['state.json', 'victim']);
  });

  it("names 'suffix' temporaries <name>.tmp.<hex>, which removeTmpLeftovers takes away", async () => {
    const dir = scratch();
    const target = join(dir, '10-calico.conflist');
    writeFileSync(join(dir, `${tmpPrefix('10-calico.conflist')}deadbeef`), 'left by a crash');
    await write(target, '{}', { mode: 0o600, mkdir: false, tmp: 'suffix' });
    expect(await removeTmpLeftovers(dir, '10-calico.conflist')).toEqual([`${tmpPrefix('10-calico.conflist')}deadbeef`]);
    expect(readdirSync(dir)).toEqual(['10-calico.conflist']);
  });

  it('fails without a temporary left when the directory is missing and mkdir is off', async () => {
    const dir = scratch();
    await expect(write(join(dir, 'no', 'such'), 'x', { mkdir: false })).rejects.toMatchObject({ code: 'ENOENT' });
    expect(readdirSync(dir)).toEqual([]);
  });
});
