// ipset over nfnetlink against the real kernel, each test in its own netns,
// cross-checked with `ipset save` run inside that same netns.
import { describe, expect, it } from 'vitest';
import { isExist, isNotFound, NetError } from '../../../lib/net/errors.js';
import { formatAddLine, formatEntry } from '../../../lib/net/ipset/codec.js';
import type { IpsetEntry, IpsetError } from '../../../lib/net/ipset/ipset.js';
import type { Netns } from '../../../lib/net/netns/netns.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';
import { rejection } from '../../helpers/rejection.js';

const uid = (i: number) => `${i.toString(16).padStart(8, '0')}-7c1d-4b7e-9f00-${(i * 7919).toString(16).padStart(12, '0')}`;
const v4 = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
const v6 = (i: number) => `fd00:abcd::${i.toString(16)}`;

/** `ipset save` inside the netns: create lines and add lines per set. */
async function save(ns: Netns, set?: string): Promise<{ create: Map<string, string>; adds: Map<string, string[]> }> {
  const r = await ns.spawn(['ipset', 'save', ...(set ? [set] : [])]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  const create = new Map<string, string>();
  const adds = new Map<string, string[]>();
  for (const line of r.stdout.split('\n').filter(Boolean)) {
    const [verb, name] = line.split(' ');
    if (verb === 'create') create.set(name!, line);
    else adds.set(name!, [...(adds.get(name!) ?? []), line]);
  }
  return { create, adds };
}

const sorted = (xs: string[] | undefined) => [...(xs ?? [])].sort();
const thrown = async (p: Promise<unknown>): Promise<IpsetError> => (await rejection(p, NetError)) as IpsetError;

describe.skipIf(!privileged('ipset'))('ipset over netlink (real kernel)', () => {
  it('adds 10,000 IPv4 and 1,000 IPv6 elements with comments in batches; list equals ipset save', async () => {
    const ns = await freshNetns();
    const { ipset } = await ns.netlink();
    await ipset.create('probes-v4', { type: 'hash:ip', family: 4, comment: true });
    await ipset.create('probes-v6', { type: 'hash:ip', family: 6, comment: true, maxelem: 4096, hashsize: 256 });
    const e4: IpsetEntry[] = Array.from({ length: 10_000 }, (_, i) => ({ address: v4(i), comment: uid(i) }));
    const e6: IpsetEntry[] = Array.from({ length: 1000 }, (_, i) => ({ address: v6(i), comment: uid(i + 1e6) }));
    await ipset.add('probes-v4', e4);
    await ipset.add('probes-v6', e6);

    const l4 = await ipset.list('probes-v4');
    const l6 = await ipset.list('probes-v6');
    expect(l4.header).toMatchObject({ name: 'probes-v4', type: 'hash:ip', family: 4, comment: true, entries: 10_000, references: 0 });
    expect(l6.header).toMatchObject({ family: 6, maxelem: 4096, entries: 1000 });
    expect(l6.header.hashsize).toBeGreaterThanOrEqual(256);  // the kernel may grow the hash while filling it
    expect(l4.entries).toHaveLength(10_000);
    expect(l6.entries).toHaveLength(1000);
    expect(new Map(l6.entries.map((e) => [e.address, e.comment])).get('fd00:abcd::3e7')).toBe(uid(999 + 1e6));

    const saved = await save(ns);
    expect(sorted(l4.entries.map((e) => formatAddLine('probes-v4', e)))).toEqual(sorted(saved.adds.get('probes-v4')));
    expect(sorted(l6.entries.map((e) => formatAddLine('probes-v6', e)))).toEqual(sorted(saved.adds.get('probes-v6')));
    // What we asked for is what both readers see.
    expect(sorted(saved.adds.get('probes-v4'))).toEqual(sorted(e4.map((e) => formatAddLine('probes-v4', e))));
    expect(saved.create.get('probes-v6')).toMatch(new RegExp(`^create probes-v6 hash:ip family inet6 hashsize ${l6.header.hashsize} maxelem 4096 comment\\b`));
    expect(saved.create.get('probes-v4')).toContain(`hashsize ${l4.header.hashsize} maxelem ${l4.header.maxelem} comment`);
    expect((await ipset.names()).sort()).toEqual(['probes-v4', 'probes-v6']);
  });

  it('handles hash:net and hash:ip,port elements and timeouts like ipset save', async () => {
    const ns = await freshNetns();
    const { ipset } = await ns.netlink();
    await ipset.create('nets', { type: 'hash:net', family: 6 });
    await ipset.add('nets', ['fd00::/64', 'fd01:2::1', '2001:db8:1::/48', { address: 'fd02::5', cidr: 120 }]);
    await ipset.create('ports', { type: 'hash:ip,port', family: 4, timeout: 600 });
    await ipset.add('ports', ['10.0.0.1,tcp:80', '10.0.0.1,udp:53', '10.0.0.2,8443', { address: '10.0.0.3', port: 9, proto: 'sctp', timeout: 100 }]);
    const nets = await ipset.list('nets');
    const ports = await ipset.list('ports');
    const saved = await save(ns);
    expect(sorted(nets.entries.map((e) => formatAddLine('nets', e)))).toEqual(sorted(saved.adds.get('nets')));
    expect(new Set(nets.entries.map(formatEntry))).toEqual(new Set(['fd00::/64', 'fd01:2::1', '2001:db8:1::/48', 'fd02::/120']));
    expect(new Set(ports.entries.map(formatEntry))).toEqual(new Set(['10.0.0.1,tcp:80', '10.0.0.1,udp:53', '10.0.0.2,tcp:8443', '10.0.0.3,sctp:9']));
    expect(ports.header.timeout).toBe(600);
    const t = ports.entries.find((e) => e.proto === 'sctp')!.timeout!;
    expect(t).toBeGreaterThan(90);
    expect(t).toBeLessThanOrEqual(100);
    // Timeouts tick, so compare the elements themselves.
    expect(sorted(saved.adds.get('ports')!.map((l) => l.split(' ')[2]!))).toEqual(sorted(ports.entries.map(formatEntry)));
    expect(await ipset.test('nets', 'fd00::77')).toBe(true);  // matched by fd00::/64
    expect(await ipset.test('ports', '10.0.0.1,udp:80')).toBe(false);
  });

  it('tests, deletes (batched), flushes, swaps, renames and destroys', async () => {
    const ns = await freshNetns();
    const { ipset } = await ns.netlink();
    await ipset.create('a', { type: 'hash:ip' });
    await ipset.create('b', { type: 'hash:ip' });
    await ipset.add('a', Array.from({ length: 1500 }, (_, i) => v4(i)));
    await ipset.add('b', '192.168.0.1');
    expect(await ipset.test('a', '10.0.5.219')).toBe(true);
    expect(await ipset.test('a', '10.0.5.220')).toBe(false);

    await ipset.del('a', Array.from({ length: 1000 }, (_, i) => v4(i * 1.5 | 0)).filter((x, i, xs) => xs.indexOf(x) === i));
    const left = new Set((await ipset.list('a')).entries.map((e) => e.address));
    expect(left.size).toBe(1500 - new Set(Array.from({ length: 1000 }, (_, i) => i * 1.5 | 0)).size);
    expect(left.has(v4(0))).toBe(false);
    expect(left.has(v4(1))).toBe(false);
    expect(left.has(v4(2))).toBe(true);
    await ipset.del('a', [v4(0), v4(2)], { exist: true });  // v4(0) already gone: tolerated
    expect(await ipset.test('a', v4(2))).toBe(false);

    await ipset.swap('a', 'b');
    expect((await ipset.list('a')).entries).toEqual([{ address: '192.168.0.1' }]);
    expect((await save(ns, 'b')).adds.get('b')).toHaveLength(left.size - 1);
    await ipset.rename('b', 'c');
    expect((await ipset.names()).sort()).toEqual(['a', 'c']);
    await ipset.flush('c');
    expect((await ipset.list('c')).header.entries).toBe(0);
    await ipset.destroy('c');
    await ipset.destroy('c', { exist: true });
    expect(await ipset.names()).toEqual(['a']);
  });

  it('upserts: exist overwrites the comment (single and batched), without exist it is IPSET_ERR_EXIST', async () => {
    const ns = await freshNetns();
    const { ipset } = await ns.netlink();
    await ipset.create('istio-inpod-probes-v4', { type: 'hash:ip', family: 4, comment: true });
    await ipset.add('istio-inpod-probes-v4', { address: '10.244.0.7', comment: 'uid-old' });
    const dup = await thrown(ipset.add('istio-inpod-probes-v4', { address: '10.244.0.7', comment: 'uid-new' }));
    expect(dup.code).toBe('IPSET_ERR_EXIST');
    expect(dup.op).toBe('IPSET_CMD_ADD');
    expect(isExist(dup)).toBe(true);
    expect(dup.index).toBe(0);

    await ipset.add('istio-inpod-probes-v4', { address: '10.244.0.7', comment: 'uid-new' }, { exist: true });
    expect((await save(ns)).adds.get('istio-inpod-probes-v4')).toEqual(['add istio-inpod-probes-v4 10.244.0.7 comment "uid-new"']);

    await ipset.add('istio-inpod-probes-v4', [{ address: '10.244.0.8', comment: 'x' }, { address: '10.244.0.7', comment: 'uid-3' }], { exist: true });
    const byIp = new Map((await ipset.list('istio-inpod-probes-v4')).entries.map((e) => [e.address, e.comment]));
    expect(byIp).toEqual(new Map([['10.244.0.7', 'uid-3'], ['10.244.0.8', 'x']]));
  });

  it('reports errors by code: duplicate set, wrong family, missing set, missing element, rename/swap clashes', async () => {
    const ns = await freshNetns();
    const { ipset } = await ns.netlink();
    await ipset.create('s4', { type: 'hash:ip', family: 4 });
    const again = await thrown(ipset.create('s4', { type: 'hash:ip', family: 4 }));
    expect(again.code).toBe('EEXIST');  // what the kernel answers for a taken name without exist
    expect(again.op).toBe('IPSET_CMD_CREATE');
    await ipset.create('s4', { type: 'hash:ip', family: 4 }, { exist: true });  // identical: fine
    expect((await thrown(ipset.create('s4', { type: 'hash:net', family: 4 }, { exist: true }))).code).toBe('EEXIST');

    const fam = await thrown(ipset.add('s4', ['fd00::1', 'fd00::2']));
    expect(fam.code).toBe('IPSET_ERR_PROTOCOL');
    expect(fam.index).toBe(0);
    expect(fam.entry).toBe('fd00::1');
    await expect(ipset.add('s4', ['10.0.0.1', 'fd00::1'])).rejects.toThrow(TypeError);
    await expect(ipset.add('s4', '10.0.0.1/40')).rejects.toThrow(RangeError);

    const missing = await thrown(ipset.add('nope', ['10.0.0.1', '10.0.0.2']));
    expect(missing.code).toBe('ENOENT');
    expect(missing.index).toBeUndefined();
    expect(isNotFound(missing)).toBe(true);
    for (const p of [ipset.list('nope'), ipset.destroy('nope'), ipset.flush('nope'), ipset.test('nope', '10.0.0.1')]) {
      expect((await thrown(p)).code).toBe('ENOENT');
    }

    const gone = await thrown(ipset.del('s4', '10.9.9.9'));
    expect(gone.code).toBe('IPSET_ERR_EXIST');
    expect(gone.op).toBe('IPSET_CMD_DEL');
    expect(isNotFound(gone)).toBe(true);
    expect(isExist(gone)).toBe(false);

    await ipset.create('s6', { type: 'hash:ip', family: 6 });
    expect((await thrown(ipset.rename('s4', 's6'))).code).toBe('IPSET_ERR_EXIST_SETNAME2');
    expect((await thrown(ipset.swap('s4', 's6'))).code).toBe('IPSET_ERR_TYPE_MISMATCH');
    expect((await thrown(ipset.swap('s4', 'zz'))).code).toBe('IPSET_ERR_EXIST_SETNAME2');
  });

  it('names the one bad element of a multi-message batch and applies exactly the ones before it', async () => {
    const ns = await freshNetns();
    const { ipset } = await ns.netlink();
    await ipset.create('plain', { type: 'hash:ip' });  // no comment extension
    // 2500 plain elements take three messages; the bad one is in the second.
    const input: Array<string | IpsetEntry> = Array.from({ length: 2500 }, (_, i) => v4(i));
    input[1700] = { address: v4(1700), comment: 'needs the comment extension' };
    for (const exist of [true, false]) {
      await ipset.flush('plain');
      const err = await thrown(ipset.add('plain', input, { exist }));
      expect(err.code).toBe('IPSET_ERR_COMMENT');
      expect(err.op).toBe('IPSET_CMD_ADD');
      expect(err.index).toBe(1700);
      expect(err.entry).toBe(input[1700]);
      const have = (await ipset.list('plain')).entries.map((e) => e.address);
      expect(new Set(have)).toEqual(new Set(Array.from({ length: 1700 }, (_, i) => v4(i))));
    }
    // A pre-existing element in a non-exist batch: the kernel stops there and
    // names its line in its copy of the request, so the element is exact.
    await ipset.flush('plain');
    await ipset.add('plain', v4(5));
    const dup = await thrown(ipset.add('plain', Array.from({ length: 10 }, (_, i) => v4(i))));
    expect(dup.code).toBe('IPSET_ERR_EXIST');
    expect(dup.index).toBe(5);
    expect(dup.entry).toBe(v4(5));
    expect(dup.batch).toBeUndefined();
    expect(new Set((await ipset.list('plain')).entries.map((e) => e.address))).toEqual(new Set([0, 1, 2, 3, 4, 5].map(v4)));
  });
});
