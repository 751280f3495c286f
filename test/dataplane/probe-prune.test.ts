// Probe-set entries whose owner no longer exists are pruned whatever the snapshot's completeness
// (issue 23): a pod deleted while no agent ran must not keep its kubelet-probe SNAT entry once its
// IP goes to a pod outside the mesh. "Exists" is the synced informer's view; a pod the dataplane
// holds (a CNI ADD can come before the informer sees the pod) is never pruned.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { restoreSnapshot } from '../../lib/agent/snapshot.js';
import { DriftCheck } from '../../lib/agent/drift-check.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { fakeDataplane } from './fakes.js';

const LIVE = '863b91d4-4b68-4efa-917f-4b560e3e86aa';     // annotated, but its netns is not found: snapshot incomplete
const GONE = '2c48913c-b29f-11e7-9350-020968147796';     // deleted while the agent was down
const PENDING = '72f7f152-440c-66ac-9084-e0fc1d8a910c';  // exists, not in the snapshot (annotated pending)

const v1pod = (uid: string, ip: string): V1Pod => ({
  metadata: { uid, name: `p-${uid.slice(0, 4)}`, namespace: 'default', annotations: { 'ambient.istio.io/redirection': 'enabled' } },
  spec: { serviceAccountName: 'default', containers: [] },
  status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] },
});

const roots: string[] = [];
afterEach(() => {
  while (roots.length) rmSync(roots.pop()!, { recursive: true, force: true });
});

/** A proc root with only pid 1 (in a test netns): no pod's netns can be found. */
async function emptyProcRoot(): Promise<string> {
  const host = await freshNetns();
  const root = mkdtempSync(join(tmpdir(), 'pwt-proc-'));
  roots.push(root);
  mkdirSync(join(root, '1', 'ns'), { recursive: true });
  symlinkSync(`/run/netns/${host.name}`, join(root, '1', 'ns', 'net'));
  return root;
}

describe.skipIf(!privileged())('probe entries of owners that no longer exist', () => {
  it('an incomplete startup snapshot still prunes the entries of deleted pods, and keeps those of live ones', async () => {
    const { dp, probes } = fakeDataplane();
    probes.entries.set('10.9.0.1', LIVE);
    probes.entries.set('10.9.0.2', GONE);
    probes.entries.set('10.9.0.3', PENDING);
    await dp.start();
    const existing = new Set([LIVE, PENDING]);
    const s = await restoreSnapshot({
      pods: [v1pod(LIVE, '10.9.0.1')], dataplane: dp, procRoot: await emptyProcRoot(), reconcileRules: true,
      ownerExists: (uid) => existing.has(uid),
    });
    expect(s.report.complete).toBe(false);
    expect(s.scan.missing).toEqual([LIVE]);
    expect(s.report.pruned).toEqual(['10.9.0.2']);
    expect([...probes.entries]).toEqual([['10.9.0.1', LIVE], ['10.9.0.3', PENDING]]);
    expect(dp.probes.owner('10.9.0.2')).toBeUndefined();
    await dp.close();
  });

  it('the drift check prunes them each round; a pod the dataplane holds is kept though the informer has not seen it', async () => {
    const ns = await freshNetns();
    const { dp, probes } = fakeDataplane();
    probes.entries.set('10.9.0.2', GONE);
    await dp.start();
    // Enrolled by a CNI ADD before the informer has the pod.
    await dp.enroll({ uid: 'cni-first', name: 'n', namespace: 'default', ips: ['10.9.0.7'] }, { netnsPath: ns.path });
    const dc = new DriftCheck({ dataplane: dp, intervalMs: 60_000, pruneOrphans: () => dp.pruneOrphanProbes(() => false) });
    const round = await dc.runOnce();
    expect(round?.pruned).toEqual(['10.9.0.2']);
    expect([...probes.entries]).toEqual([['10.9.0.7', 'cni-first']]);
    expect((await dc.runOnce())?.pruned).toEqual([]);
    await dc.stop();
    await dp.close();
  });

  it('a queued DEL of a pod the dataplane does not hold releases its entries; a held pod is left to unenroll', async () => {
    const ns = await freshNetns();
    const { dp, probes } = fakeDataplane();
    probes.entries.set('10.9.0.2', GONE);
    probes.entries.set('10.9.0.4', GONE);
    await dp.start();
    await dp.enroll({ uid: LIVE, name: 'l', namespace: 'default', ips: ['10.9.0.1'] }, { netnsPath: ns.path });
    expect((await dp.releaseProbes(GONE)).sort()).toEqual(['10.9.0.2', '10.9.0.4']);
    expect(await dp.releaseProbes(LIVE)).toEqual([]);
    expect([...probes.entries]).toEqual([['10.9.0.1', LIVE]]);
    await dp.close();
  });
});
