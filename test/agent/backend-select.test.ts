// Backend selection (§5.2 step 2) against the real kernel: every "host" is a fresh pwt- netns with
// the probe ipsets made through the library's netlink ipset API, and the nft JSON probe runs the
// real nft inside it (or a stand-in nft put first on PATH, as test/net/nft/dump.test.ts does).
// The machine's own netns is never looked at.
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NFT_JSON_NOT_COMPILED, selectBackend, type SelectBackendOptions } from '../../lib/agent/backend-select.js';
import { NetError } from '../../lib/net/errors.js';
import type { Netns } from '../../lib/net/netns/netns.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const V4 = 'istio-inpod-probes-v4';
const V6 = 'istio-inpod-probes-v6';
const nft = (o: Partial<SelectBackendOptions> = {}): SelectBackendOptions => ({ nativeNftables: true, ipv6: true, forceIptablesBinary: '', ...o });

let dirs: string[] = [];
const savedPath = process.env.PATH;
afterEach(() => {
  process.env.PATH = savedPath;
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

/** Puts a stand-in `nft` first on PATH (a shell script body), or, with null, makes PATH hold no nft. */
function fakeNft(body: string | null): void {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-fakenft-'));
  dirs.push(dir);
  if (body === null) {
    process.env.PATH = dir;
    return;
  }
  writeFileSync(join(dir, 'nft'), `#!/bin/sh\n${body}\n`);
  chmodSync(join(dir, 'nft'), 0o755);
  process.env.PATH = `${dir}:${savedPath ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`;
}

async function withSets(...sets: Array<[string, 4 | 6]>): Promise<Netns> {
  const ns = await freshNetns();
  const { ipset } = await ns.netlink();
  for (const [name, family] of sets) await ipset.create(name, { type: 'hash:ip', family, comment: true });
  // A populated set, as on a real node.
  if (sets.some(([n]) => n === V4)) await ipset.add(V4, { address: '10.244.0.5', comment: 'uid-1' });
  return ns;
}

/** `ns` with its netlink handle replaced (spawn still runs in `ns`: its private state needs the real object). */
function hostWith(ns: Netns, handle: Awaited<ReturnType<Netns['netlink']>>): Netns {
  return Object.create(ns, {
    netlink: { value: () => Promise.resolve(handle) },
    spawn: { value: (argv: string[], opts: Parameters<Netns['spawn']>[1]) => ns.spawn(argv, opts) },
  }) as Netns;
}

describe.skipIf(!privileged('nft', 'ipset'))('selectBackend (real netns)', () => {
  it('NATIVE_NFTABLES off → iptables, without looking at the netns; FORCE_IPTABLES_BINARY stays in force', async () => {
    const ns = await withSets([V4, 4]);
    fakeNft('echo should not run >&2; exit 1');
    for (const force of ['', 'legacy', 'nft'] as const) {
      expect(await selectBackend(ns, nft({ nativeNftables: false, forceIptablesBinary: force })))
        .toEqual({ backend: 'iptables', decision: 'not-requested', reason: expect.stringContaining('NATIVE_NFTABLES is off'), warnings: [] });
    }
  });

  it('requested, no probe ipset and an nft with JSON → nftables, no warnings', async () => {
    const ns = await freshNetns();
    for (const ipv6 of [true, false]) {
      expect(await selectBackend(ns, nft({ ipv6 }))).toEqual({ backend: 'nftables', decision: 'requested', reason: expect.any(String), warnings: [] });
    }
    // Other sets do not count.
    await (await ns.netlink()).ipset.create('istio-inpod-probes', { type: 'hash:ip', family: 4 });
    expect((await selectBackend(ns, nft())).backend).toBe('nftables');
  });

  it('istio-inpod-probes-v4 in the host netns → iptables (node upgraded from an iptables install)', async () => {
    const ns = await withSets([V4, 4]);
    for (const ipv6 of [true, false]) {
      const r = await selectBackend(ns, nft({ ipv6 }));
      expect(r).toMatchObject({ backend: 'iptables', decision: 'probe-ipset-present', warnings: [] });
      expect(r.reason).toContain(V4);
      expect(r.reason).not.toContain(V6);
    }
    const both = await selectBackend(await withSets([V4, 4], [V6, 6]), nft());
    expect(both).toMatchObject({ backend: 'iptables', decision: 'probe-ipset-present' });
    expect(both.reason).toContain(`${V4}, ${V6}`);
  });

  it('only istio-inpod-probes-v6: iptables with IPv6 on, nftables with IPv6 off', async () => {
    const ns = await withSets([V6, 6]);
    const on = await selectBackend(ns, nft({ ipv6: true }));
    expect(on).toMatchObject({ backend: 'iptables', decision: 'probe-ipset-present', warnings: [] });
    expect(on.reason).toContain(V6);
    expect(await selectBackend(ns, nft({ ipv6: false }))).toMatchObject({ backend: 'nftables', decision: 'requested', warnings: [] });
  });

  it('FORCE_IPTABLES_BINARY with nftables → a warning that it is ignored; not after a fallback to iptables', async () => {
    const ns = await freshNetns();
    for (const force of ['legacy', 'nft'] as const) {
      const r = await selectBackend(ns, nft({ forceIptablesBinary: force }));
      expect(r.backend).toBe('nftables');
      expect(r.warnings).toEqual([expect.stringMatching(new RegExp(`^FORCE_IPTABLES_BINARY=${force} is ignored`))]);
    }
    await (await ns.netlink()).ipset.create(V4, { type: 'hash:ip', family: 4 });
    expect(await selectBackend(ns, nft({ forceIptablesBinary: 'legacy' }))).toMatchObject({ backend: 'iptables', warnings: [] });
  });

  it('an ipset lookup error other than "no such set" keeps nftables, with a warning', async () => {
    // The kernel gives no EPERM to root, so the set lookup of a real netns is made to fail that way.
    const ns = await freshNetns();
    const real = await ns.netlink();
    const eperm = new NetError('IPSET_CMD_LIST: Operation not permitted', { errno: constants.errno.EPERM, op: 'IPSET_CMD_LIST' });
    const failing = Object.create(real, { ipset: { value: { list: () => Promise.reject(eperm) } } }) as typeof real;
    const host = hostWith(ns, failing);
    const r = await selectBackend(host, nft({ forceIptablesBinary: 'nft' }));
    expect(r).toMatchObject({ backend: 'nftables', decision: 'requested' });
    expect(r.warnings).toHaveLength(3);   // v4, v6, the ignored FORCE_IPTABLES_BINARY
    expect(r.warnings[0]).toContain(`ipset ${V4}`);
    expect(r.warnings[0]).toContain('Operation not permitted');
    expect(r.warnings[1]).toContain(`ipset ${V6}`);
    // One set found decides even when the other lookup failed.
    const oneFound = Object.create(real, { ipset: { value: { list: (n: string) => (n === V6 ? Promise.resolve({}) : Promise.reject(eperm)) } } }) as typeof real;
    const r2 = await selectBackend(hostWith(ns, oneFound), nft());
    expect(r2).toMatchObject({ backend: 'iptables', decision: 'probe-ipset-present' });
    expect(r2.warnings).toEqual([expect.stringContaining(`ipset ${V4}`)]);
  });

  it('nft without JSON support (marker on stderr or stdout) → iptables', async () => {
    const ns = await freshNetns();
    for (const body of [`echo 'Error: ${NFT_JSON_NOT_COMPILED}' >&2; exit 1`, `echo '${NFT_JSON_NOT_COMPILED}'; exit 1`]) {
      fakeNft(body);
      const r = await selectBackend(ns, nft({ forceIptablesBinary: 'legacy' }));
      expect(r).toMatchObject({ backend: 'iptables', decision: 'nft-without-json', warnings: [] });
    }
  });

  it('the probe runs `nft --json list tables` inside the host netns', async () => {
    const ns = await freshNetns();
    const dir = mkdtempSync(join(tmpdir(), 'pwt-nftargs-'));
    dirs.push(dir);
    const out = join(dir, 'args');
    fakeNft(`echo "$@" > ${out}; readlink /proc/self/ns/net >> ${out}; echo '{"nftables": []}'`);
    expect((await selectBackend(ns, nft())).backend).toBe('nftables');
    const [args, netns] = readFileSync(out, 'utf8').trim().split('\n');
    expect(args).toBe('--json list tables');
    expect(netns).toBe(`net:[${statSync(`/proc/self/fd/${ns.fd}`).ino}]`);
  });

  it('other probe failures (error exit, timeout, no nft at all) keep nftables, with a warning', async () => {
    const ns = await freshNetns();
    fakeNft(`echo 'Error: Could not process rule: Operation not permitted' >&2; exit 1`);
    let r = await selectBackend(ns, nft());
    expect(r).toMatchObject({ backend: 'nftables', decision: 'requested' });
    expect(r.warnings).toEqual([expect.stringContaining('exited with 1: Error: Could not process rule: Operation not permitted')]);

    fakeNft('exec sleep 10');
    const t0 = Date.now();
    r = await selectBackend(ns, nft({ nftProbeTimeoutMs: 300 }));
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(r.backend).toBe('nftables');
    expect(r.warnings).toEqual([expect.stringContaining('timed out after 300 ms')]);

    fakeNft(null);
    r = await selectBackend(ns, nft());
    expect(r.backend).toBe('nftables');
    expect(r.warnings).toEqual([expect.stringContaining('not found in PATH')]);
  });
});
