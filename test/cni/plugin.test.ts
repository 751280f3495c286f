// The plugin layer's dispatch over fakes of the agent's parts (a real
// Dataplane with in-memory subsystems and real netns): ADD branches in §2.3
// order, DEL and GC only for the sandbox the dataplane holds (with and
// without an attachment, late re-delivered DELs), 503 before the agent is
// ready, the pod's UID matched on ADD, the node's and the agent's own netns
// refused, cancelled ADDs leave nothing behind, every row of docs/cni.md's
// error table, STATUS, and the log socket's permissions and cleanup.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { AgentNotReadyError } from '../../lib/cni/errors.js';
import { parseInvocation } from '../../lib/cni/invocation.js';
import { startLogSink } from '../../lib/cni/log-sink.js';
import { CniPlugin, type CniPluginDeps, type CniReply } from '../../lib/cni/plugin.js';
import { ownNetns, type RefusedNetns } from '../../lib/cni/cmdadd.js';
import { invokeCni } from '../../lib/cni/invoke.js';
import { passThrough } from '../../lib/cni/result.js';
import { EnrollError } from '../../lib/dataplane/errors.js';
import { KubeError } from '../../lib/kube/errors.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { createLogging } from '../../lib/util/log.js';
import { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/enablement.js';
import type { KubeClient } from '../../lib/kube/client.js';
import { fakeDataplane } from '../dataplane/fakes.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const dirs: string[] = [];
afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });

function cache<T extends { metadata?: { name?: string; namespace?: string } }>(items: T[]) {
  return {
    get: (name: string, ns?: string) => items.find((i) => i.metadata?.name === name && (ns === undefined || i.metadata?.namespace === ns || i.metadata?.namespace === undefined)),
    list: () => items,
    on: () => () => undefined,
  };
}

interface SetupOptions {
  ready?: boolean;
  refusedNetns?: RefusedNetns[];
  addPodToMesh?: CniPluginDeps['controller']['addPodToMesh'];
  client?: Partial<KubeClient>;
  hostMountsRoot?: string;
}

function setup(opts: SetupOptions = {}) {
  const t = fakeDataplane();
  const pods: V1Pod[] = [];
  const namespaces: V1Namespace[] = [{ metadata: { name: 'mesh', labels: { 'istio.io/dataplane-mode': 'ambient' } } }, { metadata: { name: 'plain' } }];
  let ready = opts.ready ?? true;
  const removed: string[] = [];
  const enroll: CniPluginDeps['controller']['addPodToMesh'] = async (pod, ips, netnsPath) => {
    await t.dp.enroll({ uid: pod.metadata!.uid!, name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, ips }, netnsPath ? { netnsPath } : {});
  };
  const deps: CniPluginDeps = {
    controller: {
      pods: cache(pods) as never, namespaces: cache(namespaces) as never, addPodToMesh: opts.addPodToMesh ?? enroll,
      // The dataplane part of the controller's removal (the annotation and controller entry are its own tests').
      removePodFromMesh: async (uid) => {
        removed.push(uid);
        const e = t.dp.cache.get(uid);
        if (e) await t.dp.unenroll(e.pod, { podDeleted: false });
      },
    },
    client: (opts.client ?? {}) as KubeClient,
    policy: { selectors: compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS), excludeNamespaces: new Set(), systemNamespace: 'istio-system' },
    dataplane: t.dp,
    hostMountsRoot: opts.hostMountsRoot ?? '/',
    ready: () => ready,
    lookup: { cacheWaitMs: 0 },
    ...(opts.refusedNetns ? { refusedNetns: () => opts.refusedNetns! } : {}),
  };
  const plugin = new CniPlugin(deps);
  return { t, plugin, pods, deps, enroll, removed, setReady: (r: boolean) => { ready = r; } };
}

const conf = (extra: Record<string, unknown> = {}) => JSON.stringify({ cniVersion: '1.0.0', name: 'n', type: 'istio-cni', ambient_enabled: true, exclude_namespaces: ['kube-system'], pod_namespace: 'istio-system', ...extra });
const inv = (command: string, env: Record<string, string>, config = conf()) => parseInvocation(JSON.stringify({ command, env: { CNI_COMMAND: command, CNI_IFNAME: 'eth0', ...env }, config }));
const prev = { cniVersion: '1.0.0', ips: [{ address: '10.5.0.2/24' }], dns: {} };

describe.skipIf(!privileged())('CniPlugin', () => {
  it('ADD: excluded, agent pod and non-Kubernetes pass through without looking up a pod; ambient is enrolled and its attachment kept', async () => {
    const { plugin, pods, t } = setup();
    const ns = await freshNetns();
    for (const args of ['K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=dns', 'K8S_POD_NAMESPACE=istio-system;K8S_POD_NAME=istio-cni-node-abc', '']) {
      const r = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c0', CNI_NETNS: ns.path, CNI_ARGS: args }, conf({ prevResult: prev })));
      expect(r).toEqual({ exitCode: 0, stdout: passThrough(prev, '1.0.0') });
    }
    pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    const r = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c1', CNI_NETNS: ns.path, CNI_ARGS: 'K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=web' }, conf({ prevResult: prev })));
    expect(r.stdout).toBe(passThrough(prev, '1.0.0'));  // as upstream prints it (result.ts)
    expect(r.exitCode).toBe(0);
    expect(t.dp.cache.get('u-web')?.pod.ips).toEqual(['10.5.0.2']);
    expect(plugin.attachments.get('c1')).toMatchObject({ uid: 'u-web', ifname: 'eth0' });
    // an ambient pod without prevResult IPs (podwire not chained after the main plugin) is refused
    pods.push({ metadata: { name: 'noip', namespace: 'mesh', uid: 'u-noip' }, spec: { containers: [] } });
    const bad = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c2', CNI_NETNS: ns.path, CNI_ARGS: 'K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=noip' }));
    expect(bad.exitCode).toBe(1);
    expect(JSON.parse(bad.stdout)).toMatchObject({ code: 7 });
    await t.dp.close();
  });

  it('GC releases only attachments missing from cni.dev/valid-attachments, nothing without the list', async () => {
    const { plugin, pods, t } = setup();
    for (const n of ['a', 'b']) {
      const ns = await freshNetns();
      pods.push({ metadata: { name: n, namespace: 'mesh', uid: `u-${n}` }, spec: { containers: [] } });
      await plugin.handle(inv('ADD', { CNI_CONTAINERID: `c-${n}`, CNI_NETNS: ns.path, CNI_ARGS: `K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=${n}` }, conf({ prevResult: prev })));
    }
    expect((await plugin.handle(inv('GC', {}, conf({ cniVersion: '1.1.0' })))).exitCode).toBe(0);
    expect([t.dp.cache.has('u-a'), t.dp.cache.has('u-b')]).toEqual([true, true]);
    await plugin.handle(inv('GC', {}, conf({ cniVersion: '1.1.0', 'cni.dev/valid-attachments': [{ containerID: 'c-a', ifname: 'eth0' }] })));
    expect([t.dp.cache.has('u-a'), t.dp.cache.has('u-b')]).toEqual([true, false]);
    expect([...plugin.attachments.keys()]).toEqual(['c-a']);
    await t.dp.close();
  });

  it('DEL: 503 before the agent is ready; then only the enrolled sandbox is taken out', async () => {
    const { plugin, pods, t, setReady } = setup({ ready: false });
    await expect(plugin.handle(inv('DEL', { CNI_CONTAINERID: 'x', CNI_ARGS: '' }))).rejects.toBeInstanceOf(AgentNotReadyError);
    expect(JSON.parse((await plugin.handle(inv('STATUS', {}))).stdout)).toMatchObject({ code: 50 });
    setReady(true);
    const ns = await freshNetns();
    pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'new', CNI_NETNS: ns.path, CNI_ARGS: 'K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=web' }, conf({ prevResult: prev })));
    // A DEL for another (older) sandbox of the same pod, naming another netns, leaves it enrolled.
    const other = await freshNetns();
    await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'old', CNI_NETNS: other.path, CNI_ARGS: 'K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=web' }));
    expect(t.dp.cache.has('u-web')).toBe(true);
    await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'new', CNI_NETNS: '', CNI_ARGS: 'K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=web' }));
    expect(t.dp.cache.has('u-web')).toBe(false);
    expect((await plugin.handle(inv('STATUS', {}))).exitCode).toBe(0);
    await t.dp.close();
  });
});

const podArgs = (name: string, ns = 'mesh', uid?: string) => `K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${name}${uid ? `;K8S_POD_UID=${uid}` : ''}`;
const codeOf = (r: CniReply | 'not-ready') => (r === 'not-ready' ? 'not-ready' : r.exitCode === 0 ? 0 : (JSON.parse(r.stdout) as { code: number }).code);
const podInfo = (name: string, uid: string, ips = ['10.5.0.2']) => ({ uid, name, namespace: 'mesh', ips });
const heldAt = (t: ReturnType<typeof setup>['t'], uid: string, path: string) => !!t.dp.cache.get(uid)?.netns?.isAt(path);

describe.skipIf(!privileged())('CniPlugin: DEL and GC take out only the sandbox the dataplane holds', () => {
  it('with attachments: a late DEL of the old sandbox (its netns, an empty one, one gone since) leaves the new sandbox enrolled; the new one\'s DEL removes it', async () => {
    const { plugin, pods, t } = setup();
    pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    const a = await freshNetns();
    const b = await freshNetns();
    expect((await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c-old', CNI_NETNS: a.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })))).exitCode).toBe(0);
    expect(plugin.attachments.get('c-old')?.netns).toEqual(a.id);
    // The old sandbox died without a DEL reaching the agent (failed, or queued); the kubelet made a new one.
    expect((await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c-new', CNI_NETNS: b.path, CNI_ARGS: podArgs('web', 'mesh', 'u-web') }, conf({ prevResult: prev })))).exitCode).toBe(0);
    expect(heldAt(t, 'u-web', b.path)).toBe(true);
    for (const netns of [a.path, '']) {
      expect(await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'c-old', CNI_NETNS: netns, CNI_ARGS: podArgs('web', 'mesh', 'u-web') }))).toEqual({ exitCode: 0, stdout: '' });
      expect(heldAt(t, 'u-web', b.path), `DEL c-old netns ${JSON.stringify(netns)}`).toBe(true);
    }
    await Netns.remove(a.name);
    await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'c-old', CNI_NETNS: a.path, CNI_ARGS: podArgs('web') }));
    expect(heldAt(t, 'u-web', b.path)).toBe(true);
    expect(t.ztunnel.deleted).toEqual([]);
    await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'c-new', CNI_NETNS: '', CNI_ARGS: podArgs('web') }));
    expect(t.dp.cache.has('u-web')).toBe(false);
    expect(plugin.attachments.size).toBe(0);
    await t.dp.close();
  });

  it('an attachment whose netns the dataplane no longer holds (re-enrolled by the informers or the snapshot) takes nothing out, on DEL or on GC', async () => {
    const { plugin, pods, t } = setup();
    pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    const a = await freshNetns();
    const b = await freshNetns();
    for (const command of ['DEL', 'GC'] as const) {
      await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c-old', CNI_NETNS: a.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })));
      await t.dp.enroll(podInfo('web', 'u-web'), { netnsPath: b.path });  // the running sandbox, found by the proc scan
      const r = command === 'DEL'
        ? await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'c-old', CNI_NETNS: '', CNI_ARGS: podArgs('web') }))
        : await plugin.handle(inv('GC', {}, conf({ cniVersion: '1.1.0', 'cni.dev/valid-attachments': [] })));
      expect(r).toEqual({ exitCode: 0, stdout: '' });
      expect(heldAt(t, 'u-web', b.path), command).toBe(true);
      expect(plugin.attachments.size, command).toBe(0);  // forgotten all the same
    }
    // A DEL naming another live netns than its own attachment's is not about the enrolled sandbox either.
    await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c-new', CNI_NETNS: b.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })));
    await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'c-new', CNI_NETNS: a.path, CNI_ARGS: podArgs('web') }));
    expect(heldAt(t, 'u-web', b.path)).toBe(true);
    expect(t.ztunnel.deleted).toEqual([]);
    await t.dp.close();
  });

  it('without attachments (the agent restarted): only a DEL naming the enrolled netns removes the pod; an empty, other, unusable or vanished netns leaves it', async () => {
    const first = setup();
    first.pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    const a = await freshNetns();
    const b = await freshNetns();
    await first.plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c-new', CNI_NETNS: b.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })));
    const plugin = new CniPlugin(first.deps);  // same dataplane, no attachments in memory
    const { t } = first;
    for (const [cid, netns, args] of [['c-old', a.path, podArgs('web', 'mesh', 'u-web')], ['c-old', '', podArgs('web')], ['c-new', '', podArgs('web', 'mesh', 'u-web')], ['c-new', 'relative/path', podArgs('web')]] as const) {
      expect(await plugin.handle(inv('DEL', { CNI_CONTAINERID: cid, CNI_NETNS: netns, CNI_ARGS: args }))).toEqual({ exitCode: 0, stdout: '' });
      expect(heldAt(t, 'u-web', b.path), `${cid} ${netns}`).toBe(true);
    }
    await Netns.remove(a.name);
    await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'c-old', CNI_NETNS: a.path, CNI_ARGS: podArgs('web') }));
    expect(heldAt(t, 'u-web', b.path)).toBe(true);
    // Any path to the enrolled netns (found by name here: no K8S_POD_UID).
    await plugin.handle(inv('DEL', { CNI_CONTAINERID: 'c-new', CNI_NETNS: `/run/netns/../netns/${b.name}`, CNI_ARGS: podArgs('web') }));
    expect(t.dp.cache.has('u-web')).toBe(false);
    await t.dp.close();
  });
});

describe.skipIf(!privileged())('CniPlugin: ADD finds the pod by its UID', () => {
  it('a cached object of another UID (the old pod, Terminating) is not the pod: the API\'s pod of that UID is enrolled; another UID there is code 11; a deleting pod never passes', async () => {
    let api: V1Pod | undefined;
    const { plugin, pods, t } = setup({ client: { call: (async () => api) as never } });
    const old: V1Pod = { metadata: { name: 'web-0', namespace: 'mesh', uid: 'u-old', deletionTimestamp: new Date(), finalizers: ['x/hold'] }, spec: { containers: [] } };
    pods.push(old);
    const ns = await freshNetns();
    api = { metadata: { name: 'web-0', namespace: 'mesh', uid: 'u-new' }, spec: { containers: [] } };
    const r = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c1', CNI_NETNS: ns.path, CNI_ARGS: podArgs('web-0', 'mesh', 'u-new') }, conf({ prevResult: prev })));
    expect(r.exitCode).toBe(0);
    expect(heldAt(t, 'u-new', ns.path)).toBe(true);
    expect(plugin.attachments.get('c1')?.uid).toBe('u-new');
    // The API server still has the old object (the new one is not created yet): retry, nothing enrolled.
    api = old;
    const ns2 = await freshNetns();
    const r2 = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c2', CNI_NETNS: ns2.path, CNI_ARGS: podArgs('web-0', 'mesh', 'u-newer') }, conf({ prevResult: prev })));
    expect(codeOf(r2)).toBe(11);
    expect(t.dp.cache.has('u-newer')).toBe(false);
    // Without K8S_POD_UID the deleting object is all there is: an ambient pod being deleted is not started unredirected.
    const r3 = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c3', CNI_NETNS: ns2.path, CNI_ARGS: podArgs('web-0') }, conf({ prevResult: prev })));
    expect(codeOf(r3)).toBe(11);
    expect(JSON.parse(r3.stdout).msg).toContain('being deleted');
    expect(t.dp.cache.has('u-old')).toBe(false);
    await t.dp.close();
  });
});

describe.skipIf(!privileged('iptables-save'))('CniPlugin: the node\'s and the agent\'s own netns are refused', () => {
  it('ADD (ambient, sidecar) and CHECK naming the node netns by any path, or the agent\'s own netns: code 103, nothing enrolled or programmed', async () => {
    const node = await freshNetns();
    const own = ownNetns();
    const { plugin, pods, t } = setup({ refusedNetns: [{ ...node.id, what: "the node's netns" }, ...own] });
    pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    pods.push({ metadata: { name: 'sc', namespace: 'plain', uid: 'u-sc', annotations: { 'sidecar.istio.io/status': '{}' } },
      spec: { containers: [{ name: 'app', image: 'a' }, { name: 'istio-proxy', image: 'p', args: ['proxy', 'sidecar'] }] } });
    const paths = [node.path, `/run/netns/../netns/${node.name}`, `/run/netns/./${node.name}`, '/proc/self/ns/net', `/proc/${process.pid}/ns/net`, '/proc/thread-self/ns/net'];
    for (const path of paths) {
      for (const [name, ns] of [['web', 'mesh'], ['sc', 'plain']] as const) {
        const r = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c', CNI_NETNS: path, CNI_ARGS: podArgs(name, ns) }, conf({ prevResult: prev })));
        expect(codeOf(r), `${name} ${path}`).toBe(103);
      }
    }
    expect(t.dp.cache.size).toBe(0);
    expect(plugin.attachments.size).toBe(0);
    expect(execFileSync('ip', ['netns', 'exec', node.name, 'iptables-save'], { encoding: 'utf8' })).not.toContain('ISTIO');
    // CHECK of an enrolled pod naming the node netns.
    const podNs = await freshNetns();
    await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c-web', CNI_NETNS: podNs.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })));
    expect(codeOf(await plugin.handle(inv('CHECK', { CNI_CONTAINERID: 'c-web', CNI_NETNS: node.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev }))))).toBe(103);
    expect(codeOf(await plugin.handle(inv('CHECK', { CNI_CONTAINERID: 'c-web', CNI_NETNS: podNs.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev }))))).toBe(0);
    await t.dp.close();
  });

  it('by default the agent\'s own netns is refused', async () => {
    const { plugin, pods, t } = setup();
    pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    const r = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c', CNI_NETNS: '/proc/self/ns/net', CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })));
    expect(JSON.parse(r.stdout)).toMatchObject({ code: 103, msg: expect.stringContaining("the node agent's own netns") });
    expect(t.dp.cache.size).toBe(0);
    await t.dp.close();
  });
});

/** A shim request body for invokeCni. */
const shimBody = (command: string, env: Record<string, string>, config = conf()) => JSON.stringify({ command, env: { CNI_COMMAND: command, CNI_IFNAME: 'eth0', ...env }, config });
/** Resolves once `signal` fires. */
const aborted = (signal: AbortSignal | undefined) => new Promise<void>((r) => { if (!signal || signal.aborted) r(); else signal.addEventListener('abort', () => r(), { once: true }); });

describe.skipIf(!privileged())('CniPlugin: a cancelled ADD leaves nothing behind', () => {
  it('the deadline fires during the enrollment: code 11, nothing enrolled, no attachment, whether the controller honours the signal or finishes anyway', async () => {
    for (const honours of [true, false]) {
      const holder: { enroll?: CniPluginDeps['controller']['addPodToMesh'] } = {};
      const seen: Array<AbortSignal | undefined> = [];
      const s = setup({
        addPodToMesh: async (pod, ips, netnsPath, o) => {
          seen.push(o?.signal);
          await holder.enroll!(pod, ips, netnsPath);
          await aborted(o?.signal);
          if (honours) {
            // What the controller does with the signal: undo, then a retryable EnrollError.
            await s.t.dp.unenroll(podInfo(pod.metadata!.name!, pod.metadata!.uid!), { podDeleted: true });
            throw new EnrollError(pod.metadata!.uid!, 'ztunnel', true, new Error('aborted'));
          }
        },
      });
      holder.enroll = s.enroll;
      s.pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
      const ns = await freshNetns();
      const r = await invokeCni(s.plugin, shimBody('ADD', { CNI_CONTAINERID: 'c1', CNI_NETNS: ns.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })), new AbortController().signal, { deadlineMs: 50 });
      expect(codeOf(r), `honours ${honours}`).toBe(11);
      await s.plugin.idle();
      expect(seen[0]?.aborted).toBe(true);  // the controller got the invocation's signal
      expect(s.t.dp.cache.has('u-web'), `honours ${honours}`).toBe(false);
      expect(s.plugin.attachments.size).toBe(0);
      await s.t.dp.close();
    }
  });

  it('the request going away aborts it the same way', async () => {
    const s = setup({ addPodToMesh: async (pod, ips, netnsPath, o) => { await s.enroll(pod, ips, netnsPath); await aborted(o?.signal); } });
    s.pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    const ns = await freshNetns();
    const gone = new AbortController();
    const p = invokeCni(s.plugin, shimBody('ADD', { CNI_CONTAINERID: 'c1', CNI_NETNS: ns.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })), gone.signal);
    while (!s.t.dp.cache.has('u-web')) await new Promise((r) => setTimeout(r, 5));
    gone.abort(new Error('client disconnected'));
    expect(codeOf(await p)).toBe(11);
    await s.plugin.idle();
    expect(s.t.dp.cache.has('u-web')).toBe(false);
    expect(s.plugin.attachments.size).toBe(0);
    await s.t.dp.close();
  });
});

type Row = { code: number | 'not-ready'; when: string; run: () => Promise<CniReply | 'not-ready'> };

/** One fresh plugin, an ambient pod `web` and a sidecar pod `sc`, and a pod netns, for a row. */
async function rowSetup(opts: SetupOptions = {}) {
  const s = setup(opts);
  s.pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
  const ns = await freshNetns();
  const add = (extra: Record<string, unknown> = {}, env: Record<string, string> = {}) =>
    s.plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c1', CNI_NETNS: ns.path, CNI_ARGS: podArgs('web'), ...env }, conf({ prevResult: prev, ...extra })));
  return { ...s, ns, add };
}

const noSignal = () => new AbortController().signal;

// docs/cni.md "Error codes", row by row (the agent's cases; the shim's are in shim.test.ts).
const ROWS: Row[] = [
  { code: 1, when: 'config cniVersion 0.0.1', run: async () => (await rowSetup()).add({ cniVersion: '0.0.1' }) },
  { code: 1, when: 'prevResult cniVersion 0.0.1 (ambient ADD)', run: async () => (await rowSetup()).add({ prevResult: { ...prev, cniVersion: '0.0.1' } }) },
  { code: 4, when: 'CNI_COMMAND unknown', run: async () => invokeCni((await rowSetup()).plugin, shimBody('FOO', {}), noSignal()) },
  { code: 4, when: 'CNI_NETNS missing for ADD', run: async () => invokeCni((await rowSetup()).plugin, shimBody('ADD', { CNI_CONTAINERID: 'c' }), noSignal()) },
  { code: 4, when: 'CNI_ARGS not K=V pairs', run: async () => (await rowSetup()).add({}, { CNI_ARGS: 'junk' }) },
  { code: 4, when: 'CNI_NETNS not an absolute path', run: async () => (await rowSetup()).add({}, { CNI_NETNS: 'var/run/netns/x' }) },
  { code: 4, when: 'CNI_NETNS whose .. leaves HOST_MOUNTS_ROOT', run: async () => (await rowSetup({ hostMountsRoot: '/run/netns' })).add({}, { CNI_NETNS: '/../../proc/1/ns/net' }) },
  { code: 6, when: 'config not JSON', run: async () => (await rowSetup()).plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c', CNI_NETNS: '/x' }, '{"cniVersion":')) },
  { code: 6, when: 'config not an object', run: async () => (await rowSetup()).plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c', CNI_NETNS: '/x' }, '["1.0.0"]')) },
  { code: 6, when: 'prevResult not an object', run: async () => (await rowSetup()).add({ prevResult: 'x' }) },
  { code: 6, when: 'prevResult ips[0].address not a string (ambient ADD)', run: async () => (await rowSetup()).add({ prevResult: { ...prev, ips: [{ address: 5 }] } }) },
  { code: 6, when: 'prevResult ips[0].address not an IP (ambient ADD)', run: async () => (await rowSetup()).add({ prevResult: { ...prev, ips: [{ address: 'garbage/24' }] } }) },
  { code: 6, when: 'prevResult ips not a list of objects (plain pod)', run: async () => (await rowSetup()).add({ prevResult: { ...prev, ips: ['10.0.0.1/24'] } }, { CNI_ARGS: podArgs('p', 'plain') }) },
  { code: 7, when: 'cniVersion missing', run: async () => (await rowSetup()).add({ cniVersion: undefined }) },
  { code: 7, when: 'a field of the wrong type', run: async () => (await rowSetup()).add({ exclude_namespaces: 5 }) },
  { code: 7, when: 'ambient pod, prevResult without IPs', run: async () => (await rowSetup()).add({ prevResult: undefined }) },
  {
    code: 11, when: 'pod not found', run: async () => {
      const s = await rowSetup({ client: { call: (async () => { throw new KubeError({ code: 'NotFound', status: 404, verb: 'get', resource: 'pods' }); }) as never } });
      return s.add({}, { CNI_ARGS: podArgs('missing') });
    },
  },
  { code: 11, when: 'pod of another UID on the API server', run: async () => {
    const s = await rowSetup({ client: { call: (async () => ({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-other' } })) as never } });
    return s.add({}, { CNI_ARGS: podArgs('web', 'mesh', 'u-wanted') });
  } },
  { code: 11, when: 'retryable enrollment failure (ztunnel)', run: async () => { const s = await rowSetup(); s.t.ztunnel.fail = true; return s.add(); } },
  { code: 11, when: 'DEL failed', run: async () => {
    const s = await rowSetup();
    await s.add();
    s.t.ztunnel.failDelete = true;
    return s.plugin.handle(inv('DEL', { CNI_CONTAINERID: 'c1', CNI_NETNS: '', CNI_ARGS: podArgs('web') }));
  } },
  { code: 11, when: 'the deadline', run: async () => {
    const s = await rowSetup({ addPodToMesh: async (_p, _i, _n, o) => { await aborted(o?.signal); } });
    return invokeCni(s.plugin, shimBody('ADD', { CNI_CONTAINERID: 'c1', CNI_NETNS: s.ns.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })), noSignal(), { deadlineMs: 20 });
  } },
  { code: 11, when: 'an unexpected error', run: async () => (await rowSetup({ addPodToMesh: async () => { throw new Error('boom'); } })).add() },
  { code: 'not-ready', when: 'DEL before the snapshot is restored (HTTP 503)', run: async () => invokeCni((await rowSetup({ ready: false })).plugin, shimBody('DEL', { CNI_CONTAINERID: 'c' }), noSignal()) },
  { code: 50, when: 'STATUS before the snapshot is restored', run: async () => (await rowSetup({ ready: false })).plugin.handle(inv('STATUS', {})) },
  { code: 100, when: 'non-retryable enrollment failure (rules)', run: async () => { const s = await rowSetup(); s.t.rules.failApply = () => true; return s.add(); } },
  { code: 101, when: 'CHECK finds drift', run: async () => {
    const s = await rowSetup();
    await s.add();
    s.t.rules.drifted.add('u-web');
    return s.plugin.handle(inv('CHECK', { CNI_CONTAINERID: 'c1', CNI_NETNS: s.ns.path, CNI_ARGS: podArgs('web') }, conf({ prevResult: prev })));
  } },
  { code: 102, when: 'sidecar rules that do not validate', run: async () => {
    const s = await rowSetup();
    s.pods.push({ metadata: { name: 'sc', namespace: 'plain', uid: 'u-sc', annotations: { 'sidecar.istio.io/status': '{}', 'sidecar.istio.io/interceptionMode': 'BOGUS' } },
      spec: { containers: [{ name: 'istio-proxy', image: 'p', args: ['proxy', 'sidecar'] }] } });
    return s.add({}, { CNI_ARGS: podArgs('sc', 'plain') });
  } },
  { code: 103, when: 'CNI_NETNS is the node\'s netns', run: async () => {
    const node = await freshNetns();
    return (await rowSetup({ refusedNetns: [{ ...node.id, what: "the node's netns" }] })).add({}, { CNI_NETNS: node.path });
  } },
];

describe.skipIf(!privileged())('CniPlugin: docs/cni.md error codes, one case per row', () => {
  it.each(ROWS)('$code: $when', async (row) => {
    expect(codeOf(await row.run())).toBe(row.code);
  });

  it('every code of the docs table has a case, and every case\'s code is in the table', () => {
    const doc = readFileSync(new URL('../../docs/cni.md', import.meta.url), 'utf8');
    const table = doc.slice(doc.indexOf('## Error codes'), doc.indexOf('## When the agent cannot be reached'));
    const documented = new Set([...table.matchAll(/^\| (\d+) \|/gm)].map((m) => Number(m[1])));
    const tested = new Set(ROWS.map((r) => r.code).filter((c): c is number => typeof c === 'number'));
    expect([...tested].sort()).toEqual([...documented].sort());
  });
});

describe('plugin log socket', () => {
  it('is 0600, replays what it gets, and on close removes only its own socket', async () => {
    const run = mkdtempSync(join(tmpdir(), 'pwt-logsock-'));
    dirs.push(run);
    const lines: string[] = [];
    const log = createLogging({ levels: { default: 'info' }, json: true, sink: { write: (l: string) => lines.push(l) } }).scope('cni-plugin');
    const sink = await startLogSink(run, log);
    expect(lstatSync(sink.socketPath).mode & 0o777).toBe(0o600);
    const body = JSON.stringify([JSON.stringify({ level: 'info', time: '2026-12-01T10:00:00.000001Z', msg: 'hello', pod: 'a/b' })]);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ socketPath: sink.socketPath, method: 'POST', path: '/log' }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode ?? 0)); });
      req.on('error', reject);
      req.end(body);
    });
    expect(status).toBe(200);
    expect(JSON.parse(lines[0]!)).toMatchObject({ msg: 'hello', scope: 'cni-plugin', pod: 'a/b' });
    await sink.close();
    expect(existsSync(sink.socketPath)).toBe(false);
    // A newer agent's socket at the path is not removed by an older one closing.
    const a = await startLogSink(run, log);
    writeFileSync(join(run, 'other'), '');
    renameSync(join(run, 'other'), a.socketPath);
    await a.close();
    expect(existsSync(a.socketPath)).toBe(true);
  });
});
