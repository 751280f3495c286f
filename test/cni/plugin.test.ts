// The plugin layer's dispatch over fakes of the agent's parts (a real
// Dataplane with in-memory subsystems and real netns): ADD branches in §2.3
// order, DEL only for the enrolled sandbox and 503 before the agent is ready,
// GC by valid-attachments (nothing released without the list), STATUS, and
// the log socket's permissions and cleanup.
import { existsSync, lstatSync, mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import { AgentNotReadyError } from '../../lib/cni/errors.js';
import { parseInvocation } from '../../lib/cni/invocation.js';
import { startLogSink } from '../../lib/cni/log-sink.js';
import { CniPlugin } from '../../lib/cni/plugin.js';
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

function setup(opts: { ready?: boolean } = {}) {
  const t = fakeDataplane();
  const pods: V1Pod[] = [];
  const namespaces: V1Namespace[] = [{ metadata: { name: 'mesh', labels: { 'istio.io/dataplane-mode': 'ambient' } } }, { metadata: { name: 'plain' } }];
  let ready = opts.ready ?? true;
  const plugin = new CniPlugin({
    controller: {
      pods: cache(pods) as never, namespaces: cache(namespaces) as never,
      addPodToMesh: async (pod, ips, netnsPath) => {
        await t.dp.enroll({ uid: pod.metadata!.uid!, name: pod.metadata!.name!, namespace: pod.metadata!.namespace!, ips }, netnsPath ? { netnsPath } : {});
      },
    },
    client: {} as KubeClient,
    policy: { selectors: compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS), excludeNamespaces: new Set(), systemNamespace: 'istio-system' },
    dataplane: t.dp,
    hostMountsRoot: '/',
    ready: () => ready,
    lookup: { cacheWaitMs: 0 },
  });
  return { t, plugin, pods, setReady: (r: boolean) => { ready = r; } };
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
      expect(r).toEqual({ exitCode: 0, stdout: `${JSON.stringify(prev)}\n` });
    }
    pods.push({ metadata: { name: 'web', namespace: 'mesh', uid: 'u-web' }, spec: { containers: [] } });
    const r = await plugin.handle(inv('ADD', { CNI_CONTAINERID: 'c1', CNI_NETNS: ns.path, CNI_ARGS: 'K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=web' }, conf({ prevResult: prev })));
    expect(r.stdout).toBe(`${JSON.stringify(prev)}\n`);
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
