// The informer against a control plane that misbehaves: kube-apiserver killed
// and restarted mid-churn, and a watch that comes back after its
// resourceVersion was compacted away (410 Gone). These restart the
// apiserver, so they run on a control plane of their own, not the shared one
// other test files are using.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import type { ControlPlane } from '../../scripts/kube/controlplane.mjs';
import type { KubeClient } from '../../lib/kube/client.js';
import { podInformer } from '../../lib/kube/resources.js';
import type { Informer } from '../../lib/kube/informer.js';
import { createPod, deletePodNow, describeKube, ownControlPlane, removeNamespace, until, within } from '../helpers/kube.js';

let cp: ControlPlane;
let admin: KubeClient;
let own: Awaited<ReturnType<typeof ownControlPlane>> | undefined;

/** The informer's view, replayed from the events it delivered (not its cache): name → resourceVersion. */
function replay(inf: Informer<V1Pod>): Map<string, string> {
  const m = new Map<string, string>();
  inf.on('add', (p) => m.set(p.metadata!.name!, p.metadata!.resourceVersion!));
  inf.on('update', (p) => m.set(p.metadata!.name!, p.metadata!.resourceVersion!));
  inf.on('delete', (p) => m.delete(p.metadata!.name!));
  return m;
}

async function truth(ns: string, node: string): Promise<Map<string, string>> {
  const l = await admin.core.listNamespacedPod({ namespace: ns, fieldSelector: `spec.nodeName=${node}` });
  return new Map(l.items.map((p) => [p.metadata!.name!, p.metadata!.resourceVersion!]));
}

const sorted = (m: Map<string, string>) => [...m.entries()].sort(([a], [b]) => a.localeCompare(b));

describeKube('kube informer resilience (own control plane)', () => {
  beforeAll(async () => {
    own = await ownControlPlane('kube-resilience');
    ({ cp, admin } = own);
  }, 180_000);

  afterAll(async () => {
    await own?.stop();
  }, 60_000);

  it('resumes after kube-apiserver restarts mid-churn and ends with exactly the API state', async () => {
    const ns = `pwt-${process.pid}-restart`;
    const node = 'n1';
    await admin.core.createNamespace({ body: { metadata: { name: ns } } });
    try {
      for (let i = 0; i < 10; i++) await createPod(admin, ns, `seed-${i}`, node);
      const inf = podInformer(admin, { nodeName: node, backoff: { initialMs: 100, maxMs: 1_000 } });
      const seen = replay(inf);
      try {
        await within('sync', inf.start().synced, 15_000);
        // Churn: create, label and delete pods (on n1 and n2) for as long as the restart takes and a bit after.
        let churning = true;
        let ops = 0;
        const churn = (async () => {
          for (let i = 0; churning; i++) {
            const n = i % 3 === 0 ? 'n2' : node;
            try {
              await createPod(admin, ns, `c-${i}`, n);
              ops++;
              if (i % 2 === 0) await admin.core.patchNamespacedPod({ namespace: ns, name: `c-${i}`, body: [{ op: 'add', path: '/metadata/labels', value: { i: String(i) } }] });
              if (i % 4 === 1) await deletePodNow(admin, ns, `c-${i - 1}`);
              if (i % 10 === 5) await deletePodNow(admin, ns, `seed-${i % 10}`);
            } catch {
              await new Promise((r) => setTimeout(r, 50)); // the apiserver is down: the churn just tries again
            }
          }
        })();
        await until('some churn before the restart', () => ops >= 5);
        await cp.restartApiserver({ downMs: 1_000 });
        const after = ops;
        await until('churn after the restart', () => ops >= after + 10, 30_000);
        churning = false;
        await churn;
        const want = await truth(ns, node);
        await until('the informer cache equals a fresh list', async () => JSON.stringify(sorted(new Map(inf.list().map((p) => [p.metadata!.name!, p.metadata!.resourceVersion!])))) === JSON.stringify(sorted(want)), 30_000);
        // And the events delivered tell the same story as the cache: nothing missed, nothing extra.
        expect(sorted(seen)).toEqual(sorted(want));
        expect(inf.stats.restarts).toBeGreaterThan(0);
        expect(inf.stats.watchErrors + inf.stats.gone).toBeGreaterThan(0);
      } finally {
        await inf.stop();
      }
    } finally {
      await removeNamespace(admin, ns);
    }
  }, 120_000);

  it('relists on 410 Gone after missing changes, delivering the deletes, adds and updates it missed', async () => {
    const ns = `pwt-${process.pid}-gone`;
    const node = 'n1';
    await admin.core.createNamespace({ body: { metadata: { name: ns } } });
    try {
      for (const n of ['keep', 'change', 'gone-1', 'gone-2']) await createPod(admin, ns, n, node);
      const inf = podInformer(admin, { nodeName: node, backoff: { initialMs: 100, maxMs: 1_000 } });
      const seen = replay(inf);
      const events: string[] = [];
      inf.on('add', (p) => events.push(`add ${p.metadata!.name}`));
      inf.on('update', (p) => events.push(`update ${p.metadata!.name}`));
      inf.on('delete', (p) => events.push(`delete ${p.metadata!.name}`));
      try {
        await within('sync', inf.start().synced, 15_000);
        events.length = 0;
        inf._pauseForTest();
        const staleRv = inf.lastResourceVersion;
        await deletePodNow(admin, ns, 'gone-1');
        await deletePodNow(admin, ns, 'gone-2');
        await createPod(admin, ns, 'new', node);
        await admin.core.patchNamespacedPod({ namespace: ns, name: 'change', body: [{ op: 'add', path: '/metadata/labels', value: { v: '2' } }] });
        await cp.compact();
        // etcd alone is not enough: the apiserver's watch cache still serves the old
        // resourceVersion from memory after a compaction. A restart rebuilds that
        // cache at the current revision, so the stale one is now truly gone.
        await cp.restartApiserver();
        expect(inf.lastResourceVersion).toBe(staleRv);
        inf._resumeForTest();
        await until('the relist', () => inf.stats.relists > 0, 30_000);
        expect(inf.stats.gone).toBeGreaterThan(0);
        expect(events.sort()).toEqual(['add new', 'delete gone-1', 'delete gone-2', 'update change']);
        expect(sorted(seen)).toEqual(sorted(await truth(ns, node)));
        // The informer watches on after the relist.
        await createPod(admin, ns, 'after', node);
        await until('a pod made after the relist', () => inf.get('after', ns));
      } finally {
        await inf.stop();
      }
    } finally {
      await removeNamespace(admin, ns);
    }
  }, 120_000);
});
