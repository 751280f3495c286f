// The ambient controller against the real apiserver, over the real Dataplane
// with in-memory rules/ztunnel/probes and real test netns: a namespace label
// enrolls its running pods and annotates them, a pod opt-out and a namespace
// unlabel unenroll and remove the annotation, a deleted pod is unenrolled as
// deleted, an enrollment failure becomes a Warning Event.
import { afterEach, expect, it } from 'vitest';
import { PatchStrategy, type V1Pod } from '@kubernetes/client-node';
import { patchPodMetadata, patchPodStatus } from '../../lib/kube/pods.js';
import { AmbientController, REDIRECTION_ANNOTATION, type DataplaneLike } from '../../lib/ambient/controller.js';
import { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/enablement.js';
import type { SelectionPolicy } from '../../lib/mesh/decision.js';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { fakeDataplane } from '../dataplane/fakes.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { adminClient, createPod, deletePodNow, describeKube, freshNamespace, kubeEnv, until, within } from '../helpers/kube.js';

const policy: SelectionPolicy = {
  selectors: compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS),
  excludeNamespaces: new Set(['kube-system']),
  systemNamespace: 'istio-system',
};

const running: AmbientController[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((c) => c.stop()));
});

/** The real Dataplane, recording every unenroll with its options. */
function recordingDataplane() {
  const fake = fakeDataplane();
  const unenrolls: Array<{ uid: string; podDeleted: boolean }> = [];
  const dp: DataplaneLike = {
    enroll: (pod, opts) => fake.dp.enroll(pod, opts),
    unenroll: (pod: PodInfo, opts) => {
      unenrolls.push({ uid: pod.uid, podDeleted: opts.podDeleted });
      return fake.dp.unenroll(pod, opts);
    },
  };
  return { ...fake, dpLike: dp, unenrolls };
}

let nodeSeq = 0;
/** A pod bound to `node`, then made Running with one IP through pods/status (no kubelet runs). */
async function runningPod(ns: string, name: string, node: string, ip: string): Promise<V1Pod> {
  const admin = adminClient();
  await createPod(admin, ns, name, node);
  return patchPodStatus(admin, { namespace: ns, name }, { status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] } });
}

async function annotation(ns: string, name: string): Promise<string | undefined> {
  const p = await adminClient().core.readNamespacedPod({ namespace: ns, name });
  return p.metadata?.annotations?.[REDIRECTION_ANNOTATION];
}

/** JSON merge patch of a namespace's labels (null removes one). */
async function setNamespaceLabel(name: string, value: string | null): Promise<void> {
  const admin = adminClient();
  await admin.call({ verb: 'patch', resource: 'namespaces', name },
    (o) => admin.core.patchNamespace({ name, body: { metadata: { labels: { 'istio.io/dataplane-mode': value } } } }, o),
    { contentType: PatchStrategy.MergePatch });
}

describeKube('ambient controller', () => {
  it.skipIf(!privileged())('enrolls on namespace label, unenrolls on opt-out, unlabel and delete, with annotations via pods/status', async () => {
    kubeEnv();
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const node = `amb-${process.pid}-${++nodeSeq}`;
    const names = ['p0', 'p1', 'p2'];
    const pods: V1Pod[] = [];
    for (let i = 0; i < 3; i++) pods.push(await runningPod(ns, names[i]!, node, `10.77.0.${i + 1}`));
    expect(pods.every((p) => p.status?.phase === 'Running')).toBe(true);
    const uids = pods.map((p) => p.metadata!.uid!);
    const netns = await Promise.all(names.map(() => freshNetns()));
    const netnsOf = new Map(names.map((n, i) => [`${ns}/${n}`, netns[i]!.path]));

    const t = recordingDataplane();
    const ctl = new AmbientController({
      client: admin, nodeName: node, policy, dataplane: t.dpLike,
      resolveNetns: (p) => netnsOf.get(`${p.metadata?.namespace}/${p.metadata?.name}`),
    });
    running.push(ctl);
    await within('controller start', ctl.start(), 15_000);
    expect(ctl.pods.size).toBe(3);
    expect(t.rules.applied.size).toBe(0);  // not labelled yet

    // Namespace labelled: all three enrolled (rules in their own netns) and annotated.
    await setNamespaceLabel(ns, 'ambient');
    await until('3 pods enrolled', () => uids.every((u) => t.rules.applied.has(u)));
    uids.forEach((u, i) => expect(t.rules.applied.get(u)).toBe(netns[i]!.id.ino));
    expect(uids.every((u) => t.ztunnel.knows(u))).toBe(true);
    for (const n of names) await until(`${n} annotated enabled`, async () => (await annotation(ns, n)) === 'enabled');

    // p0 opts out: unenrolled (rules removed, pod still there) and annotation removed.
    await patchPodMetadata(admin, { namespace: ns, name: 'p0' }, { labels: { 'istio.io/dataplane-mode': 'none' } });
    await until('p0 unenrolled', () => !t.rules.applied.has(uids[0]!) && !t.ztunnel.knows(uids[0]!));
    await until('p0 annotation removed', async () => (await annotation(ns, 'p0')) === undefined);
    expect(t.unenrolls).toContainEqual({ uid: uids[0], podDeleted: false });
    expect(t.rules.applied.has(uids[1]!) && t.rules.applied.has(uids[2]!)).toBe(true);

    // p1 deleted while enrolled: unenrolled as deleted (no rule removal in a dead netns).
    await deletePodNow(admin, ns, 'p1');
    await until('p1 unenrolled as deleted', () => t.unenrolls.some((u) => u.uid === uids[1] && u.podDeleted) && !t.ztunnel.knows(uids[1]!));
    expect(t.unenrolls.filter((u) => u.uid === uids[1]).every((u) => u.podDeleted)).toBe(true);
    expect(t.rules.calls).not.toContain(`remove ${uids[1]}`);

    // Namespace unlabelled: the remaining pod unenrolled, annotation gone.
    await setNamespaceLabel(ns, null);
    await until('p2 unenrolled', () => !t.rules.applied.has(uids[2]!) && !t.ztunnel.knows(uids[2]!));
    await until('p2 annotation removed', async () => (await annotation(ns, 'p2')) === undefined);
    expect(t.unenrolls).toContainEqual({ uid: uids[2], podDeleted: false });
    expect(await annotation(ns, 'p0')).toBeUndefined();
    expect(t.dp.cache.snapshot()).toEqual([]);
    expect(ctl.stats.enrollFailures).toBe(0);
  });

  it.skipIf(!privileged())('skips pods that are not running or have no IPs, and reports a failed enrollment as a Warning Event', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
    const node = `amb-${process.pid}-${++nodeSeq}`;
    await createPod(admin, ns, 'pending', node);  // Pending, no IPs
    const bad = await runningPod(ns, 'nonetns', node, '10.77.1.1');  // no netns known: non-retryable netns failure
    const ok = await runningPod(ns, 'ok', node, '10.77.1.2');
    const okNs = await freshNetns();
    const t = recordingDataplane();
    const ctl = new AmbientController({
      client: admin, nodeName: node, policy, dataplane: t.dpLike,
      resolveNetns: (p) => (p.metadata?.name === 'ok' ? okNs.path : undefined),
    });
    running.push(ctl);
    await within('controller start', ctl.start(), 15_000);
    await until('ok enrolled', () => t.rules.applied.has(ok.metadata!.uid!));
    await until('ok annotated', async () => (await annotation(ns, 'ok')) === 'enabled');
    const ev = await until('a Warning event on nonetns', async () => {
      const list = await admin.core.listNamespacedEvent({ namespace: ns });
      return list.items.find((e) => e.involvedObject.uid === bad.metadata!.uid && e.type === 'Warning');
    });
    expect(ev.reason).toBe('EnrollFailed');
    expect(ev.message).toContain('stage netns');
    await until('nonetns dropped, not retried', () => ctl.queue.stats().dropped >= 1);
    expect(ctl.queue.stats()).toMatchObject({ dropped: 1, retries: 0 });
    expect(await annotation(ns, 'nonetns')).toBeUndefined();
    expect(await annotation(ns, 'pending')).toBeUndefined();
    expect(t.rules.calls.some((c) => c.includes(bad.metadata!.uid!))).toBe(false);
    expect(ctl.pods.get('pending', ns)).toBeDefined();
  });
  it.skipIf(!privileged())('a retryable failure (no ztunnel) annotates pending and is retried until it succeeds', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
    const node = `amb-${process.pid}-${++nodeSeq}`;
    const pod = await runningPod(ns, 'p', node, '10.77.2.1');
    const pns = await freshNetns();
    const t = recordingDataplane();
    t.ztunnel.fail = true;
    const ctl = new AmbientController({ client: admin, nodeName: node, policy, dataplane: t.dpLike, resolveNetns: () => pns.path });
    running.push(ctl);
    await within('controller start', ctl.start(), 15_000);
    await until('annotated pending', async () => (await annotation(ns, 'p')) === 'pending');
    await until('retried', () => ctl.queue.stats().retries >= 2);
    const events = await admin.core.listNamespacedEvent({ namespace: ns });
    const warnings = events.items.filter((e) => e.involvedObject.uid === pod.metadata!.uid && e.type === 'Warning');
    expect(warnings).toHaveLength(1);  // one per failing stage, not one per retry
    expect(warnings[0]!.message).toContain('stage ztunnel');
    t.ztunnel.fail = false;
    await until('enrolled after the retry', () => t.ztunnel.knows(pod.metadata!.uid!));
    await until('annotated enabled', async () => (await annotation(ns, 'p')) === 'enabled');
    expect(ctl.queue.stats().dropped).toBe(0);
  });
});
