// Raw-binding tests (no lib/net wrapper): every native call that takes a
// netns fd keeps the namespace it was given even when the caller closes its
// fd at once and the number is reused by another netns before the job runs;
// bad fds and NUL bytes are rejected before anything runs.
import { readlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { native } from '../../lib/net/binding.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const N = 40;
const b = () => native();

function inode(fd: number): string {
  return /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`))![1]!;
}

// Socket inodes listed in the netns's /proc/net/{tcp,tcp6,netlink}.
async function socketInodes(nsFd: number): Promise<Set<string>> {
  const [tcp, tcp6, netlink] = await b().readFiles(nsFd, ['/proc/thread-self/net/tcp', '/proc/thread-self/net/tcp6', '/proc/thread-self/net/netlink']);
  const out = new Set<string>();
  for (const text of [tcp, tcp6]) for (const line of (text ?? '').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length > 9) out.add(f[9]!);
  }
  for (const line of (netlink ?? '').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length > 1) out.add(f[f.length - 1]!);
  }
  return out;
}

// Calls start(fdA) N times; right after each call its fd of A is closed and
// one of B opened (the lowest free number: very likely the same), held until
// all jobs are done, so a job that kept the number would run in B.
async function withSwappedFds<T>(pathA: string, pathB: string, start: (fdA: number) => Promise<T>): Promise<{ results: T[]; reused: number }> {
  const held: number[] = [];
  const jobs: Promise<T>[] = [];
  let reused = 0;
  try {
    for (let i = 0; i < N; i++) {
      const fdA = b().nsOpen(pathA).fd;
      jobs.push(start(fdA));
      b().fdClose(fdA);
      const fdB = b().nsOpen(pathB).fd;
      if (fdB === fdA) reused++;
      held.push(fdB);
    }
    return { results: await Promise.all(jobs), reused };
  } finally {
    for (const fd of held) b().fdClose(fd);
  }
}

describe.skipIf(!privileged())('native netns fd arguments', () => {
  it('inetOpen listeners land in the netns given, not in the one that reused its fd number', async () => {
    const A = await freshNetns();
    const B = await freshNetns();
    const { results, reused } = await withSwappedFds(A.path, B.path, (fd) =>
      b().inetOpen(fd, [{ udp: false, address: '0.0.0.0', port: 0, reusePort: false, transparent: false, optional: false }]));
    expect(reused).toBeGreaterThan(0);  // the race was really set up
    const fds = results.map((r) => r[0]!.fd!);
    try {
      const inA = await socketInodes(A.fd);
      const inB = await socketInodes(B.fd);
      const ours = fds.map(inode);
      expect(ours.filter((i) => inA.has(i))).toHaveLength(N);
      expect(ours.filter((i) => inB.has(i))).toHaveLength(0);
    } finally {
      for (const fd of fds) b().fdClose(fd);
    }
  });

  it('nlOpen and unbound inetOpen sockets are created in the netns given', async () => {
    const A = await freshNetns();
    const B = await freshNetns();
    const nl = await withSwappedFds(A.path, B.path, (fd) => b().nlOpen(fd, [0]));
    const ns = await withSwappedFds(A.path, B.path, async (fd) => (await b().inetOpen(fd, [{ udp: false, address: '0.0.0.0', port: 0, reusePort: false, transparent: false, optional: false, bind: false }]))[0]!.fd!);
    const servers = await Promise.all(ns.results.map((fd) => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
      const srv = createServer();
      srv.once('error', reject);
      srv.listen({ fd }, () => resolve(srv));  // listen() auto-binds it in its own netns
    })));
    try {
      const inA = await socketInodes(A.fd);
      const inB = await socketInodes(B.fd);
      const nlInodes = nl.results.map((socks) => inode(socks[0]!.fd));
      expect(nlInodes.filter((i) => inA.has(i))).toHaveLength(N);
      expect(nlInodes.filter((i) => inB.has(i))).toHaveLength(0);
      const tcpInodes = ns.results.map(inode);
      expect(tcpInodes.filter((i) => inA.has(i))).toHaveLength(N);
      expect(tcpInodes.filter((i) => inB.has(i))).toHaveLength(0);
    } finally {
      for (const socks of nl.results) for (const s of socks) s.close();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    }
  });

  it('sysctlSet, readFiles and spawn act on the netns given', async () => {
    const A = await freshNetns();
    const B = await freshNetns();
    const path = '/proc/sys/net/ipv4/ip_forward';
    await withSwappedFds(A.path, B.path, (fd) => b().sysctlSet(fd, path, '1'));
    expect(await b().readFiles(B.fd, [path])).toEqual(['0\n']);  // B untouched
    const reads = await withSwappedFds(A.path, B.path, (fd) => b().readFiles(fd, [path]));
    expect(reads.results.every((r) => r[0] === '1\n')).toBe(true);
    const spawns = await withSwappedFds(A.path, B.path, (fd) => b().spawn(fd, ['/bin/cat', path], [], null, null, 10_000));
    expect(spawns.results.map((r) => r.stdout.toString())).toEqual(Array(N).fill('1\n'));
  });

  it('rejects a negative, closed or non-netns fd with NetError EBADF (-1 is this netns)', async () => {
    const A = await freshNetns();
    const self = b().nsOpen('/proc/self/ns/net').fd;  // a good fd, for contrast
    const closed = b().nsOpen(A.path).fd;
    b().fdClose(closed);  // nothing is opened below until the checks ran
    const calls: Array<(fd: number) => unknown> = [
      (fd) => b().nlOpen(fd, [0]),
      (fd) => b().readFiles(fd, ['/proc/thread-self/net/dev']),
      (fd) => b().sysctlSet(fd, '/proc/sys/net/ipv4/ip_forward', '0'),
      (fd) => b().spawn(fd, ['/bin/true'], [], null, null, 0),
      (fd) => b().inetOpen(fd, []),
    ];
    try {
      for (const call of calls) {
        for (const fd of [-2, closed, 0 /* stdin: not a netns */]) {
          let err: unknown;
          try {
            await call(fd);
          } catch (e) {
            err = e;
          }
          expect(err).toMatchObject({ name: 'NetError', code: 'EBADF', errno: 9 });
        }
      }
      const sockets = await b().nlOpen(-1, [0]);  // -1: this netns
      for (const s of sockets) s.close();
      const ok = await b().nlOpen(self, [0]);
      for (const s of ok) s.close();
    } finally {
      b().fdClose(self);
    }
  });
});

describe('NUL bytes in strings passed to native code', () => {
  it('nsOpen with an embedded NUL throws TypeError even when the prefix exists', () => {
    expect(() => b().nsOpen('/proc/self/ns/net\0junk')).toThrow(TypeError);
  });

  it('every path, name, argv and env string is checked', async () => {
    // Writes go to a test netns: were a check to regress, the host's sysctls stay untouched.
    const T = await freshNetns();
    const checks: Array<() => unknown> = [
      () => b().nsRemove('/run/netns/pwt-none\0x'),
      () => b().nsCreate('/run/netns', 'pwt-x\0y'),
      () => b().nsCreate('/run/netns\0', 'pwt-x'),
      () => b().readFiles(-1, ['/proc/self/status\0x']),
      () => b().sysctlSet(T.fd, '/proc/sys/net/ipv4/ip_forward\0x', '0'),
      () => b().sysctlSet(T.fd, '/proc/sys/net/ipv4/ip_forward', '0\0'),
      () => b().spawn(-1, ['/bin/true\0x'], [], null, null, 0),
      () => b().spawn(-1, ['/bin/true', 'a\0b'], [], null, null, 0),
      () => b().spawn(-1, ['/bin/true'], ['A=1\0B=2'], null, null, 0),
      () => b().spawn(-1, ['/bin/true'], [], '/\0tmp', null, 0),
      () => b().unixListen('@pwt\0x', 5, -1, 1),
      () => b().unixConnect('/tmp/pwt\0x', 5),
      () => b().inetOpen(-1, [{ udp: true, address: '127.0.0.1\0', port: 0, reusePort: false, transparent: false, optional: false }]),
      () => b().nftDumpRequest(0, 1, 'ta\0ble'),
      () => b().nftEncode([{ op: 'newtable', family: 1, name: 'ta\0ble' } as never]),
    ];
    for (const [i, check] of checks.entries()) {
      let err: unknown;
      try {
        await check();
      } catch (e) {
        err = e;
      }
      expect(err, `check ${i}`).toBeInstanceOf(TypeError);
    }
  });
});
