import { execFileSync } from 'node:child_process';
import { existsSync, readlinkSync, statSync } from 'node:fs';
import { readlink } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { Netns } from '../../../lib/net/netns/netns.js';
import { NetError } from '../../../lib/net/errors.js';
import { freshNetns, nsName } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

describe.skipIf(!privileged())('Netns', () => {
  it('creates a netns exactly where `ip netns` sees it, and removes it', async () => {
    const name = nsName();
    const ns = await Netns.create(name);
    try {
      expect(Netns.list()).toContain(name);
      expect(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })).toContain(name);
      const st = statSync(`/run/netns/${name}`);
      expect(ns.id.ino).toBe(st.ino);
      expect(ns.key).toBe(`${ns.id.dev}:${ns.id.ino}`);
      // ip netns exec sees the same namespace the child of ns.spawn is born in.
      const viaIp = execFileSync('ip', ['netns', 'exec', name, 'readlink', '/proc/self/ns/net'], { encoding: 'utf8' }).trim();
      const viaSpawn = (await ns.spawn(['readlink', '/proc/self/ns/net'])).stdout.trim();
      expect(viaSpawn).toBe(viaIp);
      expect(viaSpawn).toBe(`net:[${ns.id.ino}]`);
      await expect(Netns.create(name)).rejects.toMatchObject({ code: 'EEXIST' });
    } finally {
      ns.close();
      await Netns.remove(name);
    }
    expect(Netns.list()).not.toContain(name);
    expect(existsSync(`/run/netns/${name}`)).toBe(false);
    await expect(Netns.remove(name)).rejects.toMatchObject({ code: 'ENOENT', op: expect.any(String) });
  });

  it('creates a netns with no name that lives as long as its fd', async () => {
    const before = Netns.list();
    const ns = await Netns.createAnonymous();
    try {
      expect(Netns.list()).toEqual(before);  // nothing under /run/netns
      expect((await ns.spawn(['readlink', '/proc/self/ns/net'])).stdout.trim()).toBe(`net:[${ns.id.ino}]`);
      const current = Netns.current();
      expect(ns.equals(current)).toBe(false);
      current.close();
      const nl = await ns.netlink();
      expect((await nl.links.list()).map((l) => l.name)).toEqual(['lo']);
    } finally {
      ns.close();
    }
  });

  it('identifies namespaces by device and inode, whatever the path', async () => {
    const a = await freshNetns();
    const again = Netns.open(`/run/netns/${a.name}`);
    const current = Netns.current();
    const self = Netns.fromPid(process.pid);
    try {
      expect(again.equals(a)).toBe(true);
      expect(again.key).toBe(a.key);
      expect(current.equals(self)).toBe(true);
      expect(current.equals(a)).toBe(false);
      expect(current.id.ino).toBe(statSync('/proc/self/ns/net').ino);
    } finally {
      again.close();
      current.close();
      self.close();
    }
  });

  it('close is idempotent and any later use fails with EBADF', async () => {
    const ns = await freshNetns();
    const other = Netns.open(ns.path);
    other.close();
    other.close();
    expect(other.closed).toBe(true);
    expect(() => other.fd).toThrow(expect.objectContaining({ code: 'EBADF', name: 'NetError' }));
    await expect(async () => other.spawn(['true'])).rejects.toMatchObject({ code: 'EBADF' });
    await expect(async () => other.netlink()).rejects.toMatchObject({ code: 'EBADF' });
  });

  it('refuses files that are not network namespaces', () => {
    expect(() => Netns.open('/etc/hostname')).toThrow(expect.objectContaining({ code: 'ERR_NOT_NETNS', op: 'open-netns' }));
    expect(() => Netns.open('/proc/self/ns/mnt')).toThrow(expect.objectContaining({ code: 'ERR_NOT_NETNS' }));
    expect(() => Netns.open('/nonexistent/netns')).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(() => Netns.open('')).toThrow(TypeError);
    expect(() => Netns.fromPid(-1)).toThrow(RangeError);
  });

  it('is disposable: a `using` declaration closes it at the end of the scope', async () => {
    const base = await freshNetns();
    let seen: Netns | undefined;
    {
      using ns = Netns.open(base.path);
      seen = ns;
      expect(ns.closed).toBe(false);
      expect(ns.equals(base)).toBe(true);
    }
    expect(seen.closed).toBe(true);
    expect(() => seen!.fd).toThrow(expect.objectContaining({ code: 'EBADF' }));
    expect(typeof Symbol.dispose).toBe('symbol');
    base[Symbol.dispose]();
    expect(base.closed).toBe(true);
    base[Symbol.dispose]();  // idempotent, like close()
  });

  it('remove is asynchronous like create, and a missing name rejects ENOENT', async () => {
    const name = nsName();
    const ns = await Netns.create(name);
    ns.close();
    const p = Netns.remove(name);
    expect(p).toBeInstanceOf(Promise);
    await p;
    expect(existsSync(`/run/netns/${name}`)).toBe(false);
    await expect(Netns.remove(name)).rejects.toMatchObject({ code: 'ENOENT', errno: 2 });
  });

  it('rejects bad names before touching the filesystem', async () => {
    await expect(Netns.create('a/b')).rejects.toThrow(TypeError);
    await expect(Netns.create('..')).rejects.toThrow(TypeError);
    await expect(Netns.remove('')).rejects.toThrow(TypeError);
  });

  it('spawns inside the netns with stdin, env, cwd and exit status', async () => {
    const ns = await freshNetns();
    const links = await ns.spawn(['ip', '-o', 'link', 'show']);
    expect(links.code).toBe(0);
    expect(links.stdout.trim().split('\n')).toHaveLength(1);  // only lo: not the host's links
    const cat = await ns.spawn(['cat'], { stdin: 'hello\n' });
    expect(cat.stdout).toBe('hello\n');
    const env = await ns.spawn(['/bin/sh', '-c', 'echo "$PW_X" >&2; pwd; exit 3'], { env: { PW_X: 'yes', PATH: '/usr/bin:/bin' }, cwd: '/tmp' });
    expect(env).toMatchObject({ code: 3, signal: null, stdout: '/tmp\n', stderr: 'yes\n', timedOut: false });
    await expect(ns.spawn(['/nonexistent/program'])).rejects.toMatchObject({ code: 'ENOENT', op: 'spawn' });
    await expect(ns.spawn(['no-such-program-pw'])).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(ns.spawn([])).rejects.toThrow(TypeError);
  });

  it('kills a child that outlives its timeout', async () => {
    const ns = await freshNetns();
    const t0 = Date.now();
    const r = await ns.spawn(['sleep', '30'], { timeoutMs: 200 });
    expect(r).toMatchObject({ code: null, signal: 'SIGKILL', timedOut: true });
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('reads and writes sysctls of that netns only', async () => {
    const a = await freshNetns();
    const b = await freshNetns();
    await a.sysctl.set('net.ipv4.ip_forward', 1);
    expect(await a.sysctl.get('net.ipv4.ip_forward')).toBe('1');
    expect(await b.sysctl.get('net/ipv4/ip_forward')).toBe('0');
    expect((await a.spawn(['cat', '/proc/sys/net/ipv4/ip_forward'])).stdout.trim()).toBe('1');
    const many = await a.readMany({ procNet: ['dev', 'no_such_file'], sysctl: ['net.ipv4.ip_forward', 'net.ipv4.no_such_key'] });
    expect(many.procNet[0]).toContain('lo:');
    expect(many.procNet[1]).toBeUndefined();
    expect(many.sysctl).toEqual(['1', undefined]);
    await expect(async () => a.readMany({ procNet: ['../x'] })).rejects.toThrow(TypeError);
    await expect(a.sysctl.get('kernel.hostname')).rejects.toThrow(TypeError);
    await expect(a.sysctl.get('net.ipv4..x')).rejects.toThrow(TypeError);
    await expect(a.sysctl.get('net.ipv4.no_such_key')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('never moves the JS thread or the libuv pool: 1,000 concurrent operations over 50 netns', async () => {
    const before = Netns.threadNetnsLink();
    const hostLink = readlinkSync('/proc/self/ns/net');
    const all = await Promise.all(Array.from({ length: 50 }, () => freshNetns({ loUp: false })));
    // Give each netns a distinct value, then read every one back concurrently
    // many times, mixed with netlink handle opens and spawns: a thread left in
    // the wrong netns would read a wrong value or list the wrong links.
    await Promise.all(all.map((ns, i) => ns.sysctl.set('net.ipv4.ip_default_ttl', 10 + i)));
    const ops: Array<Promise<void>> = [];
    for (let k = 0; k < 1000; k++) {
      const i = k % 50;
      const ns = all[i]!;
      if (k % 10 === 0) {
        ops.push(ns.spawn(['cat', '/proc/sys/net/ipv4/ip_default_ttl']).then((r) => expect(r.stdout.trim()).toBe(String(10 + i))));
      } else if (k % 10 === 1) {
        ops.push(ns.netlink().then(async (nl) => expect((await nl.links.list()).map((l) => l.name)).toEqual(['lo'])));
      } else {
        ops.push(ns.sysctl.get('net.ipv4.ip_default_ttl').then((v) => expect(v).toBe(String(10 + i))));
      }
    }
    // Pool threads run fs calls; each reports the netns of the thread it ran on.
    const pool = Array.from({ length: 64 }, () => readlink('/proc/thread-self/ns/net'));
    await Promise.all(ops);
    const poolLinks = await Promise.all([...pool, ...Array.from({ length: 64 }, () => readlink('/proc/thread-self/ns/net'))]);
    expect(new Set(poolLinks)).toEqual(new Set([hostLink]));
    expect(Netns.threadNetnsLink()).toBe(before);
    expect(before).toBe(hostLink);
  });

  it('keeps the fd alive for operations in flight when closed early', async () => {
    const ns = await freshNetns();
    const other = Netns.open(ns.path);
    const pending = other.spawn(['readlink', '/proc/self/ns/net']);
    other.close();
    expect((await pending).stdout.trim()).toBe(`net:[${ns.id.ino}]`);
    expect(() => other.fd).toThrow(NetError);
  });
});
