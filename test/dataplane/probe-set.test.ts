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
      await backend.upsert(['10.244.0.5'], 'uid-e');
      await backend.flush();
      expect(await set.list()).toEqual([]);
      await expect(backend.upsert(['not-an-ip'], 'x')).rejects.toThrow(TypeError);
    });
  }
});
