// The netlink handle cache: one handle per netns identity, ref-counted; a
// failed open is dropped from the cache without evicting a newer handle.
import { describe, expect, it } from 'vitest';
import { acquireHandle, releaseHandle } from '../../../lib/net/netns/handle.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

describe.skipIf(!privileged())('acquireHandle', () => {
  it('a late failure of an old open does not evict the newer handle under the same key', async () => {
    const ns = await freshNetns();
    const key = `test-${ns.key}`;
    const failing = acquireHandle(key, -2);  // not a netns fd: the open fails (EBADF)
    releaseHandle(key);                      // its only user gives up before it settles
    const good = acquireHandle(key, ns.fd);  // a newer user of the same key
    await expect(failing).rejects.toMatchObject({ code: 'EBADF' });
    const again = acquireHandle(key, ns.fd);
    try {
      expect(again).toBe(good);              // still cached: the failure removed only its own entry
      expect((await good).isClosed).toBe(false);
    } finally {
      releaseHandle(key);
      releaseHandle(key);
    }
    expect((await good).isClosed).toBe(true); // the last release closed it exactly once
  });

  it('does not cache a failed open', async () => {
    const ns = await freshNetns();
    const key = `test-${ns.key}`;
    await expect(acquireHandle(key, -2)).rejects.toMatchObject({ code: 'EBADF' });
    const h = acquireHandle(key, ns.fd);
    try {
      expect((await (await h).links.get('lo')).name).toBe('lo');
    } finally {
      releaseHandle(key);
    }
  });
});
