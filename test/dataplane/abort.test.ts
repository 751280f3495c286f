// An enrollment whose signal fires (the CNI ADD deadline) stops at the next
// step boundary without waiting for ztunnel's answer, undoes what it did and
// rejects with the retryable ERR_ENROLL_ABORTED: no cache entry, the pod
// netns as before the ADD, no probe entry, and ztunnel told to drop the pod
// (a del behind the unanswered add) or, when that ztunnel never answers,
// the pod left out of every later snapshot.
import { afterEach, describe, expect, it } from 'vitest';
import { ERR_ENROLL_ABORTED } from '../../lib/dataplane/errors.js';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { redirectionState } from '../helpers/netns-state.js';
import { privileged } from '../helpers/privileged.js';
import { simNode } from '../helpers/sim-node.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

let runs = 0;
async function setup(opts: { zdsAckTimeoutMs?: number } = {}) {
  const { node, agent, newPeer } = await simNode(`ab${++runs}`, 1, cleanups, opts);
  const p = node.pods[0]!;
  const pod: PodInfo = { uid: p.uid, name: p.name, namespace: 'test', ips: [p.ip4, p.ip6] };
  const podState = () => redirectionState(p.netnsPath);
  return { node, agent, pod, netnsPath: p.netnsPath, newPeer, podState, peer: await newPeer() };
}

const aborted = { code: ERR_ENROLL_ABORTED, retryable: true, stage: 'ztunnel' };

describe.skipIf(!privileged('nft'))('an aborted enrollment', () => {
  it('is undone while ztunnel has not answered its add: a del follows, nothing is left', async () => {
    const t = await setup();
    const before = await t.podState();
    t.peer.faults.ackDelayMs = 300;  // from now on: the add's ack is still on its way when the deadline fires
    const ac = new AbortController();
    const enrolling = t.agent.dataplane.enroll(t.pod, { netnsPath: t.netnsPath, signal: ac.signal });
    const outcome = enrolling.then(() => 'resolved', (e: unknown) => e);
    // The peer took the add (its proxy started) and has not acked: the ack can only follow a timer, after this abort.
    await t.peer.waitFor((p) => p.active.has(t.pod.uid));
    ac.abort(new Error('CNI ADD deadline'));
    expect(await outcome).toMatchObject(aborted);
    expect(t.agent.dataplane.cache.has(t.pod.uid)).toBe(false);
    expect(t.agent.zds!.knows(t.pod.uid)).toBe(false);
    expect((await t.agent.probes.list()).filter((e) => e.uid === t.pod.uid)).toEqual([]);
    expect(await t.podState()).toBe(before);
    await t.peer.waitFor((p) => p.log.some((e) => e.type === 'del' && e.uid === t.pod.uid && e.response === ''));
    expect(t.peer.log.filter((e) => e.uid === t.pod.uid).map((e) => e.type)).toEqual(['add', 'del']);
    expect(t.peer.active.has(t.pod.uid)).toBe(false);

    // The retried ADD enrolls as if the first had never been.
    t.peer.faults.ackDelayMs = 0;
    await t.agent.dataplane.enroll(t.pod, { netnsPath: t.netnsPath });
    expect((await t.agent.dataplane.verify(t.pod, { netnsPath: t.netnsPath })).drift).toEqual([]);
  });

  it('is undone when ztunnel never answers: the pod is in no later snapshot', async () => {
    const t = await setup({ zdsAckTimeoutMs: 1000 });
    const before = await t.podState();
    t.peer.faults.ackDelayMs = 600_000;  // never, as far as this test goes
    const ac = new AbortController();
    const outcome = t.agent.dataplane.enroll(t.pod, { netnsPath: t.netnsPath, signal: ac.signal }).then(() => 'resolved', (e: unknown) => e);
    await t.peer.waitFor((p) => p.active.has(t.pod.uid));
    ac.abort();
    expect(await outcome).toMatchObject(aborted);
    expect(t.agent.dataplane.cache.has(t.pod.uid)).toBe(false);
    expect(t.agent.dataplane.snapshot()).toEqual([]);
    expect((await t.agent.probes.list()).filter((e) => e.uid === t.pod.uid)).toEqual([]);
    expect(await t.podState()).toBe(before);
    // That ztunnel is gone (its add timed out); the next one is not given the pod.
    await t.peer.stop();
    const next = await t.newPeer();
    expect(next.log.filter((e) => e.uid === t.pod.uid)).toEqual([]);
    expect(t.agent.zds!.knows(t.pod.uid)).toBe(false);
  });

  it('rejects at once, writing nothing, when the signal fired before the call; a pod enrolled in the same netns stays enrolled', async () => {
    const t = await setup();
    const before = await t.podState();
    await expect(t.agent.dataplane.enroll(t.pod, { netnsPath: t.netnsPath, signal: AbortSignal.abort() })).rejects.toMatchObject({ ...aborted, stage: 'netns' });
    expect(await t.podState()).toBe(before);
    expect(t.peer.log.filter((e) => e.uid === t.pod.uid)).toEqual([]);

    await t.agent.dataplane.enroll(t.pod, { netnsPath: t.netnsPath });
    t.peer.faults.ackDelayMs = 300;
    const sent = () => t.agent.zds!.server.connections().reduce((n, c) => n + c.sent, 0);
    const sentBefore = sent();
    const ac = new AbortController();
    const outcome = t.agent.dataplane.enroll(t.pod, { netnsPath: t.netnsPath, signal: ac.signal }).then(() => 'resolved', (e: unknown) => e);
    // The re-add was sent; polled on a 2 ms timer, which runs before the ack's 300 ms one whatever the load.
    while (sent() === sentBefore) await new Promise((r) => setTimeout(r, 2));
    ac.abort();
    expect(await outcome).toMatchObject(aborted);
    t.peer.faults.ackDelayMs = 0;
    expect((await t.agent.dataplane.verify(t.pod, { netnsPath: t.netnsPath })).drift).toEqual([]);
    expect(t.peer.log.filter((e) => e.uid === t.pod.uid && e.type === 'del')).toEqual([]);
  });
});
