// The image's entrypoint is the CLI bundled into one module (scripts/lib/bundle.mjs). Its modules
// find the package by paths relative to their own URL, which in a bundle is the bundle's: built two
// levels below the package root, as in the image, it must answer like bin/podwire.js — the version
// from package.json, the installer's plugin default under build/Release, the addon loaded.
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { bundleCli, bundleRoot } from '../../scripts/lib/bundle.mjs';
import { privileged } from '../helpers/privileged.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

describe('the CLI bundle', () => {
  let dir: string;
  let bundle: string;
  // dist/<temp>/podwire.mjs: two levels below the root, as dist/bundle/podwire.mjs in the image.
  beforeAll(async () => {
    dir = mkdtempSync(join(ROOT, 'dist', 'pwt-bundle-'));
    bundle = join(dir, 'podwire.mjs');
    expect(await bundleCli({ entry: join(ROOT, 'bin/podwire.js'), outfile: bundle })).toBe(statSync(bundle).size);
  }, 60_000);
  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  const cli = (...args: string[]) => spawnSync(process.execPath, [bundle, ...args], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });

  it('refuses a place its paths would not resolve from', async () => {
    expect(bundleRoot('/a/b/c/podwire.mjs')).toBe('/a');
    await expect(bundleCli({ entry: join(ROOT, 'bin/podwire.js'), outfile: join(ROOT, 'dist', 'podwire.mjs') })).rejects.toThrow(/two directories below the podwire package root/);
  });

  it('is one module: nothing of dist/ or of the bundled dependencies is imported', () => {
    const src = readFileSync(bundle, 'utf8');
    expect(src.startsWith('#!/usr/bin/env node\n')).toBe(true);
    expect(src).not.toMatch(/from ["'](\.\.?\/|prom-client|js-yaml)/);
  });

  it('takes the image\'s interpreter line: run as a program, node gets the V8 flag (which NODE_OPTIONS refuses)', async () => {
    const flagged = mkdtempSync(join(ROOT, 'dist', 'pwt-bundle-'));  // two levels below the root too
    onTestFinished(() => rmSync(flagged, { recursive: true, force: true }));
    const own = join(flagged, 'podwire.mjs');
    await bundleCli({ entry: join(ROOT, 'bin/podwire.js'), outfile: own, interpreter: `${process.execPath} --single-threaded-gc` });
    const src = readFileSync(own, 'utf8');
    expect(src.split('\n')[0]).toBe(`#!${process.execPath} --single-threaded-gc`);
    expect(src.split('\n')[1]).toBe(readFileSync(bundle, 'utf8').split('\n')[1]);  // only the #! line differs
    chmodSync(own, 0o755);
    // Run as a program (the kernel reads the #! line), a preload reporting the process's node flags.
    const preload = join(dir, 'flags.cjs');
    writeFileSync(preload, 'process.stderr.write(JSON.stringify(process.execArgv));\n');
    const r = spawnSync(own, ['--version'], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: `--require=${preload}` } });
    expect(r).toMatchObject({ status: 0, stdout: `${VERSION}\n` });
    expect(JSON.parse(r.stderr) as string[]).toContain('--single-threaded-gc');
    // Node refuses the flag in NODE_OPTIONS: the #! line is the way in for a program.
    expect(spawnSync(process.execPath, ['-e', '0'], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '--single-threaded-gc' } }).status).not.toBe(0);
    // More than one flag cannot be passed on a #! line (Linux gives the rest of the line as one argument).
    await expect(bundleCli({ entry: join(ROOT, 'bin/podwire.js'), outfile: own, interpreter: `${process.execPath} --single-threaded-gc --max-semi-space-size=2` })).rejects.toThrow(/at most one flag/);
    await expect(bundleCli({ entry: join(ROOT, 'bin/podwire.js'), outfile: own, interpreter: 'node --single-threaded-gc' })).rejects.toThrow(/absolute path/);
  }, 60_000);

  it('answers as bin/podwire.js does: version, the installer\'s plugin default', () => {
    expect(cli('--version')).toMatchObject({ status: 0, stdout: `${VERSION}\n` });
    const help = cli('agent', '--help');
    expect(help.status).toBe(0);
    expect(/CNI_PLUGIN_BINARY \/ --cni-plugin-binary\n.*\n\s+default: (\S+)/.exec(help.stdout)?.[1]).toBe(join(ROOT, 'build/Release/podwire-cni'));
    expect(help.stdout).toBe(spawnSync(process.execPath, [join(ROOT, 'bin/podwire.js'), 'agent', '--help'], { encoding: 'utf8' }).stdout);
  });

  it.skipIf(!privileged())('loads the native addon: inspect reads this netns as bin/podwire.js does', () => {
    const links = (r: ReturnType<typeof cli>) => (JSON.parse(r.stdout) as { links: Array<{ name: string }> }).links.map((l) => l.name).sort();
    const r = cli('inspect', '--json');
    expect(r.status, r.stderr).toBe(0);
    expect(links(r)).toEqual(links(spawnSync(process.execPath, [join(ROOT, 'bin/podwire.js'), 'inspect', '--json'], { encoding: 'utf8' })));
  });
});
