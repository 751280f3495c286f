// Informers against the real apiserver: the node-filtered pod informer sees
// exactly its node's pods (add, update with the old object, delete), the
// namespace informer sees label flips, resync re-delivers the cache.
import { afterEach, expect, it } from 'vitest';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { PODS, podInformer, namespaceInformer } from '../../lib/kube/resources.js';
import { Informer } from '../../lib/kube/informer.js';
import { adminClient, createPod, deletePodNow, describeKube, freshNamespace, kubeEnv, until, within } from '../helpers/kube.js';

type Ev = { type: 'add' | 'update' | 'delete'; key: string; rv?: string; oldRv?: string };

function record<T extends V1Pod | V1Namespace>(inf: Informer<T>, filter: (o: T) => boolean = () => true): Ev[] {
  const evs: Ev[] = [];
  const key = (o: T) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name}`;
  inf.on('add', (o) => { if (filter(o)) evs.push({ type: 'add', key: key(o), rv: o.metadata?.resourceVersion }); });
  inf.on('update', (o, old) => { if (filter(o)) evs.push({ type: 'update', key: key(o), rv: o.metadata?.resourceVersion, oldRv: old.metadata?.resourceVersion }); });
  inf.on('delete', (o) => { if (filter(o)) evs.push({ type: 'delete', key: key(o) }); });
  return evs;
}

const running: Informer<any>[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});

describeKube('kube informers', () => {
  it('a pod informer for node n1 sees add/update/delete of n1 pods only, in order, with the old object on update', async () => {
    kubeEnv();
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const node = `n1-${process.pid}`; // unique per run: other test files make pods too
    await createPod(admin, ns, 'before', node); // exists before the informer starts: an initial add
    await createPod(admin, ns, 'other-before', `n2-${process.pid}`);
    const inf = podInformer(admin, { nodeName: node });
    running.push(inf);
    const evs = record(inf);
    await within('initial sync', inf.start().synced, 15_000);
    expect(inf.hasSynced).toBe(true);
    expect(evs).toEqual([{ type: 'add', key: `${ns}/before`, rv: expect.any(String) }]);

    await createPod(admin, ns, 'a', node);
    await createPod(admin, ns, 'b', `n2-${process.pid}`);
    await admin.core.patchNamespacedPod({ namespace: ns, name: 'a', body: [{ op: 'add', path: '/metadata/labels', value: { step: '1' } }] });
    await admin.core.patchNamespacedPod({ namespace: ns, name: 'b', body: [{ op: 'add', path: '/metadata/labels', value: { step: '1' } }] });
    await deletePodNow(admin, ns, 'a');
    await deletePodNow(admin, ns, 'b');
    await createPod(admin, ns, 'last', node); // a marker: once it is seen, everything before it was delivered
    await until('the marker pod in the cache', () => inf.get('last', ns));

    const forA = evs.filter((e) => e.key === `${ns}/a`);
    expect(forA.map((e) => e.type)).toEqual(['add', 'update', 'update', 'delete']);
    // The updates carry the object before the change: each old rv is the previous delivered rv.
    expect(forA[1]!.oldRv).toBe(forA[0]!.rv);
    expect(forA[2]!.oldRv).toBe(forA[1]!.rv);
    expect(evs.some((e) => e.key === `${ns}/b` || e.key === `${ns}/other-before`)).toBe(false);
    expect(inf.get('a', ns)).toBeUndefined();
    expect(inf.get('before', ns)?.spec?.nodeName).toBe(node);
    // Watch objects are typed like list items (client-node models: Dates, not strings).
    expect(inf.get('last', ns)?.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(inf.get('before', ns)?.metadata?.creationTimestamp).toBeInstanceOf(Date);
    expect(inf.list().map((p) => p.metadata?.name).sort()).toEqual(['before', 'last']);
    expect(inf.stats.lists).toBe(1);
    expect(inf.stats.relists).toBe(0);
  });

  it('a label-selected pod informer follows pods into and out of the selection', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const node = `n1-${process.pid}`;
    const inf = podInformer(admin, { nodeName: node, labelSelector: 'mesh=yes' });
    running.push(inf);
    const evs = record(inf, (p) => p.metadata?.namespace === ns);
    await within('sync', inf.start().synced, 15_000);
    await createPod(admin, ns, 'p', node);
    await admin.core.patchNamespacedPod({ namespace: ns, name: 'p', body: [{ op: 'add', path: '/metadata/labels', value: { mesh: 'yes' } }] });
    await until('p selected', () => inf.get('p', ns));
    await admin.core.patchNamespacedPod({ namespace: ns, name: 'p', body: [{ op: 'replace', path: '/metadata/labels', value: { mesh: 'no' } }] });
    await until('p unselected', () => !inf.get('p', ns));
    // Leaving a label selection is a delete for the watcher (the apiserver sends DELETED).
    expect(evs.map((e) => e.type)).toEqual(['add', 'delete']);
  });

  it('a namespace informer sees label flips (the ambient enable/disable signal)', async () => {
    const admin = adminClient();
    const inf = namespaceInformer(admin);
    running.push(inf);
    const ns = await freshNamespace(admin);
    const labels: (string | undefined)[] = [];
    inf.on('update', (o, old) => {
      if (o.metadata?.name !== ns) return;
      const now = o.metadata?.labels?.['istio.io/dataplane-mode'];
      if (now !== old.metadata?.labels?.['istio.io/dataplane-mode']) labels.push(now);
    });
    await within('sync', inf.start().synced, 15_000);
    expect(inf.get(ns)?.metadata?.name).toBe(ns);
    const flip = (value: string | null) => admin.core.patchNamespace({ name: ns, body: [{ op: 'add', path: '/metadata/labels', value: value === null ? {} : { 'istio.io/dataplane-mode': value } }] });
    await flip('ambient');
    await flip(null);
    await flip('ambient');
    await until('three flips seen', () => labels.length === 3);
    expect(labels).toEqual(['ambient', undefined, 'ambient']);
  });

  it('resync re-delivers the cache as updates with old === new; a throwing handler is counted and does not stop delivery', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const node = `n3-${process.pid}`;
    await createPod(admin, ns, 'r1', node);
    await createPod(admin, ns, 'r2', node);
    const inf = podInformer(admin, { nodeName: node, resyncMs: 200 });
    running.push(inf);
    const resynced = new Set<string>();
    inf.on('update', (o, old) => { if (o === old) resynced.add(o.metadata!.name!); });
    inf.on('add', () => { throw new Error('handler bug'); });
    const errors: unknown[] = [];
    inf.on('error', (e) => errors.push(e));
    await within('sync', inf.start().synced, 15_000);
    await until('both pods resynced', () => resynced.size === 2, 5_000);
    expect(inf.stats.resyncs).toBeGreaterThan(0);
    expect(inf.stats.handlerErrors).toBe(2);
    expect(errors).toHaveLength(2);
    expect(inf.size).toBe(2);
  });

  it('the agent\'s informers cache objects without managedFields (as Istio\'s), listed or watched; a plain informer keeps them', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const node = `n4-${process.pid}`;
    await createPod(admin, ns, 'listed', node);
    const pods = podInformer(admin, { nodeName: node });
    const plain = new Informer(admin, PODS, { fieldSelector: `spec.nodeName=${node}` });
    const nss = namespaceInformer(admin);
    running.push(pods, plain, nss);
    await within('sync', Promise.all([pods.start().synced, plain.start().synced, nss.start().synced]), 15_000);
    await createPod(admin, ns, 'watched', node);
    await until('the watched pod in both caches', () => pods.get('watched', ns) && plain.get('watched', ns));
    // The apiserver records who set which field on every write: a plain cache holds that.
    expect(plain.get('listed', ns)?.metadata?.managedFields?.length).toBeGreaterThan(0);
    expect(plain.get('watched', ns)?.metadata?.managedFields?.length).toBeGreaterThan(0);
    for (const name of ['listed', 'watched']) {
      const p = pods.get(name, ns)!;
      expect(p.metadata).not.toHaveProperty('managedFields');
      expect(p.spec?.nodeName).toBe(node);  // the rest as it was
      expect(p.metadata?.creationTimestamp).toBeInstanceOf(Date);
    }
    expect(nss.get(ns)?.metadata).not.toHaveProperty('managedFields');
    expect(nss.get(ns)?.metadata?.name).toBe(ns);
  });

  it('refuses an empty node name (it would select every unscheduled pod)', () => {
    expect(() => podInformer(adminClient(), { nodeName: '' })).toThrow(TypeError);
  });
});

// lib/kube/informer.ts reaches into the client's generated serializer (not in its index): that is
// safe only while the client is pinned exactly, in package.json and in the lockfile.
it('the Kubernetes client is pinned exactly, so its private serializer path cannot move under us', async () => {
  const { readFileSync } = await import('node:fs');
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> };
  const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as { packages: Record<string, { version?: string }> };
  expect(pkg.dependencies['@kubernetes/client-node']).toMatch(/^\d+\.\d+\.\d+$/);
  expect(lock.packages['node_modules/@kubernetes/client-node']?.version).toBe(pkg.dependencies['@kubernetes/client-node']);
  const { ObjectSerializer } = await import('@kubernetes/client-node/dist/gen/models/ObjectSerializer.js');
  const pod = ObjectSerializer.deserialize({ metadata: { name: 'p', creationTimestamp: '2026-12-01T00:00:00Z' } }, 'V1Pod', '') as V1Pod;
  expect(pod.metadata?.creationTimestamp).toBeInstanceOf(Date);
});
