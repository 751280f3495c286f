// The controller's CNI-path entry points over a real node dataplane, ZDS
// peer and apiserver: removePodFromMesh takes a pod out wholly (ZDS del,
// probe entries, in-pod rules, annotation, the controller's entry), resumes
// after a failure part-way from where it stopped, and leaves alone a UID
// nothing knows as meshed; addPodToMesh's signal cancels the enrollment and
// undoes it.
import { afterEach, expect, it } from 'vitest';
import { ERR_ENROLL_ABORTED, ERR_OPERATION_ABORTED } from '../../lib/dataplane/errors.js';
import { podIps } from '../../lib/ambient/controller.js';
import { privileged } from '../helpers/privileged.js';
import { adminClient, describeKube } from '../helpers/kube.js';
import { enrolledPod, meshNode, type MeshNode } from './controller-fixture.js';

let t: MeshNode | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});


describeKube('AmbientController CNI path', () => {
  it.skipIf(!privileged('nft'))('removePodFromMesh takes a pod out wholly, and leaves a UID alone that was never meshed', async () => {
    const m = (t = await meshNode({ pods: 1 }));
    const before = await m.podState(0);
    const p = await enrolledPod(m, 0);
    expect(await m.podState(0)).not.toBe(before);
    expect((await m.agent.probes.list()).some((e) => e.uid === p.uid)).toBe(true);

    m.sandboxes.delete(p.name);  // the sandbox is gone (a DEL): nothing for the informer to re-enroll into
    const r = await m.ctl.removePodFromMesh(p.uid, { reason: 'cni-del' });
    expect(r).toEqual({ uid: p.uid, unenrolled: true, held: true, rulesRemoved: true, annotation: 'cleared' });
    expect(m.agent.dataplane.cache.has(p.uid)).toBe(false);
    expect(m.ctl.isEnrolled(p.uid)).toBe(false);
    expect(m.ctl.holds(p.uid)).toBe(false);
    expect((await m.agent.probes.list()).some((e) => e.uid === p.uid)).toBe(false);
    expect(await m.podState(0)).toBe(before);
    expect(await m.annotation(m.ambientNs, p.name)).toBeUndefined();
    expect(await m.peerLogged(p.uid, 2)).toEqual(['add:', 'del:']);
    expect(m.peer.active.has(p.uid)).toBe(false);
    expect(m.ctl.stats.removed).toBe(1);

    // Again, and for a UID nobody knows: nothing to do, no ZDS traffic.
    expect(await m.ctl.removePodFromMesh(p.uid, { reason: 'cni-gc' })).toEqual({ uid: p.uid, unenrolled: false, held: false, rulesRemoved: false, annotation: 'none' });
    expect(await m.ctl.removePodFromMesh('no-such-uid', { reason: 'queued-del' })).toMatchObject({ unenrolled: false, annotation: 'gone' });
    expect(m.peer.log.filter((e) => e.type === 'del')).toHaveLength(1);
    await expect(m.ctl.removePodFromMesh(p.uid, { reason: 'gc' as never })).rejects.toBeInstanceOf(TypeError);
  });

  it.skipIf(!privileged('nft'))('removePodFromMesh interrupted part-way is finished by the next call, from where it stopped', async () => {
    let unenrolls = 0;
    let abortAfterUnenroll: AbortController | undefined;
    const m = (t = await meshNode({
      pods: 2,
      adapt: (dp) => ({
        ...dp,
        unenroll: async (pod, o) => {
          unenrolls++;
          const r = await dp.unenroll(pod, o);
          abortAfterUnenroll?.abort();
          return r;
        },
      }),
    }));
    const before = [await m.podState(0), await m.podState(1)];
    const a = await enrolledPod(m, 0);
    const b = await enrolledPod(m, 1);
    m.sandboxes.clear();

    // a: interrupted inside the dataplane, right after its in-pod rules were removed.
    const ac = new AbortController();
    const remove = m.agent.rules.remove.bind(m.agent.rules);
    m.agent.rules.remove = async (ns, pod) => {
      await remove(ns, pod);
      ac.abort();
    };
    await expect(m.ctl.removePodFromMesh(a.uid, { reason: 'cni-gc', signal: ac.signal })).rejects.toMatchObject({ code: ERR_OPERATION_ABORTED, done: ['rules'] });
    m.agent.rules.remove = remove;
    expect(m.agent.dataplane.cache.get(a.uid)?.leaving).toBe(true);  // kept for the next attempt, offered to no new ztunnel
    expect(m.agent.dataplane.snapshot().map((e) => e.pod.uid)).toEqual([b.uid]);
    expect(await m.annotation(m.ambientNs, a.name)).toBe('enabled');
    expect(m.peerLog(a.uid)).toEqual(['add:']);
    expect(await m.ctl.removePodFromMesh(a.uid, { reason: 'cni-gc' })).toEqual({ uid: a.uid, unenrolled: true, held: true, rulesRemoved: true, annotation: 'cleared' });
    expect(m.agent.dataplane.cache.has(a.uid)).toBe(false);
    expect(await m.podState(0)).toBe(before[0]);
    expect(await m.annotation(m.ambientNs, a.name)).toBeUndefined();
    expect(await m.peerLogged(a.uid, 2)).toEqual(['add:', 'del:']);

    // b: interrupted after the dataplane, before the annotation: the next call only clears the annotation.
    abortAfterUnenroll = new AbortController();
    const calls = unenrolls;
    await expect(m.ctl.removePodFromMesh(b.uid, { reason: 'cni-del', signal: abortAfterUnenroll.signal })).rejects.toMatchObject({ code: ERR_OPERATION_ABORTED, done: ['dataplane'] });
    abortAfterUnenroll = undefined;
    expect(unenrolls).toBe(calls + 1);
    expect(m.agent.dataplane.cache.has(b.uid)).toBe(false);
    expect(m.ctl.isEnrolled(b.uid)).toBe(false);
    expect(await m.annotation(m.ambientNs, b.name)).toBe('enabled');
    expect(await m.ctl.removePodFromMesh(b.uid, { reason: 'cni-del' })).toEqual({ uid: b.uid, unenrolled: true, held: true, rulesRemoved: true, annotation: 'cleared' });
    expect(unenrolls).toBe(calls + 1);
    expect(await m.annotation(m.ambientNs, b.name)).toBeUndefined();
    expect(await m.podState(1)).toBe(before[1]);
    expect(await m.peerLogged(b.uid, 2)).toEqual(['add:', 'del:']);
  });

  it.skipIf(!privileged('nft'))('addPodToMesh with a signal that fires while ztunnel has not acked: undone, no annotation, no Event', async () => {
    const m = (t = await meshNode({ pods: 1 }));
    const before = await m.podState(0);
    const pod = await m.runningPod(0, m.plainNs);  // not selected: the informer leaves it to this call
    const uid = pod.metadata!.uid!;
    m.peer.faults.ackDelayMs = 300;
    const ac = new AbortController();
    const outcome = m.ctl.addPodToMesh(pod, podIps(pod), m.node.pods[0]!.netnsPath, { signal: ac.signal }).then(() => 'resolved', (e: unknown) => e);
    await m.peer.waitFor((x) => x.active.has(uid));  // the add is with ztunnel; its ack follows a timer, after this abort
    ac.abort();
    expect(await outcome).toMatchObject({ code: ERR_ENROLL_ABORTED, retryable: true });
    expect(m.agent.dataplane.cache.has(uid)).toBe(false);
    expect(m.ctl.isEnrolled(uid)).toBe(false);
    expect((await m.agent.probes.list()).some((e) => e.uid === uid)).toBe(false);
    expect(await m.podState(0)).toBe(before);
    expect(await m.peerLogged(uid, 2)).toEqual(['add:', 'del:']);
    expect(m.peer.active.has(uid)).toBe(false);
    expect(await m.annotation(m.plainNs, pod.metadata!.name!)).toBeUndefined();
    const events = await adminClient().core.listNamespacedEvent({ namespace: m.plainNs });
    expect(events.items.filter((e) => e.involvedObject.uid === uid)).toEqual([]);
    expect(m.ctl.stats.enrollFailures).toBe(0);
  });
});
