// A read-only host path (spec §3.1.1): the copy fails as COPY_BINARIES_FAILURE and upstream's
// global.platform hint is logged, chosen by the error's code (EROFS), never by its text.
// node:fs/promises is mocked so open() of the temporary fails with EROFS.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { copyBinaries } from '../../lib/install/binaries.js';
import { Installer } from '../../lib/install/installer.js';
import { fakeNode, fixture, installConfig, recorder } from './helpers.js';

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  return {
    ...real,
    open: vi.fn(async (path: unknown, ...rest: unknown[]) => {
      if (String(path).includes('/bin/') && String(path).includes('.tmp.')) {
        throw Object.assign(new Error(`EROFS: some message, open '${String(path)}'`), { code: 'EROFS' });
      }
      return (real.open as (...a: unknown[]) => unknown)(path, ...rest);
    }),
  };
});

describe('read-only CNI bin dir', () => {
  it('is ERR_IO with errno EROFS and logs the global.platform hint', async () => {
    const n = fakeNode();
    const r = recorder();
    await expect(copyBinaries({ source: n.source, name: 'istio-cni', targetDirs: [n.binDir] }, r.log))
      .rejects.toMatchObject({ code: 'ERR_IO', stage: 'copy-binaries', errno: 'EROFS', path: join(n.binDir, 'istio-cni') });
    expect(r.warnings()).toEqual([expect.stringContaining('global.platform=<name>')]);
  });

  it('fails the installation as COPY_BINARIES_FAILURE', async () => {
    const n = fakeNode();
    writeFileSync(join(n.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    const results: string[] = [];
    const i = new Installer(installConfig(n), { onInstall: (x) => results.push(x) });
    await expect(i.start()).rejects.toMatchObject({ errno: 'EROFS' });
    expect(results).toEqual(['COPY_BINARIES_FAILURE']);
  });
});
