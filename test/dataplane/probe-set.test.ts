// Both probe-set backends against the real kernel, with the same contract,
// cross-checked with the standard tools' own listing.
import { describe, expect, it } from 'vitest';
import { IpsetProbeSet } from '../../lib/dataplane/probe-set-ipset.js';
import { NftProbeSet } from '../../lib/dataplane/probe-set-nft.js';
import { ProbeIndex } from '../../lib/dataplane/probe-index.js';
import type { ProbeSet } from '../../lib/dataplane/types.js';
import type { Netns } from '../../lib/net/netns/netns.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const backends: Array<[string, (ns: Netns) => Promise<ProbeSet>, (ns: Netns) => Promise<string>]> = [
  ['ipset', async (ns) => new IpsetProbeSet(await ns.netlink(), true), async (ns) => (await ns.spawn(['ipset', 'save'])).stdout],
  ['nftables', async (ns) => new NftProbeSet(ns, true), async (ns) => (await ns.spawn(['nft', 'list', 'table', 'inet', 'istio-ambient-nat'])).stdout],
];

describe.skipIf(!privileged('ipset', 'nft'))('host probe sets', () => {
  for (const [name, make, dump] of backends) {
    it(`${name}: upsert with the UID as comment, remove only owned entries, prune`, async () => {
      const ns = await freshNetns();
      const backend = await make(ns);
      const set = new ProbeIndex(backend);
      await set.ensure();
      await set.ensure();  // idempotent
      await set.upsert(['10.244.0.2', 'fd00:244::2'], 'uid-a');
      await set.upsert(['10.244.0.3'], 'uid-b');
      const text = await dump(ns);
      expect(text).toMatch(/10\.244\.0\.2 comment "uid-a"/);
      expect(text).toMatch(/fd00:244::2 comment "uid-a"/);
      expect(text).toMatch(/10\.244\.0\.3 comment "uid-b"/);
      // The IP moves to another pod: the upsert overwrites the comment.
      await set.upsert(['10.244.0.3'], 'uid-c');
      expect(await dump(ns)).toMatch(/10\.244\.0\.3 comment "uid-c"/);
      // An entry the index does not know of (written behind its back) is overwritten all the same.
      await backend.upsert([{ ip: '10.244.0.4', uid: 'uid-stale' }, { ip: 'fd00:244::4', uid: 'uid-stale' }]);
      await set.upsert(['10.244.0.4', 'fd00:244::4', '10.244.0.5'], 'uid-f');
      expect(await dump(ns)).toMatch(/10\.244\.0\.4 comment "uid-f"/);
      expect(await dump(ns)).toMatch(/fd00:244::4 comment "uid-f"/);
      expect(await dump(ns)).toMatch(/10\.244\.0\.5 comment "uid-f"/);
      expect(await dump(ns)).not.toMatch(/uid-stale/);
      await set.removeOwned(['10.244.0.4', 'fd00:244::4', '10.244.0.5'], 'uid-f');
      const r = await set.removeOwned(['10.244.0.3', '10.244.0.2', 'fd00:244::2'], 'uid-a');
      expect(r.removed.sort()).toEqual(['10.244.0.2', 'fd00:244::2']);
      expect(r.foreign).toEqual([{ ip: '10.244.0.3', uid: 'uid-c' }]);
      expect(await set.list()).toEqual([{ ip: '10.244.0.3', uid: 'uid-c' }]);
      await set.upsert(['10.244.0.9'], 'uid-d');
      expect(await set.prune(new Set(['10.244.0.9']), () => false)).toEqual(['10.244.0.3']);
      expect(await set.list()).toEqual([{ ip: '10.244.0.9', uid: 'uid-d' }]);
      // A second index over the same kernel set learns the owners from it.
      const other = new ProbeIndex(backend);
      await other.load();
      expect(other.owner('10.244.0.9')).toBe('uid-d');
      // remove() is unconditional and tolerates missing entries.
      await backend.remove(['10.244.0.9', '10.244.0.77']);
      expect(await set.list()).toEqual([]);
      await backend.upsert([{ ip: '10.244.0.5', uid: 'uid-e' }]);
      await backend.flush();
      expect(await set.list()).toEqual([]);
      await expect(backend.upsert([{ ip: 'not-an-ip', uid: 'x' }])).rejects.toThrow(TypeError);
    });

    it(`${name}: upsertMany writes a refill of 1,300 dual-stack pods at once, skipping pods no longer live`, async () => {
      const ns = await freshNetns();
      const backend = await make(ns);
      const set = new ProbeIndex(backend);
      await set.ensure();
      await set.upsert(['10.245.0.7'], 'uid-old');   // an IP that moved: overwritten
      await set.upsert(['10.245.0.8'], 'uid-8');     // already right: left alone
      const pods = Array.from({ length: 1300 }, (_, i) => ({
        uid: `uid-${i}`, ips: [`10.245.${i >> 8}.${i & 255}`, `fd00:245::${i.toString(16)}`],
      }));
      pods.push({ uid: 'uid-late', ips: ['10.245.0.9'] });  // names uid-9's IPv4 again: the later item wins
      const sent: Array<[number, boolean]> = [];
      const upsert = backend.upsert.bind(backend);
      backend.upsert = (entries, opts) => {
        sent.push([entries.length, opts?.fresh === true]);
        return upsert(entries, opts);
      };
      await set.upsertMany(pods, (uid) => uid !== 'uid-3');
      // Two backend calls: the IPs the set has no entry for (without uid-3's two and the one
      // already recorded), then the one that moved.
      expect(sent).toEqual([[2 * 1300 - 2 - 2, true], [1, false]]);
      const kernel = new Map((await set.list()).map((e) => [e.ip, e.uid]));
      expect(kernel.size).toBe(2 * 1300 - 2);
      expect(kernel.get('10.245.0.7')).toBe('uid-7');
      expect(kernel.get('fd00:245::513')).toBe('uid-1299');
      expect(kernel.get('10.245.0.9')).toBe('uid-late');
      expect(kernel.has('10.245.0.3')).toBe(false);
      expect(set.owner('10.245.0.9')).toBe('uid-late');
      // The tool's own listing agrees with the netlink one.
      const text = await dump(ns);
      expect(text).toMatch(/10\.245\.5\.19 comment "uid-1299"/);
      expect(text).toMatch(/fd00:245::513 comment "uid-1299"/);
    });

    it(`${name}: a large write with the longest comments is split into messages the kernel takes`, async () => {
      const ns = await freshNetns();
      const backend = await make(ns);
      await backend.ensure();
      // 1,000 IPv6 elements with 127-byte comments: about 170 KB of elements, more than one
      // netlink attribute (16-bit length) holds.
      const entries = Array.from({ length: 1000 }, (_, i) => ({ ip: `fd00:246::${i.toString(16)}`, uid: `${String(i).padStart(4, '0')}${'u'.repeat(123)}` }));
      await backend.upsert(entries, { fresh: true });
      await backend.upsert(entries.slice(0, 300).map((e) => ({ ...e, uid: `${e.uid.slice(0, 4)}${'v'.repeat(123)}` })));
      const kernel = new Map((await backend.list()).map((e) => [e.ip, e.uid]));
      expect(kernel.size).toBe(1000);
      expect(kernel.get('fd00:246::1')).toBe(`0001${'v'.repeat(123)}`);
      expect(kernel.get('fd00:246::3e7')).toBe(`0999${'u'.repeat(123)}`);
    });
  }
});
