// The DaemonSet image (deploy/image/build.mjs) in a real containerd + runc
// (test/helpers/containerd.ts): built here (or reused from ~/.cache/podwire/image
// when its inputs did not change), imported with `ctr images import`, and run
// over CRI as the kubelet runs the DaemonSet (a hostNetwork, privileged pod):
// the chart's `podwire agent` (+ `--version`) through the image's PATH,
// podwire-cni's CNI VERSION answer at the path the installer copies from, the
// addon loading, and the image's own iptables (legacy and nft) and nft
// programming Istio's in-pod rules — in the test's pwt- node netns (the pod's
// "host"), where the host's tools read them back.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Netns } from '../../lib/net/netns/netns.js';
import { CONTAINERD_TOOLS, CRI_NAMESPACE, CriNode, startContainerd, type Containerd, type Sandbox } from '../helpers/containerd.js';
import { ContainerState, NamespaceMode } from '../helpers/cri.js';
import { nsName } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const TAG = `localhost/podwire:${VERSION}`;
const APP = '/opt/podwire';
const inCI = process.env.CI === 'true' || process.env.CI === '1';
// Istio's in-pod rule set (ambient) for both families: what the agent programs in every pod.
const INPOD = ['--kind', 'inpod', '--ipv6'];

function cacheDir(): string {
  return process.env.PODWIRE_IMAGE_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'podwire', 'image');
}

function has(tool: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1"', 'sh', tool], { stdio: 'ignore' }).status === 0;
}

function prerequisites(): boolean {
  if (!privileged(...CONTAINERD_TOOLS, 'iptables-legacy-save', 'nft')) return false;
  // The build script names everything else it lacks; buildah is the one a dev machine may not have.
  if (has('buildah')) return true;
  const msg = 'the image test needs buildah (apt-get install buildah)';
  if (inCI) throw new Error(`${msg} (CI=true: refusing to skip)`);
  process.stderr.write(`SKIPPING image tests: ${msg}\n`);
  return false;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Manifest {
  config: { digest: string };
  layers: Array<{ digest: string; size: number; mediaType: string }>;
}

/** A file of an OCI archive. */
function fromArchive(archive: string, name: string): Buffer {
  const r = spawnSync('tar', ['-xOf', archive, name], { maxBuffer: 256 << 20 }); // the layer is ~140 MB
  if (r.status !== 0) throw new Error(`tar -xOf ${archive} ${name}: ${r.stderr.toString()}`);
  return r.stdout;
}

const blob = (digest: string): string => `blobs/sha256/${digest.slice('sha256:'.length)}`;

describe.skipIf(!prerequisites())('the DaemonSet image in containerd', () => {
  let archive = '';
  let nodeName = '';
  let node: Netns | undefined;
  let ctrd: Containerd | undefined;
  let cri: CriNode | undefined;
  let pod: Sandbox | undefined;
  let work = '';
  let seq = 0;
  const timings: Record<string, number> = {};

  /**
   * One container of the image in the host-network sandbox through CRI, as the kubelet runs the
   * DaemonSet's (stdin closed; `privileged` as the chart's), until it exits: its exit code and what
   * its CRI log holds per stream. (CRI rather than `ctr run`: ctr can drop a short-lived task's
   * output, and never closes its stdin.)
   */
  const run = async (c: { command?: string[]; args?: string[]; env?: Record<string, string>; privileged?: boolean }): Promise<Run> => {
    const name = `c${++seq}`;
    const id = await ctrd!.cri.createContainer(pod!.id, {
      metadata: { name }, image: { image: TAG }, logPath: `${name}.log`, command: c.command, args: c.args,
      envs: Object.entries(c.env ?? {}).map(([key, value]) => ({ key, value })),
      linux: {
        securityContext: {
          privileged: c.privileged ?? false,
          namespaceOptions: { network: NamespaceMode.NODE, pid: NamespaceMode.CONTAINER, ipc: NamespaceMode.POD }, // the kubelet's for hostNetwork
        },
      },
    }, pod!.config);
    await ctrd!.cri.startContainer(id);
    const end = Date.now() + 30_000;
    let st = await ctrd!.cri.containerStatus(id);
    while (st?.state !== ContainerState.EXITED) {
      if (Date.now() > end) throw new Error(`container ${JSON.stringify(c)} did not exit in 30 s (state ${st?.state})`);
      await new Promise((r) => setTimeout(r, 20));
      st = await ctrd!.cri.containerStatus(id);
    }
    const out = { stdout: '', stderr: '' };
    const logFile = join(pod!.config.logDirectory!, `${name}.log`);
    for (const line of readFileSync(logFile, 'utf8').split('\n').filter(Boolean)) {
      const m = /^\S+ (stdout|stderr) ([FP]) (.*)$/.exec(line);
      if (!m) throw new Error(`not a CRI log line in ${logFile}: ${line}`);
      out[m[1] as 'stdout' | 'stderr'] += m[3]! + (m[2] === 'F' ? '\n' : '');
    }
    await ctrd!.cri.removeContainer(id);
    return { code: st.exitCode, ...out };
  };
  const ok = (r: Run): string => {
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    return r.stdout;
  };

  beforeAll(async () => {
    const t0 = performance.now();
    archive = join(cacheDir(), `podwire-${VERSION}.oci.tar`);
    mkdirSync(cacheDir(), { recursive: true });
    const build = spawnSync(process.execPath, [join(ROOT, 'deploy/image/build.mjs'), '--out', archive, '--reuse'], { encoding: 'utf8', timeout: 300_000 });
    expect(build.status, `deploy/image/build.mjs failed:\n${build.stderr}`).toBe(0);
    process.stderr.write(build.stderr);
    timings.build = Math.round(performance.now() - t0);

    cri = await CriNode.create(nsName());
    ({ name: nodeName, ns: node, work } = cri);
    // No conflist: the one pod here is host-network, so no CNI plugin runs.
    for (const d of ['net.d', 'bin']) mkdirSync(join(work, d));
    const t1 = performance.now();
    ctrd = await startContainerd({
      nodeNetns: nodeName, cniConfDir: join(work, 'net.d'), cniBinDir: join(work, 'bin'),
      images: [{ ref: TAG, tarball: archive }], startTimeoutMs: 120_000,
    });
    timings.containerdAndImport = Math.round(performance.now() - t1);
    // hostNetwork and privileged, like the DaemonSet: no CNI involved (the conf dir is empty), no
    // hostname of its own (the kubelet sets none); "host" here is the pwt- node netns.
    pod = await ctrd.runPod({
      name: 'istio-cni-node-test', namespace: 'istio-system',
      extra: { hostname: '', linux: { securityContext: { privileged: true, namespaceOptions: { network: NamespaceMode.NODE, pid: NamespaceMode.CONTAINER, ipc: NamespaceMode.POD } } } },
    });
  }, 420_000);

  afterAll(async () => {
    console.log(`image test timings (ms): ${JSON.stringify(timings)}`);
    await cri?.teardown(ctrd);
  }, 60_000);

  it('is one uncompressed layer under 150 MB, entrypoint podwire agent, the version labelled', () => {
    const index = JSON.parse(fromArchive(archive, 'index.json').toString()) as { manifests: Array<{ digest: string; annotations?: Record<string, string> }> };
    expect(index.manifests).toHaveLength(1);
    expect(index.manifests[0]!.annotations?.['org.opencontainers.image.ref.name']).toBe(TAG);
    const manifest = JSON.parse(fromArchive(archive, blob(index.manifests[0]!.digest)).toString()) as Manifest;
    expect(manifest.layers).toHaveLength(1);
    expect(manifest.layers[0]!.mediaType).toBe('application/vnd.oci.image.layer.v1.tar');
    const size = manifest.layers[0]!.size;
    console.log(`image layer: ${(size / 1e6).toFixed(1)} MB uncompressed`);
    expect(size).toBeLessThan(150e6);
    const config = JSON.parse(fromArchive(archive, blob(manifest.config.digest)).toString()) as {
      os: string; config: { Entrypoint: string[]; Cmd: string[]; Env: string[]; User: string; Labels: Record<string, string> };
    };
    expect(config.os).toBe('linux');
    expect(config.config).toMatchObject({ Entrypoint: ['/usr/local/bin/podwire'], Cmd: ['agent'], User: '0:0' });
    expect(config.config.Env).toContain('PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
    // The agent's measured memory settings (docs/benchmarks.md, "Agent memory").
    expect(config.config.Env).toEqual(expect.arrayContaining(['NODE_OPTIONS=--max-semi-space-size=2', 'MALLOC_ARENA_MAX=2']));
    expect(config.config.Labels['org.opencontainers.image.version']).toBe(VERSION);
    // FROM scratch: no shell, no package manager, no dev dependencies.
    const files = spawnSync('tar', ['-tf', '-'], { input: fromArchive(archive, blob(manifest.layers[0]!.digest)), maxBuffer: 64 << 20, encoding: 'utf8' }).stdout.split('\n');
    expect(files.length).toBeGreaterThan(1000);
    expect(files).toContain('usr/bin/node');
    expect(files).toContain(`${APP.slice(1)}/build/Release/podwire-cni`);
    // The entrypoint is the CLI as one module (scripts/lib/bundle.mjs): ~80 ms sooner ready than ~200 modules.
    expect(files).toContain(`${APP.slice(1)}/dist/bundle/podwire.mjs`);
    expect(files.filter((f) => /^usr\/bin\/(sh|bash|dash|apt|dpkg)$/.test(f))).toEqual([]);
    expect(files.filter((f) => /node_modules\/(vitest|typescript|vite|prebuildify|esbuild|@esbuild|@types)\//.test(f))).toEqual([]);
    expect(files.filter((f) => /\.(map|d\.ts)$/.test(f))).toEqual([]);
  });

  it('containerd lists it under its tag', async () => {
    expect(await ctrd!.cri.imageStatus(TAG)).toBeDefined();
    expect(ok(ctrd!.exec(['ctr', '-a', ctrd!.socket, '-n', CRI_NAMESPACE, 'images', 'ls', '-q']))).toContain(TAG);
  });

  it('runs the chart\'s command: podwire agent --version, through the image\'s PATH', async () => {
    const t0 = performance.now();
    expect(await run({ command: ['podwire', 'agent'], args: ['--version'] })).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
    timings.runVersion = Math.round(performance.now() - t0);
    expect(await run({ command: ['podwire'], args: ['--version'] })).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
    // That `podwire` is the bundle, not bin/podwire.js on dist/, and runs node with --single-threaded-gc (its #! line: NODE_OPTIONS refuses the flag).
    expect(await run({ command: ['node', '-e', "process.stdout.write(require('fs').readlinkSync('/usr/local/bin/podwire'))"] })).toEqual({ code: 0, stdout: `${APP}/dist/bundle/podwire.mjs`, stderr: '' });
    expect(await run({ command: ['node', '-e', `process.stdout.write(require('fs').readFileSync('${APP}/dist/bundle/podwire.mjs', 'utf8').split('\\n')[0])`] })).toEqual({ code: 0, stdout: '#!/usr/bin/node --single-threaded-gc', stderr: '' });
    // No command: the image's entrypoint + cmd are `podwire agent`, which refuses to start without NODE_NAME (exit 2, naming it).
    const agent = await run({});
    expect(agent.code).toBe(2);
    expect(agent.stderr).toContain('NODE_NAME');
  });

  it('podwire-cni answers CNI VERSION as the built plugin does, at the installer\'s default path and on PATH', async () => {
    const host = spawnSync(join(ROOT, 'build/Release/podwire-cni'), [], { env: { CNI_COMMAND: 'VERSION' }, input: '', encoding: 'utf8' });
    expect(host.status).toBe(0);
    const cni = await run({ command: [`${APP}/build/Release/podwire-cni`], env: { CNI_COMMAND: 'VERSION' } });
    expect(cni).toEqual({ code: 0, stdout: host.stdout, stderr: '' });
    const v = JSON.parse(cni.stdout) as { cniVersion: string; supportedVersions: string[] };
    expect(v.supportedVersions).toEqual(expect.arrayContaining(['0.3.1', '0.4.0', '1.0.0']));
    expect((await run({ command: ['podwire-cni'], env: { CNI_COMMAND: 'VERSION' } })).stdout).toBe(cni.stdout);
    // ... which is what the agent's installer copies to the node unless CNI_PLUGIN_BINARY says otherwise.
    const help = ok(await run({ command: ['podwire', 'agent'], args: ['--help'] }));
    expect(/CNI_PLUGIN_BINARY \/ --cni-plugin-binary\n.*\n\s+default: (\S+)/.exec(help)?.[1]).toBe(`${APP}/build/Release/podwire-cni`);
  });

  it('loads the addon: podwire inspect in the container reads the node netns as the host does', async () => {
    const out = JSON.parse(ok(await run({ command: ['podwire', 'inspect', '--json'], privileged: true }))) as { links: Array<{ name: string; index: number }> };
    const links = (await (await node!.netlink()).links.list()).map((l) => `${l.index}:${l.name}`);
    expect(out.links.map((l) => `${l.index}:${l.name}`)).toEqual(links);
  });

  it('has iptables legacy + nft (both families, save/restore) and nft', async () => {
    const tools = [
      ['iptables-legacy', 'legacy'], ['ip6tables-legacy-save', 'legacy'], ['iptables-legacy-restore', 'legacy'],
      ['iptables-nft', 'nf_tables'], ['ip6tables-nft-restore', 'nf_tables'], ['iptables-save', 'nf_tables'],
    ];
    for (const [tool, variant] of tools) expect(ok(await run({ command: [tool!, '--version'] }))).toMatch(new RegExp(`v1\\.\\d+\\.\\d+ \\(${variant}\\)`));
    expect(ok(await run({ command: ['nft', '--version'] }))).toMatch(/^nftables v1\./);
  });

  it.each([
    ['iptables-legacy', 'iptables', 'legacy'],
    ['iptables-nft', 'iptables', 'nft'],
    ['nftables (nft)', 'nftables', ''],
  ])('programs, verifies and removes the in-pod rules with the image\'s %s', async (_label, backend, mode) => {
    const args = ['--netns', '/proc/self/ns/net', ...INPOD, '--backend', backend, ...(mode ? ['--iptables-mode', mode] : [])];
    const rules = (verb: string) => run({ command: ['podwire', 'rules', verb, ...args], privileged: true });
    ok(await rules('apply'));
    // A second container, the same (node) netns: the image's podwire finds every rule in place ...
    ok(await rules('verify'));
    // ... and the host's tools read them back.
    const seen = backend === 'nftables'
      ? await node!.spawn(['nft', 'list', 'tables'])
      : await node!.spawn([mode === 'legacy' ? 'iptables-legacy-save' : 'iptables-nft-save', '-t', 'nat']);
    expect(seen.code, seen.stderr).toBe(0);
    expect(seen.stdout).toMatch(backend === 'nftables' ? /table inet istio-ambient-nat/ : /:ISTIO_OUTPUT/);
    ok(await rules('remove'));
    expect((await rules('verify')).code).toBe(1); // nothing left to find
  });

  it('leaves no container or task behind but the sandbox', () => {
    const ctr = ['ctr', '-a', ctrd!.socket, '-n', CRI_NAMESPACE];
    expect(ok(ctrd!.exec([...ctr, 'containers', 'ls', '-q'])).trim().split('\n')).toEqual([pod!.id]);
    expect(ok(ctrd!.exec([...ctr, 'tasks', 'ls', '-q'])).trim().split('\n')).toEqual([pod!.id]);
    expect(existsSync(archive)).toBe(true);
  });
});
