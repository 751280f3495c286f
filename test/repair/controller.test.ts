// The repair controller against the real apiserver, the test playing the kubelet (pods/status
// patches): a sidecar pod whose istio-validation init container exited 126 is repaired in its
// pwt- netns (rules verified against the model), or deleted (uid/resourceVersion preconditions:
// a recreated pod survives a stale delete), or labelled, each with its event and metric; a
// Completed pod and a pod of another node are never touched; deletes are rate-limited; the
// ambient hook enrolls a pod that should be enrolled but is not.
import { afterEach, expect, it } from 'vitest';
import type { CoreV1Event, V1Pod } from '@kubernetes/client-node';
import { patchPodStatus } from '../../lib/kube/pods.js';
import { NonRetryable } from '../../lib/kube/work-queue.js';
import { scanPodNetns } from '../../lib/dataplane/proc-scan.js';
import { verify } from '../../lib/redirect/apply.js';
import { sidecarRules } from '../../lib/redirect/sidecar.js';
import { sidecarConfigFromPod } from '../../lib/redirect/annotations.js';
import { parseRepairConfig, type RepairConfig } from '../../lib/repair/config.js';
import { RepairController, RepairRbacError, REPAIR_COMPONENT, type AmbientRepairHook, type RepairNetnsResolver, type RepairResult, type RepairType } from '../../lib/repair/controller.js';
import { NetnsRef } from '../../lib/dataplane/netns-ref.js';
import { mkdtempSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { missingAccess } from '../../lib/kube/access.js';
import { REPAIR_DELETE_CLUSTER_ROLE } from '../../scripts/kube/rbac.mjs';
import { agentIdentityWith } from '../helpers/rbac.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { privileged } from '../helpers/privileged.js';
import { adminClient, agentClient, createPod, describeKube, freshNamespace, kubeEnv, until } from '../helpers/kube.js';
import { onTestFinished } from 'vitest';

const running: RepairController[] = [];
const nodes: AgentTestNode[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((c) => c.stop()));
  for (const n of nodes.splice(0)) await n.teardown();
});

let seq = 0;
const nodeName = () => `rep-${process.pid}-${++seq}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function sidecarBody(name: string, node: string): V1Pod {
  return {
    metadata: { name, annotations: { 'sidecar.istio.io/status': '{}' } },
    spec: {
      nodeName: node, terminationGracePeriodSeconds: 0,
      initContainers: [{ name: 'istio-validation', image: 'registry.invalid/p:1' }],
      containers: [{ name: 'app', image: 'registry.invalid/a:1' }, { name: 'istio-proxy', image: 'registry.invalid/p:1', args: ['proxy', 'sidecar'] }],
    },
  };
}

/** As the kubelet reports a crash-looping istio-validation (or a Completed one). */
function initStatus(kind: 'broken' | 'completed', ip: string): Record<string, unknown> {
  const st = kind === 'broken'
    ? { state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 126, reason: 'Error', message: 'iptables validation failed' } } }
    : { state: { terminated: { exitCode: 0, reason: 'Completed' } }, lastState: { terminated: { exitCode: 126, reason: 'Error' } } };
  return {
    phase: kind === 'broken' ? 'Pending' : 'Running', podIP: ip, podIPs: [{ ip }],
    initContainerStatuses: [{ name: 'istio-validation', image: 'registry.invalid/p:1', imageID: '', ready: kind === 'completed', restartCount: 3, ...st }],
  };
}

async function sidecarPod(ns: string, name: string, node: string, kind: 'broken' | 'completed', ip = '10.88.0.1'): Promise<V1Pod> {
  const admin = adminClient();
  await admin.core.createNamespacedPod({ namespace: ns, body: sidecarBody(name, node) });
  return patchPodStatus(admin, { namespace: ns, name }, { status: initStatus(kind, ip) });
}

function controller(node: string, env: Record<string, string>, extra: { resolveNetns?: RepairNetnsResolver; ambient?: AmbientRepairHook } = {}) {
  const config: RepairConfig = parseRepairConfig({ NODE_NAME: node, ...env });
  const metrics: Array<[RepairType, RepairResult]> = [];
  const deletedAt: number[] = [];
  const ctl = new RepairController({
    client: adminClient(), config, resolveNetns: extra.resolveNetns ?? (() => undefined), watchTimeoutSeconds: 30,
    onRepaired: (t, r) => {
      metrics.push([t, r]);
      if (t === 'delete' && r === 'success') deletedAt.push(performance.now());
    },
    ...(extra.ambient ? { ambient: extra.ambient } : {}),
  });
  running.push(ctl);
  return { ctl, metrics, deletedAt };
}

async function podOrUndefined(ns: string, name: string): Promise<V1Pod | undefined> {
  try {
    return await adminClient().core.readNamespacedPod({ namespace: ns, name });
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

async function events(ns: string, name: string): Promise<CoreV1Event[]> {
  const l = await adminClient().core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${name}` });
  return l.items;
}

/** Plain pods on `node`, made Running with the given IP through pods/status. */
async function runningPods(ns: string, node: string, pods: ReadonlyArray<readonly [string, string]>): Promise<void> {
  const admin = adminClient();
  for (const [name, ip] of pods) {
    await createPod(admin, ns, name, node);
    await patchPodStatus(admin, { namespace: ns, name }, { status: { phase: 'Running', podIP: ip, podIPs: [{ ip }] } });
  }
}

const has = (m: Array<[RepairType, RepairResult]>, t: RepairType, r: RepairResult) => m.some(([a, b]) => a === t && b === r);

describeKube('repair controller', () => {
  for (const backend of ['iptables', 'nftables'] as const) it.skipIf(!privileged(backend === 'iptables' ? 'iptables-save' : 'nft'))(`repairs a broken sidecar pod in its netns (${backend} rules verify), once per UID`, async () => {
    kubeEnv();
    const node = await AgentTestNode.create();
    nodes.push(node);
    const ns = await freshNamespace();
    const w = await node.wire();
    const created = await adminClient().core.createNamespacedPod({ namespace: ns, body: sidecarBody('web', node.name) });
    const uid = created.metadata!.uid!;
    node.addProcEntry(w.pid, uid, w.netnsPath);
    await patchPodStatus(adminClient(), { namespace: ns, name: 'web' }, { status: initStatus('broken', w.ip4) });

    const resolveNetns = (p: V1Pod) => scanPodNetns([p.metadata!.uid!], { procRoot: node.procRoot }).candidates.get(p.metadata!.uid!)?.[0]?.path;
    const { ctl, metrics } = controller(node.name, backend === 'nftables' ? { NATIVE_NFTABLES: 'true' } : {}, { resolveNetns });
    await ctl.start();
    await until('repaired', () => has(metrics, 'repair', 'success'));

    const { dualStack: _d, ...cfg } = sidecarConfigFromPod({ annotations: { 'sidecar.istio.io/status': '{}' }, podIps: [w.ip4] });
    const podNs = node.openPod(w);
    try {
      expect((await verify(podNs, sidecarRules(cfg), { backend })).ok).toBe(true);
      expect((await verify(podNs, sidecarRules(cfg), { backend: backend === 'iptables' ? 'nftables' : 'iptables' })).ok).toBe(false);
    } finally {
      podNs.close();
    }
    // The next status update of the same pod: already repaired with this UID → skip.
    await patchPodStatus(adminClient(), { namespace: ns, name: 'web' }, { status: { message: 'still crash-looping' } });
    await until('skipped', () => has(metrics, 'repair', 'skip'));
    expect(metrics.filter(([t, r]) => t === 'repair' && r === 'success')).toHaveLength(1);
    expect(ctl.stats.repaired).toBe(1);
  }, 30_000);

  it.skipIf(!privileged('iptables-save'))('programs the netns handle the resolver proved, not what its path names by then, and releases it', async () => {
    kubeEnv();
    const node = await AgentTestNode.create();
    nodes.push(node);
    const ns = await freshNamespace();
    const [proved, other] = [await node.wire(), await node.wire()];
    await adminClient().core.createNamespacedPod({ namespace: ns, body: sidecarBody('web', node.name) });
    await patchPodStatus(adminClient(), { namespace: ns, name: 'web' }, { status: initStatus('broken', proved.ip4) });
    // The path the handle was opened from names another netns by the time the rules go in
    // (as /proc/<pid>/ns/net does once the pid exits and is reused).
    const dir = mkdtempSync(join(tmpdir(), 'pwt-repair-ref-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const link = join(dir, 'net');
    const refs: NetnsRef[] = [];
    const resolveNetns = () => {
      symlinkSync(proved.netnsPath, link);
      const ref = NetnsRef.open(link);
      unlinkSync(link);
      symlinkSync(other.netnsPath, link);
      refs.push(ref);
      return ref;
    };
    const { ctl, metrics } = controller(node.name, {}, { resolveNetns });
    await ctl.start();
    await until('repaired', () => has(metrics, 'repair', 'success'));
    const { dualStack: _d, ...cfg } = sidecarConfigFromPod({ annotations: { 'sidecar.istio.io/status': '{}' }, podIps: [proved.ip4] });
    for (const [w, want] of [[proved, true], [other, false]] as const) {
      const podNs = node.openPod(w);
      try {
        expect((await verify(podNs, sidecarRules(cfg), { backend: 'iptables' })).ok).toBe(want);
      } finally {
        podNs.close();
      }
    }
    expect(refs).toHaveLength(1);
    expect(refs[0]!.released).toBe(true);
  }, 30_000);

  it('repair mode without a netns: fails 5 times (the attempt limit), then gives up; no fallback action', async () => {
    kubeEnv();
    const node = nodeName();
    const ns = await freshNamespace();
    await sidecarPod(ns, 'web', node, 'broken');
    const { ctl, metrics } = controller(node, { REPAIR_DELETE_PODS: 'true', REPAIR_LABEL_PODS: 'true' }, { resolveNetns: () => undefined });
    await ctl.start();
    await until('dropped', () => ctl.queue.stats().dropped === 1);
    expect(metrics).toEqual(Array.from({ length: 5 }, () => ['repair', 'fail']));
    const p = await podOrUndefined(ns, 'web');
    expect(p?.metadata?.labels?.['cni.istio.io/uninitialized']).toBeUndefined();
  }, 30_000);

  it('delete mode: deletes with an event; a stale delete does not touch a pod recreated under the name', async () => {
    kubeEnv();
    const node = nodeName();
    const ns = await freshNamespace();
    const old = await sidecarPod(ns, 'web', node, 'broken');
    const { ctl, metrics } = controller(node, { REPAIR_REPAIR_PODS: 'false', REPAIR_DELETE_PODS: 'true', REPAIR_DELETE_RATE: '600' });
    await ctl.start();
    await until('deleted', async () => (await podOrUndefined(ns, 'web')) === undefined);
    // The API server can show the pod gone before the controller's delete call has returned.
    await until('delete metric', () => has(metrics, 'delete', 'success'));
    const ev = await until('DeleteBrokenPod event', async () => (await events(ns, 'web')).find((e) => e.reason === 'DeleteBrokenPod'));
    expect(ev).toMatchObject({ type: 'Warning', source: { component: REPAIR_COMPONENT }, involvedObject: { uid: old.metadata!.uid } });

    // Recreated under the same name (a new uid), then a delete of the old incarnation, as a stale queued key would do it.
    const fresh = await createPod(adminClient(), ns, 'web', node);
    let result: string;
    do {
      result = await ctl.deleteBroken(old);
      if (result === 'rate-limited') await sleep(50);
    } while (result === 'rate-limited');
    expect(result).toBe('skip');
    expect((await podOrUndefined(ns, 'web'))?.metadata?.uid).toBe(fresh.metadata!.uid);
    expect(has(metrics, 'delete', 'skip')).toBe(true);
  }, 30_000);

  it('label mode: labels via pods/status with an event; Completed, already labelled and other-node pods untouched', async () => {
    kubeEnv();
    const node = nodeName();
    const ns = await freshNamespace();
    await sidecarPod(ns, 'done', node, 'completed');
    await sidecarPod(ns, 'elsewhere', `${node}-other`, 'broken');
    const pre = await sidecarPod(ns, 'pre', node, 'broken');
    await patchPodStatus(adminClient(), { namespace: ns, name: 'pre' }, { metadata: { labels: { 'cni.istio.io/uninitialized': 'set-before' } } });
    expect(pre.metadata?.uid).toBeTruthy();
    const broken = await sidecarPod(ns, 'web', node, 'broken');
    const { ctl, metrics } = controller(node, { REPAIR_REPAIR_PODS: 'false', REPAIR_LABEL_PODS: 'true' });
    await ctl.start();
    await until('labelled', async () => (await podOrUndefined(ns, 'web'))?.metadata?.labels?.['cni.istio.io/uninitialized'] === 'true');
    const ev = await until('LabelBrokenPod event', async () => (await events(ns, 'web')).find((e) => e.reason === 'LabelBrokenPod'));
    expect(ev).toMatchObject({ type: 'Warning', source: { component: REPAIR_COMPONENT }, involvedObject: { uid: broken.metadata!.uid } });
    expect(has(metrics, 'label', 'success')).toBe(true);
    expect(has(metrics, 'label', 'skip')).toBe(true); // 'pre'
    await until('queue idle', () => ctl.queue.stats().queued === 0 && ctl.queue.stats().inFlight === 0);
    expect((await podOrUndefined(ns, 'done'))?.metadata?.labels?.['cni.istio.io/uninitialized']).toBeUndefined();
    expect((await podOrUndefined(ns, 'elsewhere'))?.metadata?.labels?.['cni.istio.io/uninitialized']).toBeUndefined();
    expect((await podOrUndefined(ns, 'pre'))?.metadata?.labels?.['cni.istio.io/uninitialized']).toBe('set-before');
    expect(await events(ns, 'done')).toEqual([]);
    expect(await events(ns, 'elsewhere')).toEqual([]);
    expect(ctl.pods.list().map((p) => p.metadata!.name).sort()).toEqual(['done', 'pre', 'web']);
    // One label; later updates (its own label patch) find the label present: skips.
    expect(metrics.filter(([t, r]) => t === 'label' && r === 'success')).toHaveLength(1);
    expect(metrics.filter(([t]) => t !== 'label')).toEqual([]);
  }, 30_000);

  it('the delete rate limit holds with 50 broken pods: 60/min deletes one a second, evenly spaced, none dropped', async () => {
    kubeEnv();
    const node = nodeName();
    const ns = await freshNamespace();
    const names = Array.from({ length: 50 }, (_, i) => `b${i}`);
    await Promise.all(names.map((n, i) => sidecarPod(ns, n, node, 'broken', `10.88.1.${i + 1}`)));
    const { ctl, metrics, deletedAt } = controller(node, { REPAIR_REPAIR_PODS: 'false', REPAIR_DELETE_PODS: 'true', REPAIR_DELETE_RATE: '60' });
    await ctl.start();
    await until('first delete', () => ctl.stats.deleted === 1);
    await sleep(3_300);
    await ctl.stop();  // freeze: what got through in ~3.3 s is all there is
    const left = (await adminClient().core.listNamespacedPod({ namespace: ns })).items.filter((p) => !p.metadata?.deletionTimestamp);
    // At t=0 and then one a second: 4 deletes (3 when a slot's delete is still in flight at the stop), never a burst.
    expect(ctl.stats.deleted).toBeGreaterThanOrEqual(3);
    expect(ctl.stats.deleted).toBeLessThanOrEqual(4);
    expect(left).toHaveLength(50 - ctl.stats.deleted);
    expect(metrics.filter(([t, r]) => t === 'delete' && r === 'success')).toHaveLength(ctl.stats.deleted);
    for (let i = 1; i < deletedAt.length; i++) expect(deletedAt[i]! - deletedAt[i - 1]!, `gap before delete ${i}`).toBeGreaterThan(500);  // the limiter spaces takes 1 s apart; completion times jitter with the apiserver
    expect(ctl.stats.rateLimited).toBeGreaterThanOrEqual(49);
    expect(ctl.queue.stats().dropped).toBe(0);
  }, 40_000);

  it('ambient hook: a running pod that should be enrolled but is not gets enroll(); a permanent failure falls back to label', async () => {
    kubeEnv();
    const node = nodeName();
    const ns = await freshNamespace();
    const admin = adminClient();
    await runningPods(ns, node, [['amb', '10.88.2.1'], ['bad', '10.88.2.2'], ['plain', '10.88.2.3']]);
    const enrolled = new Set<string>();
    const calls: string[] = [];
    const ambient: AmbientRepairHook = {
      shouldBeEnrolled: (p) => p.metadata?.name !== 'plain',
      isEnrolled: (uid) => enrolled.has(uid),
      enroll: async (p) => {
        calls.push(p.metadata!.name!);
        if (p.metadata!.name === 'bad') throw new NonRetryable('no netns for the pod');
        enrolled.add(p.metadata!.uid!);
      },
    };
    const { ctl, metrics } = controller(node, { REPAIR_LABEL_PODS: 'true', REPAIR_AMBIENT_GRACE: '0s' }, { ambient });
    await ctl.start();
    await until('enrolled', () => ctl.stats.enrolled === 1);
    await until('bad labelled', async () => (await podOrUndefined(ns, 'bad'))?.metadata?.labels?.['cni.istio.io/uninitialized'] === 'true');
    expect(calls.filter((c) => c === 'amb')).toHaveLength(1);
    expect(calls).not.toContain('plain');
    expect(has(metrics, 'repair', 'success')).toBe(true);
    expect(has(metrics, 'repair', 'fail')).toBe(true);
    expect(has(metrics, 'label', 'success')).toBe(true);
    // Enrolled now: a later update does not enroll again.
    await patchPodStatus(admin, { namespace: ns, name: 'amb' }, { status: { message: 'x' } });
    await sleep(300);
    expect(calls.filter((c) => c === 'amb')).toHaveLength(1);
    expect((await podOrUndefined(ns, 'plain'))?.metadata?.labels?.['cni.istio.io/uninitialized']).toBeUndefined();
  }, 30_000);

  it('ambient hook: a pod the agent enrolls within the grace is left alone; one still unenrolled after it is enrolled, and the resync retries a given-up one', async () => {
    kubeEnv();
    const node = nodeName();
    const ns = await freshNamespace();
    await runningPods(ns, node, [['agent-enrolls', '10.88.3.1'], ['stays', '10.88.3.2'], ['netns-later', '10.88.3.3']]);
    const enrolled = new Set<string>();
    const calls: string[] = [];
    let netnsVisible = false;
    const ambient: AmbientRepairHook = {
      shouldBeEnrolled: () => true,
      isEnrolled: (uid) => enrolled.has(uid),
      enroll: async (p) => {
        calls.push(p.metadata!.name!);
        // Retryable: 5 runs, then the queue gives up; only the resync brings the key back.
        if (p.metadata!.name === 'netns-later' && !netnsVisible) throw new Error('no netns yet');
        enrolled.add(p.metadata!.uid!);
      },
    };
    const { ctl } = controller(node, { REPAIR_AMBIENT_GRACE: '1500ms', REPAIR_RESYNC_INTERVAL: '1s' }, { ambient });
    const t0 = performance.now();
    await ctl.start();
    // The agent's own path enrolls this one inside the grace.
    const early = ctl.pods.list().find((p) => p.metadata?.name === 'agent-enrolls')!;
    await sleep(300);
    enrolled.add(early.metadata!.uid!);
    await until('stays enrolled by repair', () => calls.includes('stays'), 10_000);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(1_400);
    await until('netns-later given up', () => ctl.queue.stats().dropped >= 1, 15_000);
    expect(calls.filter((c) => c === 'netns-later')).toHaveLength(5);
    netnsVisible = true;
    await until('netns-later enrolled by a resync', () => ctl.stats.enrolled === 2, 10_000);
    await sleep(1_200);  // another resync: nothing left to do
    expect(calls).not.toContain('agent-enrolls');
    expect(calls.filter((c) => c === 'stays')).toHaveLength(1);
    expect(calls.filter((c) => c === 'netns-later')).toHaveLength(6);
  }, 40_000);

  it('RBAC: delete mode with the agent\'s base role fails at start naming pods/delete; with podwire-agent-repair-delete the agent identity deletes; label mode needs nothing more', async () => {
    kubeEnv();
    const node = nodeName();
    const ns = await freshNamespace();
    await sidecarPod(ns, 'victim', node, 'broken');
    const deleteCfg = parseRepairConfig({ NODE_NAME: node, REPAIR_REPAIR_PODS: 'false', REPAIR_DELETE_PODS: 'true' });
    const base = agentClient();
    onTestFinished(() => base.close());
    const refused = new RepairController({ client: base, config: deleteCfg, resolveNetns: () => undefined });
    const err = await refused.start().then(() => undefined, (e: unknown) => e);
    await refused.stop();
    expect(err).toBeInstanceOf(RepairRbacError);
    expect((err as RepairRbacError).code).toBe('ERR_REPAIR_RBAC');
    expect((err as RepairRbacError).missing).toEqual(['pods/delete']);
    expect((err as Error).message).toContain('podwire-agent-repair-delete');
    expect(await podOrUndefined(ns, 'victim')).toBeDefined();

    const label = new RepairController({ client: base, config: parseRepairConfig({ NODE_NAME: node, REPAIR_REPAIR_PODS: 'false', REPAIR_LABEL_PODS: 'true' }), resolveNetns: () => undefined });
    running.push(label);
    await label.start();
    await until('labelled by the agent identity', () => label.stats.labelled === 1);
    await label.stop();

    const granted = await agentIdentityWith([REPAIR_DELETE_CLUSTER_ROLE.metadata.name]);
    await until('the grant is in effect', async () => (await missingAccess(granted, [{ resource: 'pods', verb: 'delete' }])).length === 0);
    const ok = new RepairController({ client: granted, config: deleteCfg, resolveNetns: () => undefined });
    running.push(ok);
    await ok.start();
    await until('deleted by the granted identity', () => ok.stats.deleted === 1);
    const gone = await podOrUndefined(ns, 'victim');
    expect(gone === undefined || gone.metadata?.deletionTimestamp !== undefined).toBe(true);
  }, 30_000);
});
