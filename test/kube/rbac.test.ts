// What the agent's identity (ServiceAccount istio-system/podwire-agent, the
// chart's ClusterRole) can and cannot do, through the helpers the agent uses,
// and the helpers' contracts: typed errors, uid preconditions, events, retry.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KubeClient } from '../../lib/kube/client.js';
import { podInformer } from '../../lib/kube/resources.js';
import { annotatePodViaStatus, deletePod, getPod, patchPodMetadata, patchPodStatus } from '../../lib/kube/pods.js';
import { createPodEvent } from '../../lib/kube/events.js';
import { kubeFailure } from '../helpers/rbac.js';
import { adminClient, agentClient, createPod, deletePodNow, describeKube, freshNamespace, kubeEnv, until, within } from '../helpers/kube.js';

let agent: KubeClient;

describeKube('kube RBAC and pod helpers', () => {
  beforeAll(() => {
    agent = agentClient(kubeEnv());
  });
  afterAll(() => agent?.close());

  it('the agent lists and watches its node\'s pods and writes annotations through pods/status', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const node = `rbac-${process.pid}`;
    const pod = await createPod(admin, ns, 'p', node);
    const inf = podInformer(agent, { nodeName: node });
    try {
      await within('agent sync', inf.start().synced, 15_000);
      expect(inf.get('p', ns)?.metadata?.uid).toBe(pod.metadata!.uid);
      // Istio's way: metadata.annotations through the status subresource (the role has patch pods/status only).
      const patched = await annotatePodViaStatus(agent, { namespace: ns, name: 'p' }, { annotations: { 'ambient.istio.io/redirection': 'enabled' } });
      expect(patched.metadata?.annotations?.['ambient.istio.io/redirection']).toBe('enabled');
      await until('the informer sees the annotation', () => inf.get('p', ns)?.metadata?.annotations?.['ambient.istio.io/redirection'] === 'enabled');
      // null removes it (JSON merge patch).
      const removed = await annotatePodViaStatus(agent, { namespace: ns, name: 'p' }, { annotations: { 'ambient.istio.io/redirection': null } });
      expect(removed.metadata?.annotations?.['ambient.istio.io/redirection']).toBeUndefined();
      // A status condition through the same subresource.
      const st = await patchPodStatus(agent, { namespace: ns, name: 'p' }, { status: { conditions: [{ type: 'PodwireTest', status: 'True' }] } });
      expect(st.status?.conditions?.some((c) => c.type === 'PodwireTest')).toBe(true);
      expect((await getPod(agent, { namespace: ns, name: 'p' })).metadata?.uid).toBe(pod.metadata!.uid);
    } finally {
      await inf.stop();
    }
  });

  it('the agent is refused pod deletion and main-resource patches with code Forbidden', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const pod = await createPod(admin, ns, 'p', `rbac-${process.pid}`);
    const del = await kubeFailure(deletePod(agent, { namespace: ns, name: 'p' }, { uid: pod.metadata!.uid! }));
    expect(del).toMatchObject({ code: 'Forbidden', status: 403, verb: 'delete', resource: 'pods', namespace: ns, objectName: 'p' });
    expect(del.transient).toBe(false);
    expect(del.serverMessage).toBeTruthy();
    const patch = await kubeFailure(patchPodMetadata(agent, { namespace: ns, name: 'p' }, { labels: { x: 'y' } }));
    expect(patch).toMatchObject({ code: 'Forbidden', status: 403, verb: 'patch', resource: 'pods' });
    // Still there.
    expect((await getPod(admin, { namespace: ns, name: 'p' })).metadata?.uid).toBe(pod.metadata!.uid);
  });

  it('the agent creates a Warning Event on a pod, involvedObject carrying the uid', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const pod = await createPod(admin, ns, 'p', `rbac-${process.pid}`);
    const ev = await createPodEvent(agent, pod, { type: 'Warning', reason: 'EnrollFailed', message: 'x'.repeat(2000), component: 'istio-cni-node', host: 'node-1' });
    const got = await admin.core.readNamespacedEvent({ namespace: ns, name: ev.metadata!.name! });
    expect(got).toMatchObject({ type: 'Warning', reason: 'EnrollFailed', count: 1, source: { component: 'istio-cni-node', host: 'node-1' } });
    expect(got.involvedObject).toMatchObject({ kind: 'Pod', name: 'p', namespace: ns, uid: pod.metadata!.uid });
    expect(got.message!.length).toBe(1024);
  });

  it('delete with a uid precondition removes only that incarnation (Conflict otherwise), NotFound after', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const node = `rbac-${process.pid}`;
    const first = await createPod(admin, ns, 'p', node);
    await deletePodNow(admin, ns, 'p');
    const second = await createPod(admin, ns, 'p', node); // same name, new uid
    const stale = await kubeFailure(deletePod(admin, { namespace: ns, name: 'p' }, { uid: first.metadata!.uid!, gracePeriodSeconds: 0 }));
    expect(stale).toMatchObject({ code: 'Conflict', status: 409, verb: 'delete' });
    expect((await getPod(admin, { namespace: ns, name: 'p' })).metadata?.uid).toBe(second.metadata!.uid);
    await deletePod(admin, { namespace: ns, name: 'p' }, { uid: second.metadata!.uid!, gracePeriodSeconds: 0 });
    const gone = await kubeFailure(getPod(admin, { namespace: ns, name: 'p' }));
    expect(gone).toMatchObject({ code: 'NotFound', status: 404, verb: 'get', resource: 'pods' });
  });

  it('getPod does not retry a 4xx (one request), and gives up on a transient failure after its attempts', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    let calls = 0;
    const counting = new KubeClient(admin.credentials);
    const orig = counting.call.bind(counting);
    counting.call = ((t, fn, o) => { calls++; return orig(t, fn, o); }) as typeof counting.call;
    try {
      await kubeFailure(getPod(counting, { namespace: ns, name: 'missing' }, { retry: { attempts: 3, delayMs: 10 } }));
      expect(calls).toBe(1);
    } finally {
      counting.close();
    }
    // Transient: a port nobody listens on (connection refused) is tried `attempts` times.
    const { loadKubeconfig } = await import('../../lib/kube/config.js');
    const { writeFileSync, mkdtempSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'pwt-kube-'));
    try {
      const file = join(dir, 'kubeconfig');
      writeFileSync(file, JSON.stringify({ 'current-context': 'c', clusters: [{ name: 'x', cluster: { server: 'https://127.0.0.1:1', 'certificate-authority': kubeEnv().caFile } }], contexts: [{ name: 'c', context: { cluster: 'x' } }] }));
      const dead = new KubeClient(loadKubeconfig(file), { requestTimeoutMs: 2_000 });
      let n = 0;
      const o2 = dead.call.bind(dead);
      dead.call = ((t, fn, o) => { n++; return o2(t, fn, o); }) as typeof dead.call;
      const err = await kubeFailure(getPod(dead, { namespace: 'x', name: 'y' }, { retry: { attempts: 3, delayMs: 10 } }));
      expect(err.code).toBe('Unavailable');
      expect(err.transient).toBe(true);
      expect(n).toBe(3);
      dead.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
