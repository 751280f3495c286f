// The drift check finds a Running pod the policy selects that the dataplane
// (and so ztunnel) does not hold — what a GC of the dataplane alone left
// behind: annotation still `enabled`, the controller's entry and the in-pod
// rules still there, traffic to 15001 with no ztunnel behind it — and puts
// it back through the controller; over a real node dataplane, ZDS peer and
// apiserver. A pod whose netns cannot be found is reported once, not every
// round; the informer path re-enrolls such a pod on its next event too.
import { afterEach, expect, it } from 'vitest';
import { DriftCheck, UNHELD_DRIFT } from '../../lib/agent/drift-check.js';
import type { DriftRepair } from '../../lib/dataplane/dataplane.js';
import { patchPodMetadata } from '../../lib/kube/pods.js';
import { privileged } from '../helpers/privileged.js';
import { adminClient, describeKube } from '../helpers/kube.js';
import { enrolledPod, meshNode, type MeshNode } from '../ambient/controller-fixture.js';

let t: MeshNode | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});


describeKube('drift check: selected Running pods the dataplane does not hold', () => {
  it.skipIf(!privileged('nft'))('re-enrolls a pod a dataplane-level GC took out of ztunnel, and reports it', async () => {
    const m = (t = await meshNode({ pods: 2 }));
    const a = await enrolledPod(m, 0);
    const b = await enrolledPod(m, 1);
    const netnsA = m.node.pods[0]!.netnsPath;
    // What GC did before: the dataplane alone. ztunnel dropped the pod; annotation, controller entry and rules stay.
    await m.agent.dataplane.unenroll(a.info, { podDeleted: true });
    expect(await m.peerLogged(a.uid, 2)).toEqual(['add:', 'del:']);
    expect(await m.annotation(m.ambientNs, a.name)).toBe('enabled');
    expect(m.ctl.isEnrolled(a.uid)).toBe(true);

    const drifted: Array<DriftRepair & { pod: { uid: string } }> = [];
    const dc = new DriftCheck({ dataplane: m.agent.dataplane, mesh: m.ctl, intervalMs: 60_000, onDrift: (d) => { drifted.push(d); } });
    const round = await dc.runOnce();
    expect(round).toMatchObject({ checked: 1, unheld: 1 });  // b checked as held, a found unheld
    expect(drifted.map((d) => ({ uid: d.uid, drift: d.drift, repaired: d.repaired, failed: d.failed }))).toEqual([
      { uid: a.uid, drift: [UNHELD_DRIFT], repaired: ['enrollment'], failed: [] },
    ]);
    expect(await m.peerLogged(a.uid, 3)).toEqual(['add:', 'del:', 'add:']);
    expect(m.peer.active.has(a.uid)).toBe(true);
    expect((await m.agent.dataplane.verify(a.info, { netnsPath: netnsA })).drift).toEqual([]);  // rules, ztunnel, probe set
    expect(m.peerLog(b.uid)).toEqual(['add:']);

    // Nothing left: the next round finds nothing.
    drifted.length = 0;
    expect(await dc.runOnce()).toMatchObject({ checked: 2, unheld: 0, drifted: [] });
    await dc.stop();
  });

  it.skipIf(!privileged('nft'))('reports an unheld pod whose netns is not found once, and the informer re-enrolls a lost pod on its next event', async () => {
    const m = (t = await meshNode({ pods: 1 }));
    const a = await enrolledPod(m, 0);
    await m.agent.dataplane.unenroll(a.info, { podDeleted: true });
    await m.peerLogged(a.uid, 2);
    m.sandboxes.delete(a.name);
    const drifted: DriftRepair[] = [];
    const dc = new DriftCheck({ dataplane: m.agent.dataplane, mesh: m.ctl, intervalMs: 60_000, onDrift: (d) => { drifted.push(d); } });
    expect(await dc.runOnce()).toMatchObject({ unheld: 1 });
    expect(await dc.runOnce()).toMatchObject({ unheld: 1 });
    expect(drifted.map((d) => d.failed)).toEqual([[{ part: 'enrollment', error: 'the pod netns was not found' }]]);
    expect(m.peerLog(a.uid)).toEqual(['add:', 'del:']);
    await dc.stop();

    // The sandbox is found again; an update of the pod (annotation still `enabled`, the controller's entry stale) re-enrolls it.
    m.sandboxes.set(a.name, m.node.pods[0]!.netnsPath);
    await patchPodMetadata(adminClient(), { namespace: m.ambientNs, name: a.name }, { labels: { touched: 'yes' } });
    expect(await m.peerLogged(a.uid, 3)).toEqual(['add:', 'del:', 'add:']);
    expect(m.peer.active.has(a.uid)).toBe(true);
  });
});
