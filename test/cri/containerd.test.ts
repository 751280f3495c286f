// The real-runtime harness (test/helpers/containerd.ts) against Debian's
// containerd 1.6 + runc, the test playing the kubelet over CRI: one containerd
// per file in a pwt- node netns, a conflist of Debian's bridge + host-local and
// the pwt-spy chained plugin. RunPodSandbox wires a reachable pod (v4 + v6) and
// hands the chain the kubelet's CNI_ARGS; Stop + Remove undo it (netns, veth,
// lease); a plugin failing with CNI code 11 fails RunPodSandbox with its message
// and containerd runs DEL; a busybox container serves HTTP to the node; and after
// stop the host is as it was (no cni-* netns, /var/lib/cni, /run/containerd,
// links, cgroups or temp dirs).
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Netns } from '../../lib/net/netns/netns.js';
import { connectTcp } from '../../lib/net/sock/connect.js';
import { listenTcp } from '../../lib/net/sock/listen.js';
import {
  bridgeConflist, debianCniAvailable, makeCniBinDir, readSpyLog, spyPlugin, writeConflist, writeSpyPlugin,
} from '../helpers/cni-fixtures.js';
import { cgroupMounts, CONTAINERD_TOOLS, CriNode, startContainerd, type Containerd } from '../helpers/containerd.js';
import { ContainerState, SANDBOX_READY } from '../helpers/cri.js';
import { GrpcError } from '../helpers/grpc.js';
import { busyboxAvailable, busyboxImage, BUSYBOX_REF } from '../helpers/oci-image.js';
import { nsName } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const inCI = process.env.CI === 'true' || process.env.CI === '1';

function prerequisites(): boolean {
  if (!privileged(...CONTAINERD_TOOLS)) return false;
  const gone: string[] = [];
  if (!debianCniAvailable()) gone.push('containernetworking-plugins (/usr/lib/cni/bridge, host-local)');
  if (!busyboxAvailable()) gone.push('busybox-static (/bin/busybox, static)');
  if (gone.length === 0) return true;
  const msg = `CRI tests need: ${gone.join(', ')}`;
  if (inCI) throw new Error(`${msg} (CI=true: refusing to skip)`);
  process.stderr.write(`SKIPPING CRI tests: ${msg}\n`);
  return false;
}

const BRIDGE = 'pwtcbr0';
const SUBNET4 = '10.88.7.';
const SUBNET6 = 'fd00:88:7::';

async function until<T>(what: string, check: () => T | Promise<T>, timeoutMs = 5000): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** What must look the same on the host before the containerd starts and after it stopped. */
function hostState(): Record<string, unknown> {
  const list = (d: string): string[] | null => (existsSync(d) ? readdirSync(d).sort() : null);
  return {
    cniNetns: readdirSync('/var/run/netns').filter((n) => n.startsWith('cni-')).sort(),
    varLibCni: list('/var/lib/cni'),
    varLibCniResults: list('/var/lib/cni/results'),
    runContainerd: list('/run/containerd'),
    optContainerd: list('/opt/containerd'),
    etcCniNetD: list('/etc/cni/net.d'),
    ourCgroups: cgroupMounts().flatMap((m) => (existsSync(m) ? readdirSync(m) : []).filter((e) => e.startsWith(`pwt-ctrd-${process.pid}-`)).map((e) => `${m}/${e}`)),
    ourTempDirs: readdirSync(tmpdir()).filter((e) => e.startsWith(`pwt-ctrd-${process.pid}-`)),
  };
}

async function hostLinks(): Promise<string[]> {
  const host = Netns.current();
  try {
    return (await (await host.netlink()).links.list()).map((l) => `${l.index}:${l.name}`).sort();
  } finally {
    host.close();
  }
}

/** One line from a TCP connection made inside `ns`. */
async function readLine(ns: Netns, host: string, port: number): Promise<string> {
  const sock = await connectTcp(ns, host, port, { timeoutMs: 3000 });
  return await new Promise<string>((resolve, reject) => {
    let buf = '';
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      buf += d;
    });
    sock.on('error', reject);
    sock.on('close', () => resolve(buf.trim()));
  });
}

describe.skipIf(!prerequisites())('containerd + runc through CRI', () => {
  let nodeName = '';
  let node: Netns | undefined;
  let ctrd: Containerd | undefined;
  let cri: CriNode | undefined;
  let work = '';
  let confDir = '';
  let ipamDir = '';
  let spyLog = '';
  let before: Record<string, unknown> = {};
  let linksBefore: string[] = [];
  const timings: Record<string, number[]> = {};
  const time = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      (timings[what] ??= []).push(Math.round(performance.now() - t0));
    }
  };

  beforeAll(async () => {
    before = hostState();
    linksBefore = await hostLinks();
    cri = await CriNode.create(nsName());
    ({ name: nodeName, ns: node, work } = cri);
    await node.sysctl.set('net.ipv6.conf.default.accept_dad', 0);
    confDir = join(work, 'net.d');
    ipamDir = join(work, 'ipam');
    spyLog = join(work, 'spy.log');
    mkdirSync(confDir);
    const binDir = makeCniBinDir(join(work, 'bin'), { 'pwt-spy': writeSpyPlugin(join(work, 'plugins')) });
    writeConflist(confDir, bridgeConflist({
      bridge: BRIDGE, subnet4: `${SUBNET4}0/24`, subnet6: `${SUBNET6}/64`, ipamDir,
      chain: [spyPlugin({ log: spyLog, failPods: '^refuse-', failCode: 11, failMsg: 'pwt-spy: refusing pod' })],
    }));
    const t0 = performance.now();
    ctrd = await startContainerd({ nodeNetns: nodeName, cniConfDir: confDir, cniBinDir: binDir, images: [busyboxImage()] });
    timings.start = [Math.round(performance.now() - t0)];
  }, 120_000);

  afterAll(async () => {
    console.log(`CRI timings (ms): ${JSON.stringify(timings)}`);
    await cri?.teardown(ctrd);
  }, 60_000);

  it('answers Version and Status, runs in the node netns and hides the host paths', async () => {
    const v = await ctrd!.cri.version();
    expect(v.runtimeName).toBe('containerd');
    expect(v.runtimeApiVersion).toBe('v1');
    const st = await ctrd!.cri.status();
    expect(Object.fromEntries(st.conditions.map((c) => [c.type, c.status]))).toMatchObject({ RuntimeReady: true, NetworkReady: true });
    expect(readFileSync(`/proc/${ctrd!.pid}/comm`, 'utf8').trim()).toBe('containerd');
    expect(statSync(`/proc/${ctrd!.pid}/ns/net`).ino).toBe(statSync(`/run/netns/${nodeName}`).ino);
    // In its mount namespace the host's netns pins (ours included) are not there.
    const r = ctrd!.exec(['sh', '-c', 'ls -A /var/run/netns; echo --; ls -A /var/lib/cni; echo --; ls -A /run/containerd']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).not.toContain(nodeName);
    // ... while the rest of the host's /run and /var/lib is there as it is on the host
    for (const d of ['/run', '/var/lib']) {
      const inside = ctrd!.exec(['ls', '-A', d]).stdout.trim().split('\n');
      expect(inside).toEqual(expect.arrayContaining(readdirSync(d).filter((e) => e !== 'netns')));
    }
    expect(ctrd!.exec(['stat', '-c', '%i', '/var/lib/dpkg']).stdout.trim()).toBe(String(statSync('/var/lib/dpkg').ino)); // the host's dir, bound
    expect(await ctrd!.cri.imageStatus(ctrd!.pauseImage)).toBeDefined();
    expect(await ctrd!.cri.imageStatus(BUSYBOX_REF)).toBeDefined();
  });

  it('RunPodSandbox wires a reachable pod through the chain; Stop + Remove undo it', async () => {
    const uid = '5a1e0000-0000-4000-8000-000000000001';
    const sb = await time('runPod', () => ctrd!.runPod({ name: 'web-1', namespace: 'prod', uid, labels: { app: 'web' } }));
    expect(sb.ip.startsWith(SUBNET4)).toBe(true);
    const ip6 = sb.ips.find((a) => a.includes(':'));
    expect(ip6?.startsWith(SUBNET6)).toBe(true);
    expect(sb.netnsPath).toMatch(/^\/var\/run\/netns\/cni-[0-9a-f-]+$/);
    expect(existsSync(sb.netnsPath)).toBe(false); // only in containerd's mount namespace
    expect(existsSync(sb.hostNetnsPath)).toBe(true);
    // what an agent with HOST_MOUNTS_ROOT=hostMountsRoot opens for this CNI_NETNS
    expect(statSync(join(ctrd!.hostMountsRoot, sb.netnsPath)).ino).toBe(statSync(sb.hostNetnsPath).ino);

    const [status] = await ctrd!.cri.listPodSandbox({ id: sb.id });
    expect(status?.state).toBe(SANDBOX_READY);
    expect(status?.metadata).toMatchObject({ name: 'web-1', namespace: 'prod', uid });

    // The pause process: in that netns, in a kubelet-style pod cgroup.
    expect(sb.pid).toBeGreaterThan(0);
    expect(statSync(`/proc/${sb.pid}/ns/net`).ino).toBe(statSync(sb.hostNetnsPath).ino);
    expect(readFileSync(`/proc/${sb.pid}/cgroup`, 'utf8')).toContain(`/kubepods/besteffort/pod${uid}/${sb.id}`);

    // The chained plugin saw what a kubelet-driven runtime passes.
    const adds = readSpyLog(spyLog).filter((c) => c.command === 'ADD' && c.args.K8S_POD_NAME === 'web-1');
    expect(adds).toHaveLength(1);
    expect(adds[0]!.args).toMatchObject({ K8S_POD_NAMESPACE: 'prod', K8S_POD_UID: uid, K8S_POD_INFRA_CONTAINER_ID: sb.id });
    expect(adds[0]!.env).toMatchObject({ CNI_CONTAINERID: sb.id, CNI_NETNS: sb.netnsPath, CNI_IFNAME: 'eth0' });
    expect(adds[0]!.conf.prevResult?.ips?.map((i) => i.address)).toEqual(expect.arrayContaining([`${sb.ip}/24`, `${ip6}/64`]));
    expect(existsSync(join(ipamDir, 'pwt-net', sb.ip))).toBe(true);

    // Reachable from the node netns, v4 and v6.
    const pod = Netns.open(sb.hostNetnsPath);
    try {
      const addrs = (await (await pod.netlink()).addrs.list({ link: 'eth0' })).map((a) => a.address);
      expect(addrs).toEqual(expect.arrayContaining([sb.ip, ip6]));
      const server = await listenTcp(pod, { address: '::', port: 8080 }, (s) => s.end('hello from the pod\n'));
      try {
        expect(await readLine(node!, sb.ip, 8080)).toBe('hello from the pod');
        expect(await readLine(node!, ip6!, 8080)).toBe('hello from the pod');
      } finally {
        await new Promise((r) => server.close(r));
      }
    } finally {
      pod.close();
    }
    const nodeLinks = async () => (await (await node!.netlink()).links.list()).map((l) => l.name);
    expect((await nodeLinks()).filter((n) => n.startsWith('veth'))).toHaveLength(1);

    await time('removePod', () => ctrd!.removePod(sb.id));
    expect(await ctrd!.cri.listPodSandbox()).toEqual([]);
    expect(readSpyLog(spyLog).filter((c) => c.command === 'DEL' && c.env.CNI_CONTAINERID === sb.id).length).toBeGreaterThan(0);
    expect(existsSync(join(ipamDir, 'pwt-net', sb.ip))).toBe(false);
    await until('the veth to go', async () => (await nodeLinks()).every((n) => !n.startsWith('veth')));
    expect(existsSync(sb.hostNetnsPath)).toBe(false);
    expect(ctrd!.exec(['ls', '-A', '/var/run/netns']).stdout.trim()).toBe('');
  });

  it('a plugin failing with CNI code 11 fails RunPodSandbox with its message; containerd runs DEL', async () => {
    const err = await ctrd!.runPod({ name: 'refuse-1', namespace: 'prod' }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(GrpcError);
    const g = err as GrpcError;
    console.log(`RunPodSandbox refused: ${g.message}`);
    expect(g.details).toMatch(/failed to setup network for sandbox "([0-9a-f]+)": plugin type="pwt-spy" failed \(add\): pwt-spy: refusing pod; pod prod\/refuse-1/);
    const id = /sandbox "([0-9a-f]+)"/.exec(g.details)![1]!;
    const calls = readSpyLog(spyLog).filter((c) => c.env.CNI_CONTAINERID === id).map((c) => c.command);
    expect(calls[0]).toBe('ADD');
    expect(calls).toContain('DEL');
    // nothing left: no sandbox, lease, veth or netns pin
    expect(await ctrd!.cri.listPodSandbox()).toEqual([]);
    expect(readdirSync(join(ipamDir, 'pwt-net')).filter((f) => f.startsWith(SUBNET4) || f.startsWith('fd00'))).toEqual([]);
    expect((await (await node!.netlink()).links.list()).filter((l) => l.name.startsWith('veth'))).toEqual([]);
    expect(ctrd!.exec(['ls', '-A', '/var/run/netns']).stdout.trim()).toBe('');
  });

  it('a busybox container in a pod serves HTTP to the node; ExecSync runs in it', async () => {
    const sb = await time('runPod', () => ctrd!.runPod({ name: 'bb-1' }));
    const cid = await time('createStart', async () => {
      const id = await ctrd!.cri.createContainer(sb.id, {
        metadata: { name: 'httpd' }, image: { image: BUSYBOX_REF },
        command: ['/bin/busybox', 'httpd', '-f', '-p', '8080', '-h', '/www'], logPath: 'httpd.log',
      }, sb.config);
      await ctrd!.cri.startContainer(id);
      return id;
    });
    expect((await ctrd!.cri.containerStatus(cid))?.state).toBe(ContainerState.RUNNING);
    const ex = await time('execSync', () => ctrd!.cri.execSync(cid, ['/bin/busybox', 'ip', '-o', 'addr', 'show', 'eth0']));
    expect(ex.exitCode).toBe(0);
    expect(ex.stdout.toString()).toContain(sb.ip);
    const http = await until('httpd to answer', async () => {
      const sock = await connectTcp(node!, sb.ip, 8080, { timeoutMs: 1000 }).catch(() => undefined);
      if (!sock) return undefined;
      return await new Promise<string>((resolve) => {
        let buf = '';
        sock.setEncoding('utf8');
        sock.on('data', (d: string) => {
          buf += d;
        });
        sock.on('error', () => resolve(''));
        sock.on('close', () => resolve(buf));
        sock.write('GET /index.html HTTP/1.0\r\n\r\n');
      });
    });
    expect(http).toMatch(/^HTTP\/1\.[01] 200/);
    expect(http).toContain('podwire-test');
    await time('removePod', () => ctrd!.removePod(sb.id));
    expect(await ctrd!.cri.listPodSandbox()).toEqual([]);
  });

  it('runs sandboxes one after another and side by side', async () => {
    for (let i = 0; i < 3; i++) {
      const sb = await time('runPod', () => ctrd!.runPod({ name: `seq-${i}` }));
      await time('removePod', () => ctrd!.removePod(sb.id));
    }
    const sbs = await time('run4parallel', () => Promise.all([0, 1, 2, 3].map((i) => ctrd!.runPod({ name: `par-${i}` }))));
    expect(new Set(sbs.map((s) => s.ip)).size).toBe(4);
    expect(new Set(sbs.map((s) => s.netnsPath)).size).toBe(4);
    await time('remove4parallel', () => Promise.all(sbs.map((s) => ctrd!.removePod(s.id))));
    expect(await ctrd!.cri.listPodSandbox()).toEqual([]);
  });

  it('stop() removes sandboxes, processes, cgroups and dirs, and leaves the host as it was', async () => {
    const sb = await ctrd!.runPod({ name: 'left-running' }); // stop() must take it down through CRI
    const { pid, dir } = ctrd!;
    const pausePid = sb.pid;
    await time('stop', () => ctrd!.stop());
    expect(readSpyLog(spyLog).some((c) => c.command === 'DEL' && c.env.CNI_CONTAINERID === sb.id)).toBe(true);
    expect(existsSync(`/proc/${pid}`)).toBe(false);
    expect(existsSync(`/proc/${pausePid}`)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    expect(hostState()).toEqual(before);
    expect(await hostLinks()).toEqual(linksBefore);
    await until('the node netns to lose the bridge ports', async () =>
      (await (await node!.netlink()).links.list()).every((l) => !l.name.startsWith('veth')));
  });
});
