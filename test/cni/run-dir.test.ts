// prepareRunDir on real directories in a temp dir.
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEL_QUEUE_DIR } from '../../lib/cni/constants.js';
import { prepareRunDir, RunDirError } from '../../lib/cni/run-dir.js';

const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });

function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-rundir-'));
  dirs.push(d);
  return d;
}

const mode = (p: string) => statSync(p).mode & 0o7777;

function refusal(path: string): RunDirError {
  let err: unknown;
  try {
    prepareRunDir(path);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(RunDirError);
  return err as RunDirError;
}

describe('prepareRunDir', () => {
  it('makes a 0755 run dir (the chart\'s DirectoryOrCreate) and its DEL queue 0700', () => {
    const run = join(tmp(), 'istio-cni');
    mkdirSync(run);
    chmodSync(run, 0o755);
    mkdirSync(join(run, DEL_QUEUE_DIR));
    chmodSync(join(run, DEL_QUEUE_DIR), 0o775);
    writeFileSync(join(run, 'keep'), 'x');
    const r = prepareRunDir(run);
    expect(mode(run)).toBe(0o700);
    expect(mode(join(run, DEL_QUEUE_DIR))).toBe(0o700);
    expect(r).toMatchObject({ created: false, modeBefore: 0o755, warnings: [] });
    expect(r.changes).toHaveLength(2);
    expect(existsSync(join(run, 'keep'))).toBe(true);
    // Already right: nothing to change.
    expect(prepareRunDir(run)).toMatchObject({ modeBefore: 0o700, changes: [], warnings: [] });
  });

  it('creates a missing run dir 0700, parents included', () => {
    const run = join(tmp(), 'var', 'run', 'istio-cni');
    expect(prepareRunDir(run)).toMatchObject({ created: true });
    expect(mode(run)).toBe(0o700);
    expect(existsSync(join(run, DEL_QUEUE_DIR))).toBe(false);
  });

  it('refuses a symlink at the path and leaves its target as it was', () => {
    const base = tmp();
    const target = join(base, 'target');
    mkdirSync(target);
    chmodSync(target, 0o755);
    symlinkSync(target, join(base, 'istio-cni'));
    expect(refusal(join(base, 'istio-cni')).code).toBe('ERR_RUN_DIR_SYMLINK');
    expect(mode(target)).toBe(0o755);
    // A link to a file or a dangling link is refused as a link too (not followed, not created).
    symlinkSync(join(base, 'nowhere'), join(base, 'dangling'));
    expect(refusal(join(base, 'dangling')).code).toBe('ERR_RUN_DIR_SYMLINK');
    expect(existsSync(join(base, 'nowhere'))).toBe(false);
  });

  it('refuses a file at the path, a dir of another owner, and a relative path', () => {
    const base = tmp();
    writeFileSync(join(base, 'file'), 'x');
    expect(refusal(join(base, 'file')).code).toBe('ERR_RUN_DIR_NOT_DIR');
    mkdirSync(join(base, 'other'), { mode: 0o755 });
    chownSync(join(base, 'other'), 65534, 65534);
    expect(refusal(join(base, 'other')).code).toBe('ERR_RUN_DIR_OWNER');
    expect(mode(join(base, 'other'))).toBe(0o755);
    expect(refusal('var/run/istio-cni').code).toBe('ERR_RUN_DIR_IO');
  });

  it('refuses a shared directory rather than making it root-only', () => {
    const sticky = join(tmp(), 'shared');
    mkdirSync(sticky);
    chmodSync(sticky, 0o1777);
    expect(refusal(sticky).code).toBe('ERR_RUN_DIR_SHARED');
    expect(mode(sticky)).toBe(0o1777);
    expect(refusal('/run').code).toBe('ERR_RUN_DIR_SHARED');
    expect(refusal('/tmp/../run').code).toBe('ERR_RUN_DIR_SHARED');
  });

  it('leaves a DEL queue that is a symlink alone and warns (the drain refuses it)', () => {
    const base = tmp();
    const run = join(base, 'run');
    mkdirSync(run, { mode: 0o700 });
    const elsewhere = join(base, 'elsewhere');
    mkdirSync(elsewhere);
    chmodSync(elsewhere, 0o755);
    symlinkSync(elsewhere, join(run, DEL_QUEUE_DIR));
    const r = prepareRunDir(run);
    expect(r.warnings).toHaveLength(1);
    expect(mode(elsewhere)).toBe(0o755);
    expect(lstatSync(join(run, DEL_QUEUE_DIR)).isSymbolicLink()).toBe(true);
  });
});
