// `podwire --version` and `podwire agent --version` print package.json's version
// (what the container image test runs inside the image); extra arguments are usage errors.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

describe('--version', () => {
  it('podwire --version prints the package version alone', async () => {
    expect(VERSION).toMatch(/^\d+\.\d+\.\d+/);
    expect(await runCli('--version')).toEqual({ code: 0, out: `${VERSION}\n`, err: '' });
  });

  it('podwire agent --version prints it without reading any setting', async () => {
    const saved = process.env.AMBIENT_ENABLED;
    process.env.AMBIENT_ENABLED = 'false'; // would make `podwire agent` itself exit 2
    try {
      expect(await runCli('agent', '--version')).toEqual({ code: 0, out: `${VERSION}\n`, err: '' });
    } finally {
      if (saved === undefined) delete process.env.AMBIENT_ENABLED;
      else process.env.AMBIENT_ENABLED = saved;
    }
  });

  it('--version with anything else is a usage error', async () => {
    expect((await runCli('--version', 'extra')).code).toBe(2);
    const r = await runCli('agent', '--version', '--node-name=x');
    expect(r.code).toBe(2);
    expect(r.err).toContain('--version');
  });

  it('podwire --help and podwire agent --help mention it', async () => {
    expect((await runCli('--help')).out).toContain('podwire --version');
    expect((await runCli('agent', '--help')).out).toContain('podwire agent --version');
  });
});
