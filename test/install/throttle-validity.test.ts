// The reinstall throttle's token bucket (x/time/rate Reserve semantics) and the validity
// check's cases (§3.4), without the loop.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { InstallConfig } from '../../lib/install/config.js';
import type { ConfigState } from '../../lib/install/config-path.js';
import { insertEntry } from '../../lib/install/conflist.js';
import { renderPluginEntry } from '../../lib/install/plugin-entry.js';
import { InstallThrottle } from '../../lib/install/throttle.js';
import { checkCniConfig, jsonEqual } from '../../lib/install/validity.js';
import { E2E_ENTRY, fakeNode, fixture, installConfig, recorder } from './helpers.js';

describe('throttle: 0.2/s, burst 1', () => {
  it('first attempt free, then 5 s of debt per attempt; hits count delayed attempts and reset', async () => {
    let now = 0;
    const t = new InstallThrottle({ now: () => now, maxSleepMs: 1 });
    expect(t.reserve()).toBe(0);
    now = 1000;
    expect(t.reserve()).toBeCloseTo(4000);
    now = 2000;
    expect(t.reserve()).toBeCloseTo(8000);
    now = 20_000;
    expect(t.reserve()).toBe(0);

    const u = new InstallThrottle({ now: () => now, maxSleepMs: 1 });
    expect(await u.throttle()).toEqual({ hits: 0, sleptMs: 0 });
    for (let i = 1; i <= 6; i++) expect((await u.throttle()).hits).toBe(i);
    now += 60_000;
    expect(await u.throttle()).toEqual({ hits: 0, sleptMs: 0 });
  });

  it('sleeps min(delay, 1 s); stop cuts the sleep short', async () => {
    const t = new InstallThrottle();
    await t.throttle();
    const t0 = performance.now();
    const r = await t.throttle();
    expect(r.sleptMs).toBe(1000);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(990);
    const ac = new AbortController();
    const p = t.throttle(ac.signal);
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: 'ERR_STOPPED' });
  });
});

describe('validity check (§3.4)', () => {
  const entry = renderPluginEntry(E2E_ENTRY);

  function setup(files: Record<string, string>, env: Record<string, string> = {}): { cfg: InstallConfig; dir: string } {
    const node = fakeNode();
    for (const [n, t] of Object.entries(files)) writeFileSync(join(node.netDir, n), t);
    return { cfg: installConfig(node, env), dir: node.netDir };
  }
  const check = (cfg: InstallConfig, state: ConfigState) => checkCniConfig(cfg, state, entry, recorder().log);
  const merged = insertEntry(entry, fixture('pre/calico.conflist'));

  it('valid: the first config is the one we wrote and has our plugin', async () => {
    const { cfg, dir } = setup({ '10-calico.conflist': merged, '20-other.conflist': fixture('pre/calico.conflist') });
    expect(await check(cfg, { writtenPath: join(dir, '10-calico.conflist'), primaryName: '' })).toEqual({ valid: true });
  });

  it.each([
    ['nothing written yet (first call)', { '10-calico.conflist': merged }, '', 'PREEMPTED', '10-calico.conflist'],
    ['no candidates', {}, '10-calico.conflist', 'NO_CANDIDATES', ''],
    ['only invalid candidates', { '10-calico.conflist': '{}' }, '10-calico.conflist', 'NO_CANDIDATES', ''],
    ['another file sorts first', { '05-new.conflist': fixture('pre/calico.conflist'), '10-calico.conflist': merged }, '10-calico.conflist', 'PREEMPTED', '05-new.conflist'],
    ['our entry is gone', { '10-calico.conflist': fixture('pre/calico.conflist') }, '10-calico.conflist', 'NOT_INSTALLED', ''],
    ['a plugin has no string type', { '10-calico.conflist': merged.replace('"type": "portmap"', '"type": 7') }, '10-calico.conflist', 'NO_CANDIDATES', ''],
  ])('invalid: %s', async (_name, files, written, reason, primaryName) => {
    const { cfg, dir } = setup(files as Record<string, string>);
    const state = { writtenPath: written ? join(dir, written) : '', primaryName: '' };
    expect(await check(cfg, state)).toMatchObject({ valid: false, reason });
    expect(state.primaryName).toBe(primaryName);
  });

  it('with CNI_CONF_NAME a preemption is only a warning; a missing file is MISSING', async () => {
    const { cfg, dir } = setup({ '05-new.conflist': fixture('pre/calico.conflist'), '10-calico.conflist': merged }, { CNI_CONF_NAME: '10-calico.conflist' });
    const r = recorder();
    expect(await checkCniConfig(cfg, { writtenPath: join(dir, '10-calico.conflist'), primaryName: '10-calico.conflist' }, entry, r.log)).toEqual({ valid: true });
    expect(r.warnings()[0]).toContain('preempted');
    expect(await check(cfg, { writtenPath: join(dir, '30-gone.conflist'), primaryName: '' })).toMatchObject({ reason: 'MISSING' });
  });

  it('standalone: our type at the top', async () => {
    const { cfg, dir } = setup({ 'YYY-istio-cni.conf': entry }, { CHAINED_CNI_PLUGIN: 'false' });
    const state = { writtenPath: join(dir, 'YYY-istio-cni.conf'), primaryName: '' };
    expect(await check(cfg, state)).toEqual({ valid: true });
    writeFileSync(state.writtenPath, entry.replace('"type": "istio-cni"', '"type": "bridge"'));
    expect(await check(cfg, state)).toMatchObject({ reason: 'NOT_OURS' });
  });

  it('Istio-owned: first and the merge of the primary as it is (Q4: content, not just types)', async () => {
    const owned = insertEntry(entry, fixture('list.conflist'));
    const env = { ISTIO_OWNED_CNI_CONFIG: 'true', AMBIENT_ENABLED: 'true' };
    const { cfg, dir } = setup({ '02-istio-cni.conflist': owned, '10-list.conflist': fixture('list.conflist') }, env);
    const state = { writtenPath: join(dir, '02-istio-cni.conflist'), primaryName: '10-list.conflist' };
    expect(await check(cfg, state)).toEqual({ valid: true });
    writeFileSync(join(dir, '10-list.conflist'), fixture('list.conflist').replace('"500"', '"501"'));
    expect(await check(cfg, state)).toMatchObject({ reason: 'PRIMARY_DRIFT' });

    const restart = { writtenPath: '', primaryName: '' };
    expect(await check(cfg, restart)).toMatchObject({ reason: 'PREEMPTED' });
    expect(restart.primaryName).toBe('10-list.conflist');

    const r = recorder();
    const late = setup({ '10-list.conflist': fixture('list.conflist'), '20-owned.conflist': owned }, { ...env, ISTIO_OWNED_CNI_CONFIG_FILENAME: '20-owned.conflist' });
    const s2 = { writtenPath: join(late.dir, '20-owned.conflist'), primaryName: '' };
    expect(await checkCniConfig(late.cfg, s2, entry, r.log)).toMatchObject({ reason: 'OWNED_NOT_FIRST' });
    expect(s2.primaryName).toBe('10-list.conflist');
    expect(r.warnings()[0]).toContain('sorts after');
  });

  it('jsonEqual ignores key order only', () => {
    expect(jsonEqual({ a: [1, { b: 2, c: 3 }] }, { a: [1, { c: 3, b: 2 }] })).toBe(true);
    expect(jsonEqual({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
    expect(jsonEqual({ a: 1 }, { a: 1, b: undefined })).toBe(false);
  });
});
