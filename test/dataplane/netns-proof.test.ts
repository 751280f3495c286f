// A pod's netns is proved before anything touches it (issue 23): the proc scan's candidates are
// opened, their (dev, ino) compared with what the walk saw, the node's netns refused, and the netns
// must hold one of the pod's IPs (upstream's ownership rule); the dataplane then works on that very
// handle, never on a path it reopens. Real netns and real processes (sleep in `pwt-` netns); the
// proc root is a fake one whose `<pid>/ns/net` links to those processes' /proc entries, so a pid
// "reused" by another process is a link re-pointed, deterministically.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { restoreSnapshot } from '../../lib/agent/snapshot.js';
import { ERR_NETNS_IS_HOST } from '../../lib/dataplane/errors.js';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { native } from '../../lib/net/binding.js';
import { openPodNetns, scanPodNetns, type OpenPodNetnsResult } from '../../lib/dataplane/proc-scan.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { fakeDataplane } from './fakes.js';

const UID_A = '863b91d4-4b68-4efa-917f-4b560e3e86aa';
const UID_B = '2c48913c-b29f-11e7-9350-020968147796';
const CID = '9bca8d63d5fa610783847915bcff0ecac1273e5b4bed3f6fa1b07350e0135961';
const IP_A = '198.18.23.1';
const IP_B = '198.18.23.2';
const cgroup = (uid: string) => `0::/kubepods/burstable/pod${uid}/${CID}\n`;
const idOf = (p: string) => {
  const st = statSync(p);
  return { dev: st.dev, ino: st.ino };
};

const children: ChildProcess[] = [];
const roots: string[] = [];
const results: OpenPodNetnsResult[] = [];
afterEach(async () => {
  for (const r of results.splice(0)) for (const f of r.found.values()) f.ref.release();
  await Promise.all(children.splice(0).map(reap));
  while (roots.length) rmSync(roots.pop()!, { recursive: true, force: true });
});

/** A real process sitting in netns `name` (or in this process's netns), resolved once it is in it. */
async function proc(name?: string): Promise<ChildProcess & { pid: number }> {
  const argv = name ? ['ip', 'netns', 'exec', name, 'sh', '-c', 'echo in; exec sleep 1000'] : ['sh', '-c', 'echo in; exec sleep 1000'];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.stdout!.once('data', () => resolve()); // after the setns: `echo` runs inside
  });
  return child as ChildProcess & { pid: number };
}

/** Kills the process and waits until it is reaped (its /proc entry is gone). */
async function reap(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGKILL');
  await exited;
}

/** A fake proc root: pid 1 in `host`, each pid's ns/net a link to a real process's, with a pod cgroup and a starttime. */
function procRoot(host: string, procs: Record<number, { target: string; uid: string; start: number }>): string {
  const root = mkdtempSync(join(tmpdir(), 'pwt-proc-'));
  roots.push(root);
  mkdirSync(join(root, '1', 'ns'), { recursive: true });
  symlinkSync(host, join(root, '1', 'ns', 'net'));
  writeFileSync(join(root, '1', 'cgroup'), '0::/init.scope\n');
  for (const [pid, p] of Object.entries(procs)) {
    mkdirSync(join(root, pid, 'ns'), { recursive: true });
    symlinkSync(p.target, join(root, pid, 'ns', 'net'));
    writeFileSync(join(root, pid, 'cgroup'), cgroup(p.uid));
    writeFileSync(join(root, pid, 'stat'), `${pid} (sleep) S 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 ${p.start} 1000 10\n`);
  }
  return root;
}

/** The pid dir's process is now another one (the pid was reused). */
function reuse(root: string, pid: number, target: string): void {
  unlinkSync(join(root, String(pid), 'ns', 'net'));
  symlinkSync(target, join(root, String(pid), 'ns', 'net'));
}

const nsOf = (child: { pid: number }) => `/proc/${child.pid}/ns/net`;
/** Open fds, once the addon's finished jobs have let go of their copies (a job's netns fd dup closes after its completion runs). */
const fdCount = async () => {
  await new Promise((r) => setImmediate(r));
  return readdirSync('/proc/self/fd').length;
};

async function withIps(...ips: string[]) {
  const ns = await freshNetns();
  const nl = await ns.netlink();
  for (const ip of ips) await nl.addrs.add('lo', `${ip}/32`);
  ns.closeNetlink();  // the code under test opens its own
  return ns;
}

/** The fake rules' `method` reads the netns over netlink first, as the real rules do. */
function overNetlink(rules: ReturnType<typeof fakeDataplane>['rules'], method: 'apply' | 'verify'): void {
  const fake = rules[method].bind(rules) as (ns: Netns, pod: PodInfo) => Promise<never>;
  rules[method] = async (ns: Netns, pod: PodInfo) => {
    await (await ns.netlink()).links.list();
    return fake(ns, pod);
  };
}

async function open(...args: Parameters<typeof openPodNetns>): Promise<OpenPodNetnsResult> {
  const r = await openPodNetns(...args);
  results.push(r);
  return r;
}

describe.skipIf(!privileged())('a pod netns is proved before it is used', () => {
  it('a pid that exits between scan and open, reused by a process in another netns, is refused', async () => {
    const hostNs = await freshNetns();
    const a = await withIps(IP_A);
    // The other netns even holds pod A's IP: only the identity check can tell it apart.
    const b = await withIps(IP_A, IP_B);
    const pa = await proc(a.name);
    const root = procRoot(`/run/netns/${hostNs.name}`, { 100: { target: nsOf(pa), uid: UID_A, start: 10 } });
    const scan = scanPodNetns([UID_A], { procRoot: root });
    expect(scan.candidates.get(UID_A)?.[0]).toMatchObject({ pid: 100, ...a.id });

    await reap(pa);
    const gone = await open([{ uid: UID_A, ips: [IP_A] }], { procRoot: root, scan });
    expect(gone.found.size).toBe(0);
    expect(gone.refused).toEqual([expect.objectContaining({ uid: UID_A, reason: 'gone' })]);

    const pb = await proc(b.name);
    reuse(root, 100, nsOf(pb));
    const r = await open([{ uid: UID_A, ips: [IP_A] }], { procRoot: root, scan });
    expect(r.found.size).toBe(0);
    expect(r.missing).toEqual([UID_A]);
    expect(r.refused).toEqual([expect.objectContaining({ uid: UID_A, reason: 'stale' })]);
    // A fresh walk sees the new process for what it is: a netns that is not the one of before.
    const again = await open([{ uid: UID_A, ips: [IP_A] }], { procRoot: root });
    expect(again.found.get(UID_A)).toMatchObject({ pid: 100, ...b.id });
  });

  it('the dataplane works on the proved handle, not on the path: a reused pid cannot redirect it', async () => {
    const hostNs = await freshNetns();
    const a = await withIps(IP_A);
    const b = await withIps(IP_B);
    const pa = await proc(a.name);
    const root = procRoot(`/run/netns/${hostNs.name}`, { 100: { target: nsOf(pa), uid: UID_A, start: 10 } });
    const r = await open([{ uid: UID_A, ips: [IP_A] }], { procRoot: root });
    const found = r.found.get(UID_A)!;
    expect(found.ref.ns.id).toEqual(a.id);
    await reap(pa);
    reuse(root, 100, nsOf(await proc(b.name)));
    const { dp, rules, ztunnel } = fakeDataplane();
    await dp.enroll({ uid: UID_A, name: 'a', namespace: 'default', ips: [IP_A] }, { netns: found.ref });
    expect(rules.applied.get(UID_A)).toBe(a.id.ino);
    expect(ztunnel.known.get(UID_A)).toBe(a.id.ino);
    // One owner per reference: the caller's release leaves the dataplane's open.
    found.ref.release();
    r.found.clear();
    expect(dp.cache.get(UID_A)?.netns?.released).toBe(false);
    expect(dp.cache.get(UID_A)?.netns?.ns.closed).toBe(false);
    await dp.close();
    expect(found.ref.released).toBe(true);
    expect(found.ref.ns.closed).toBe(true);
  });

  it('a netns shared by two pods\' processes goes to the pod whose IP it holds; the visitor is refused', async () => {
    const hostNs = await freshNetns();
    const a = await withIps(IP_A);
    const b = await withIps(IP_B);
    const pa = await proc(a.name);
    const visitor = await proc(a.name); // pod B's process that entered pod A's netns
    const pb = await proc(b.name);
    // The visitor is the oldest process of all: age alone would hand pod A's netns to pod B.
    const procs = {
      100: { target: nsOf(pa), uid: UID_A, start: 500 },
      101: { target: nsOf(visitor), uid: UID_B, start: 100 },
      102: { target: nsOf(pb), uid: UID_B, start: 300 },
    };
    const root = procRoot(`/run/netns/${hostNs.name}`, procs);
    const pods = [{ uid: UID_A, ips: [IP_A] }, { uid: UID_B, ips: [IP_B] }];
    const r = await open(pods, { procRoot: root });
    expect(r.found.get(UID_A)).toMatchObject({ pid: 100, ...a.id });
    expect(r.found.get(UID_B)).toMatchObject({ pid: 102, ...b.id });
    expect(r.refused).toEqual([expect.objectContaining({ uid: UID_B, reason: 'not-owner', candidate: expect.objectContaining({ pid: 101 }) })]);
    expect(r.conflicts).toContainEqual({ kind: 'shared-netns', ...a.id, owner: UID_A, others: [{ uid: UID_B, pid: 101, reason: 'not-owner' }] });

    // Pod B with no netns of its own: nothing, rather than pod A's.
    const lone = await open(pods, { procRoot: procRoot(`/run/netns/${hostNs.name}`, { 100: procs[100], 101: procs[101] }) });
    expect(lone.found.get(UID_A)?.pid).toBe(100);
    expect(lone.found.has(UID_B)).toBe(false);
    expect(lone.missing).toEqual([UID_B]);

    // A netns that holds both pods' IPs is proved by one of them only: the oldest claim, the other is refused.
    const both = await withIps(IP_A, IP_B);
    const pBoth = await proc(both.name);
    const vBoth = await proc(both.name);
    const shared = await open(pods, {
      procRoot: procRoot(`/run/netns/${hostNs.name}`, {
        100: { target: nsOf(pBoth), uid: UID_A, start: 200 }, 101: { target: nsOf(vBoth), uid: UID_B, start: 300 },
      }),
    });
    expect(shared.found.get(UID_A)?.ref.ns.id).toEqual(both.id);
    expect(shared.found.has(UID_B)).toBe(false);
    expect(shared.refused).toEqual([expect.objectContaining({ uid: UID_B, reason: 'claimed' })]);
    // A pod with no IPs yet cannot prove anything.
    const noIps = await open([{ uid: UID_A, ips: [] }], { procRoot: root });
    expect(noIps.found.size).toBe(0);
    expect(noIps.refused).toEqual([expect.objectContaining({ reason: 'no-ips' })]);
  });

  it('candidates proved ahead of the decisions are closed when not taken; the decisions stay in age order', async () => {
    const hostNs = await freshNetns();
    const x = await withIps(IP_A);
    const y = await withIps(IP_A);
    const pods = [{ uid: UID_A, ips: [IP_A] }, { uid: UID_B, ips: [IP_B] }];
    // Pod A in two netns that both hold its IP (the older wins; the newer is proved too, then dropped);
    // pod B's only process visits x (claimed by A by then). Links to the netns files: no processes needed.
    const root = procRoot(`/run/netns/${hostNs.name}`, {
      100: { target: `/run/netns/${x.name}`, uid: UID_A, start: 100 },
      101: { target: `/run/netns/${y.name}`, uid: UID_A, start: 200 },
      102: { target: `/run/netns/${x.name}`, uid: UID_B, start: 300 },
    });
    const before = await fdCount();
    const r = await openPodNetns(pods, { procRoot: root });
    expect(r.found.get(UID_A)).toMatchObject({ pid: 100, ...x.id });
    expect(r.found.has(UID_B)).toBe(false);
    expect(r.refused).toEqual([expect.objectContaining({ uid: UID_B, reason: 'claimed' })]);
    // A's netns and its proof's two netlink sockets (for the caller's work on it): the other proofs closed what they opened.
    expect(await fdCount()).toBe(before + 3);
    r.found.get(UID_A)!.ref.release();
    expect(await fdCount()).toBe(before);
  });

  it('a proof\'s sockets serve the enrollment that takes its handle; the caller\'s release lets them go, the netns fd stays', async () => {
    const hostNs = await freshNetns();
    const a = await withIps(IP_A);
    const root = procRoot(`/run/netns/${hostNs.name}`, { 100: { target: `/run/netns/${a.name}`, uid: UID_A, start: 10 } });
    const { dp, rules } = fakeDataplane();
    overNetlink(rules, 'apply');
    const opens = vi.spyOn(native(), 'nlOpen');
    const before = await fdCount();
    try {
      const r = await openPodNetns([{ uid: UID_A, ips: [IP_A] }], { procRoot: root });  // the informer path's lookup
      const found = r.found.get(UID_A)!;
      await dp.enroll({ uid: UID_A, name: 'a', namespace: 'default', ips: [IP_A] }, { netns: found.ref });
      found.ref.release();  // the controller's, after the enrollment
      expect(opens).toHaveBeenCalledTimes(1);  // was 2: the proof closed its sockets and the rules made them again
      expect(await fdCount()).toBe(before + 1);  // the dataplane's netns fd; no socket
    } finally {
      opens.mockRestore();
      await dp.close();
    }
    expect(await fdCount()).toBe(before);
  });

  it('the startup snapshot verifies each pod on the sockets its proof opened, and leaves none open after', async () => {
    const hostNs = await freshNetns();
    const ips = ['198.18.23.11', '198.18.23.12', '198.18.23.13'];
    const uids = [UID_A, UID_B, '72f7f152-440c-66ac-9084-e0fc1d8a910c'];
    const pods = await Promise.all(ips.map((ip) => withIps(ip)));
    const root = procRoot(`/run/netns/${hostNs.name}`, Object.fromEntries(pods.map((p, i) => [100 + i, { target: `/run/netns/${p.name}`, uid: uids[i]!, start: 10 + i }])));
    const v1 = (i: number): V1Pod => ({
      metadata: { uid: uids[i], name: `p${i}`, namespace: 'default', annotations: { 'ambient.istio.io/redirection': 'enabled' } },
      spec: { serviceAccountName: 'default', containers: [] }, status: { phase: 'Running', podIP: ips[i], podIPs: [{ ip: ips[i]! }] },
    });
    for (const reconcileRules of [true, false]) {
      const { dp, rules } = fakeDataplane();
      await dp.start();
      for (const [i, p] of pods.entries()) rules.applied.set(uids[i]!, p.id.ino);  // enrolled before the restart
      overNetlink(rules, 'verify');
      const opens = vi.spyOn(native(), 'nlOpen');
      const before = await fdCount();
      try {
        const s = await restoreSnapshot({ pods: [0, 1, 2].map(v1), dataplane: dp, procRoot: root, reconcileRules });
        expect(s.report).toMatchObject({ pods: 3, failed: [], repaired: [], complete: true });
        expect(rules.calls.filter((c) => c.startsWith('verify')).length).toBe(reconcileRules ? 3 : 0);
        // One netlink open per pod: the proof's (its sockets made twice, a verify cost two setns round trips).
        expect(opens).toHaveBeenCalledTimes(3);
        // Held after: each pod's netns fd, in the dataplane's cache; no socket, whether verified or kept.
        expect(await fdCount()).toBe(before + 3);
      } finally {
        opens.mockRestore();
        await dp.close();
      }
      expect(await fdCount()).toBe(before);
    }
  });

  it('a process in the node\'s netns (this process\'s own, or the proc root\'s pid 1) is refused even when it holds the pod IP', async () => {
    const hostNs = await freshNetns();
    // An address of the agent's own netns as the pod's IP: the ownership check alone would pass it.
    const self = Netns.current();
    const ownIp = (await (await self.netlink()).addrs.list()).find((x) => x.family === 4)!.address;
    self.close();
    const inAgentNs = await proc();
    const root = procRoot(`/run/netns/${hostNs.name}`, { 100: { target: nsOf(inAgentNs), uid: UID_A, start: 10 } });
    const r = await open([{ uid: UID_A, ips: [ownIp] }], { procRoot: root });
    expect(r.found.size).toBe(0);
    expect(r.refused).toEqual([expect.objectContaining({ uid: UID_A, reason: 'host' })]);

    // The proc root's pid 1 moved into a pod netns after the walk (read again at open).
    const podNs = await withIps(IP_A);
    const inPod = await proc(podNs.name);
    const root2 = procRoot(`/run/netns/${hostNs.name}`, { 100: { target: nsOf(inPod), uid: UID_A, start: 10 } });
    const scan = scanPodNetns([UID_A], { procRoot: root2 });
    reuse(root2, 1, nsOf(inPod));
    const r2 = await open([{ uid: UID_A, ips: [IP_A] }], { procRoot: root2, scan });
    expect(r2.refused).toEqual([expect.objectContaining({ reason: 'host' })]);

    // A pid reused by a process in the node's netns: refused (its identity is not what the walk saw).
    reuse(root2, 1, `/run/netns/${hostNs.name}`);
    reuse(root2, 100, nsOf(inAgentNs));
    const r3 = await open([{ uid: UID_A, ips: [IP_A, ownIp] }], { procRoot: root2, scan });
    expect(r3.found.size).toBe(0);
    expect(r3.refused.map((x) => x.reason)).toEqual(['stale']);
    expect(idOf(join(root2, '100', 'ns', 'net'))).toEqual(idOf('/proc/self/ns/net'));

    // And the dataplane refuses a handle of the node's netns whoever proved it.
    const { dp, rules } = fakeDataplane();
    const { NetnsRef } = await import('../../lib/dataplane/netns-ref.js');
    const own = NetnsRef.open('/proc/self/ns/net');
    const err = await dp.enroll({ uid: UID_A, name: 'a', namespace: 'default', ips: [IP_A] }, { netns: own }).catch((e: unknown) => e);
    expect(err).toMatchObject({ stage: 'netns', code: ERR_NETNS_IS_HOST });
    expect(rules.applied.size).toBe(0);
    own.release();
    expect(own.ns.closed).toBe(true);
    await dp.close();
  });
});
