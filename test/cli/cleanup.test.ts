// `podwire cleanup`: what a killed demo leaves behind (namespaces with their
// nsfs mounts, its run dir, its IPAM dir) is found and removed; a live run's
// things and names carrying a live pid are left alone. The demo runs as a
// child with TMPDIR pointing at a private directory, so its run and IPAM dirs
// land there and nothing outside it (or outside pwt- names) is touched.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cniAvailable } from '../../lib/demo/cni.js';
import { createRunDir, MARKER_FILE } from '../../lib/demo/leftovers.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { runCli, spawnCli, type SpawnedCli } from '../helpers/cli.js';
import { privileged } from '../helpers/privileged.js';

const netnsWith = (prefix: string) => Netns.list().filter((n) => n.startsWith(prefix));
const mountsWith = (prefix: string) => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(` /run/netns/${prefix}`));
const entriesWith = (dir: string, prefix: string) => readdirSync(dir).filter((n) => n.startsWith(prefix));

const prefixes: string[] = [];
const dirs: string[] = [];
const children: SpawnedCli[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    c.child.kill('SIGKILL');
    await c.done;
  }
  for (const p of prefixes.splice(0)) for (const n of netnsWith(p)) await Netns.remove(n);
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function privateTmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-cleanup-'));
  dirs.push(d);
  return d;
}

function usePrefix(tag: string): string {
  const p = `pwt-${process.pid}-${tag}-`;
  prefixes.push(p);
  return p;
}

async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The pid of a process that has exited (and been reaped). */
const deadPid = () => spawnSync('true').pid!;

describe.skipIf(!privileged('nft'))('podwire cleanup', () => {
  it('removes everything a demo killed with SIGKILL mid-run left behind', async () => {
    const tmp = privateTmp();
    const prefix = usePrefix('cl');
    const cni = cniAvailable();
    const demo = spawnCli(['demo', '--pods', '30', '--prefix', prefix, ...(cni ? ['--cni'] : [])], { env: { TMPDIR: tmp } });
    children.push(demo);
    const ipam = join(tmp, `${prefix}cni-ipam`);
    await until(() => netnsWith(`${prefix}pod-`).length >= 2 && (!cni || existsSync(ipam)), 60_000, 'the demo\'s namespaces');
    demo.child.kill('SIGKILL');
    expect((await demo.done).signal).toBe('SIGKILL');

    // What it left: namespaces with their mounts, its run dir with the marker, the IPAM dir.
    expect(netnsWith(prefix)).toContain(`${prefix}node`);
    expect(mountsWith(prefix).length).toBeGreaterThan(0);
    const runDirs = entriesWith(tmp, prefix).filter((n) => existsSync(join(tmp, n, MARKER_FILE)));
    expect(runDirs).toHaveLength(1);
    if (cni) expect(existsSync(ipam)).toBe(true);

    const r = await spawnCli(['cleanup', '--prefix', prefix], { env: { TMPDIR: tmp }, timeoutMs: 60_000 }).done;
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`removed netns ${prefix}node`);
    expect(r.out).toContain(`removed dir ${join(tmp, runDirs[0]!)}`);
    expect(netnsWith(prefix)).toEqual([]);
    expect(mountsWith(prefix)).toEqual([]);
    expect(entriesWith(tmp, prefix)).toEqual([]);

    const again = await spawnCli(['cleanup', '--prefix', prefix], { env: { TMPDIR: tmp }, timeoutMs: 60_000 }).done;
    expect(again.code).toBe(0);
    expect(again.out).not.toContain('removed');
  }, 120_000);

  it('leaves a live run alone and removes it once its process is gone', async () => {
    const tmp = privateTmp();
    const prefix = usePrefix('lv');
    const runDir = createRunDir(prefix, tmp);                   // marker: this (live) process
    await Netns.create(`${prefix}node`).then((ns) => ns.close());
    mkdirSync(join(tmp, `${prefix}cni-ipam`));
    const env = { TMPDIR: tmp };

    const live = await spawnCli(['cleanup', '--prefix', prefix], { env, timeoutMs: 60_000 }).done;
    expect(live.code, live.err).toBe(0);
    expect(live.out).not.toContain('removed');
    expect(netnsWith(prefix)).toEqual([`${prefix}node`]);
    expect(existsSync(runDir) && existsSync(join(tmp, `${prefix}cni-ipam`))).toBe(true);

    // The same run, dead: its marker now decides over the (live) pid in the names.
    const marker = JSON.parse(readFileSync(join(runDir, MARKER_FILE), 'utf8')) as { pid: number };
    writeFileSync(join(runDir, MARKER_FILE), JSON.stringify({ ...marker, pid: deadPid() }));
    const dead = await spawnCli(['cleanup', '--prefix', prefix], { env, timeoutMs: 60_000 }).done;
    expect(dead.code, dead.err).toBe(0);
    expect(netnsWith(prefix)).toEqual([]);
    expect(entriesWith(tmp, prefix)).toEqual([]);
  }, 60_000);

  it('skips unmarked names that carry the pid of a live process, removes those of a dead one', async () => {
    const env = { TMPDIR: privateTmp() };
    const live = usePrefix('np');
    // Not pwt-: a concurrent suite's global setup sweeps pwt-<dead pid>- names and would remove it under us.
    const dead = `pwtdead-${deadPid()}-np-`;
    prefixes.push(dead);
    for (const n of [`${live}node`, `${dead}node`]) await Netns.create(n).then((ns) => ns.close());
    const skipped = await spawnCli(['cleanup', '--prefix', live], { env, timeoutMs: 60_000 }).done;
    expect(skipped.code, skipped.err).toBe(0);
    expect(skipped.out).toContain(`skipped netns ${live}node`);
    expect(netnsWith(live)).toEqual([`${live}node`]);
    const dry = await spawnCli(['cleanup', '--prefix', dead, '--dry-run'], { env, timeoutMs: 60_000 }).done;
    expect(dry.code, dry.err).toBe(0);
    expect(dry.out).toContain(`would remove netns ${dead}node`);
    expect(netnsWith(dead)).toEqual([`${dead}node`]);            // --dry-run removes nothing
    const r = await spawnCli(['cleanup', '--prefix', dead], { env, timeoutMs: 60_000 }).done;
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`removed netns ${dead}node`);
    expect(netnsWith(dead)).toEqual([]);
    expect(netnsWith(live)).toEqual([`${live}node`]);
  }, 60_000);

  it('the demo refuses to build over an earlier run\'s leftovers and says how to remove them', async () => {
    const prefix = usePrefix('lo');
    await Netns.create(`${prefix}node`).then((ns) => ns.close());
    const r = await runCli('demo', '--pods', '1', '--prefix', prefix);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`podwire cleanup --prefix ${prefix}`);
    expect(netnsWith(prefix)).toEqual([`${prefix}node`]);   // not torn down by the refused run
  });

  it('has nothing to do: exit 0', async () => {
    const r = await spawnCli(['cleanup', '--prefix', usePrefix('none')], { env: { TMPDIR: privateTmp() }, timeoutMs: 60_000 }).done;
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain('nothing to clean up');
  }, 60_000);
});
