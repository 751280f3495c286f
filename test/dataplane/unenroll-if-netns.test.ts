// unenroll({ ifNetns }): a DEL of an old sandbox checks that the pod is enrolled in that sandbox's
// netns, then asks for the removal; an ADD of the pod's new sandbox can land in between. The
// dataplane re-checks under the pod's lock and leaves the new sandbox enrolled.
import { afterEach, describe, expect, it } from 'vitest';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { privileged } from '../helpers/privileged.js';
import { simNode } from '../helpers/sim-node.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

const idOf = (path: string) => {
  const ns = Netns.open(path);
  try {
    return { ...ns.id };
  } finally {
    ns.close();
  }
};

describe.skipIf(!privileged('nft'))('unenroll only if the pod is enrolled in the given netns', () => {
  it('a removal for the old sandbox leaves the sandbox an ADD enrolled meanwhile; one for the current sandbox removes it', async () => {
    // Two pod netns: the pod's first sandbox and the one it was recreated in.
    const { node, agent, newPeer } = await simNode('uin', 2, cleanups);
    const peer = await newPeer();

    const [first, second] = [node.pods[0]!, node.pods[1]!];
    const pod: PodInfo = { uid: first.uid, name: first.name, namespace: 'test', ips: [first.ip4, first.ip6] };
    await agent.dataplane.enroll(pod, { netnsPath: first.netnsPath });
    const oldSandbox = idOf(first.netnsPath);
    expect(agent.dataplane.cache.get(pod.uid)?.netns?.ns.id).toEqual(oldSandbox);

    // The DEL of the old sandbox has checked its identity; now the ADD of the new sandbox runs first.
    await agent.dataplane.enroll(pod, { netnsPath: second.netnsPath });
    const r = await agent.dataplane.unenroll(pod, { podDeleted: false, ifNetns: oldSandbox });
    expect(r).toMatchObject({ skipped: true, held: true, rulesRemoved: false });
    expect(agent.dataplane.cache.get(pod.uid)?.netns?.ns.id).toEqual(idOf(second.netnsPath));
    expect(agent.zds!.knows(pod.uid)).toBe(true);
    expect((await agent.dataplane.verify(pod, { netnsPath: second.netnsPath })).drift).toEqual([]);
    expect(peer.log.filter((e) => e.uid === pod.uid && e.type === 'del')).toEqual([]);

    // The removal for the sandbox the pod is enrolled in goes ahead.
    const gone = await agent.dataplane.unenroll(pod, { podDeleted: false, ifNetns: idOf(second.netnsPath) });
    expect(gone.skipped).toBeUndefined();
    expect(gone.rulesRemoved).toBe(true);
    expect(agent.dataplane.cache.has(pod.uid)).toBe(false);
    await peer.waitFor((p) => p.log.some((e) => e.type === 'del' && e.uid === pod.uid));
  });
});
