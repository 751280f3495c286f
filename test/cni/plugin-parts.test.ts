// The plugin layer's pure parts: network config per CNI version, prevResult
// conversion between versions, CNI_ARGS, the shim's request, sidecar
// eligibility (§2.3 step 8), the plugin log socket's replay, the DEL queue.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { V1Pod } from '@kubernetes/client-node';
import { parseCniArgs } from '../../lib/cni/cni-args.js';
import { DEL_QUEUE_DIR, drainDelQueue, type DelRecord } from '../../lib/cni/del-queue.js';
import { CniError } from '../../lib/cni/errors.js';
import { parseInvocation } from '../../lib/cni/invocation.js';
import { replayPluginLogs } from '../../lib/cni/log-sink.js';
import { parseNetConf } from '../../lib/cni/netconf.js';
import { resultIps } from '../../lib/cni/result.js';
import { sidecarEligibility } from '../../lib/cni/sidecar.js';
import { createLogging } from '../../lib/util/log.js';

const code = (fn: () => unknown) => {
  try {
    fn();
  } catch (err) {
    return err instanceof CniError ? err.cniCode : `not a CniError: ${String(err)}`;
  }
  return 'no error';
};

const PREV_040 = {
  cniVersion: '0.4.0',
  interfaces: [{ name: 'cni0', mac: '00:11:22:33:44:55' }, { name: 'eth0', mac: '66:77:88:99:aa:bb', sandbox: '/var/run/netns/cni-1' }],
  ips: [{ version: '4', interface: 1, address: '10.244.0.5/24', gateway: '10.244.0.1' }, { version: '6', interface: 1, address: 'fd00::5/64', gateway: 'fd00::1' }],
  routes: [{ dst: '0.0.0.0/0' }],
  dns: { nameservers: ['10.96.0.10'] },
  extra: 'dropped',
};

describe('network configuration', () => {
  it('reads Istio\'s fields by their JSON names, ignores unknown ones', () => {
    const c = parseNetConf(JSON.stringify({
      cniVersion: '0.3.1', name: 'istio-cni', type: 'istio-cni', plugin_log_level: 'debug', cni_agent_run_dir: '/tmp/r', ambient_enabled: true,
      exclude_namespaces: ['kube-system'], pod_namespace: 'istio-system', native_nftables: true, whatever: { a: 1 }, prevResult: PREV_040,
    }));
    expect(c).toMatchObject({ cniVersion: '0.3.1', ambientEnabled: true, excludeNamespaces: ['kube-system'], podNamespace: 'istio-system', nativeNftables: true, cniAgentRunDir: '/tmp/r' });
    expect(c.prevResult).toEqual(PREV_040);
    expect(parseNetConf('{"cniVersion":"1.1.0","exclude_namespaces":null}').excludeNamespaces).toEqual([]);
  });
  it('refuses what it cannot read, with the CNI code', () => {
    expect(code(() => parseNetConf('not json'))).toBe(6);
    expect(code(() => parseNetConf('[]'))).toBe(6);
    expect(code(() => parseNetConf('{}'))).toBe(7);
    expect(code(() => parseNetConf('{"cniVersion":"0.2.0"}'))).toBe(1);
    expect(code(() => parseNetConf('{"cniVersion":"1.0.0","ambient_enabled":"yes"}'))).toBe(7);
    expect(code(() => parseNetConf('{"cniVersion":"1.0.0","exclude_namespaces":"a,b"}'))).toBe(7);
    expect(code(() => parseNetConf('{"cniVersion":"1.1.0","cni.dev/valid-attachments":[{"containerID":1}]}'))).toBe(7);
  });
});

describe('prevResult IPs', () => {
  it('are the addresses without their prefix length, in order', () => {
    expect(resultIps(PREV_040)).toEqual(['10.244.0.5', 'fd00::5']);
    expect(resultIps({ cniVersion: '1.0.0', ips: [{ address: 5 }] })).toEqual([]);
  });
});

describe('CNI_ARGS and the shim request', () => {
  it('reads the K8S_ keys in any order', () => {
    expect(parseCniArgs('K8S_POD_NAME=web2;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u1;IgnoreUnknown=1;K8S_POD_NAMESPACE=prod'))
      .toEqual({ podName: 'web2', podNamespace: 'prod', podUid: 'u1', infraContainerId: 'abc' });
    expect(parseCniArgs('')).toEqual({ podName: '', podNamespace: '', podUid: '', infraContainerId: '' });
    expect(code(() => parseCniArgs('K8S_POD_NAME'))).toBe(4);
    expect(code(() => parseCniArgs('K8S_POD_NAME=a;'))).toBe(4);  // libcni refuses an empty pair too
  });
  it('checks the environment each command needs', () => {
    const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: '/var/run/netns/x', CNI_IFNAME: 'eth0' };
    expect(parseInvocation(JSON.stringify({ command: 'ADD', env, config: '{}' }))).toMatchObject({ command: 'ADD', containerId: 'c1', netns: '/var/run/netns/x' });
    expect(parseInvocation(JSON.stringify({ command: 'DEL', env: { ...env, CNI_NETNS: '' }, config: '{}' })).netns).toBe('');
    expect(code(() => parseInvocation(JSON.stringify({ command: 'ADD', env: { ...env, CNI_NETNS: '' }, config: '{}' })))).toBe(4);
    expect(code(() => parseInvocation(JSON.stringify({ command: 'VERSION', env, config: '{}' })))).toBe(4);
    expect(code(() => parseInvocation('{"command":"ADD","env":{},"config":{}}'))).toBe(6);
  });
});

describe('sidecar eligibility (§2.3 step 8)', () => {
  const pod = (over: Partial<V1Pod['spec']> = {}, meta: V1Pod['metadata'] = { annotations: { 'sidecar.istio.io/status': '{}' } }): V1Pod =>
    ({ metadata: meta, spec: { containers: [{ name: 'app' }, { name: 'istio-proxy', args: ['proxy', 'sidecar'] }], ...over } });
  it.each([
    ['injected pod', pod(), true],
    ['istio-init present', pod({ initContainers: [{ name: 'istio-init' }] }), false],
    ['DISABLE_ENVOY', pod({ containers: [{ name: 'istio-proxy', env: [{ name: 'DISABLE_ENVOY', value: 'true' }] }] }), false],
    ['no istio-proxy', pod({ containers: [{ name: 'app' }] }), false],
    ['router proxy', pod({ containers: [{ name: 'istio-proxy', args: ['proxy', 'router'] }] }), false],
    ['inject label false wins over annotation', pod({}, { labels: { 'sidecar.istio.io/inject': 'false' }, annotations: { 'sidecar.istio.io/inject': 'true', 'sidecar.istio.io/status': '{}' } }), false],
    ['no status annotation', pod({}, {}), false],
  ] as const)('%s', (_n, p, eligible) => {
    expect(sidecarEligibility(p).eligible).toBe(eligible);
  });
});

describe('plugin log socket replay (§2.8)', () => {
  it('replays entries at their level with their time into cni-plugin; drops what upstream drops', () => {
    const lines: string[] = [];
    const log = createLogging({ levels: { default: 'debug' }, json: true, sink: { write: (l: string) => lines.push(l) } }).scope('cni-plugin');
    const entry = (e: Record<string, unknown>) => JSON.stringify(e);
    const n = replayPluginLogs(JSON.stringify([
      entry({ level: 'info', time: '2026-12-01T10:00:00.123456Z', msg: '  added pod  ', pod: 'ns/p' }),
      entry({ level: 'fatal', time: '2026-12-01T10:00:00Z', msg: 'x' }),
      entry({ level: 'info', msg: 'no time' }),
      'not json', 7,
    ]), log);
    expect(n).toBe(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'info', time: '2026-12-01T10:00:00.123456Z', scope: 'cni-plugin', msg: 'added pod', pod: 'ns/p' });
    expect(replayPluginLogs('{"not":"a list"}', log)).toBe(0);
  });
});

describe('DEL queue', () => {
  const dirs: string[] = [];
  afterEach(() => { for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true }); });
  it('hands records over oldest first, removes handled and malformed ones, keeps a failed one', async () => {
    const run = mkdtempSync(join(tmpdir(), 'pwt-delq-'));
    dirs.push(run);
    const q = join(run, DEL_QUEUE_DIR);
    mkdirSync(q);
    const rec = (id: string): DelRecord => ({ containerId: id, netns: '', ifname: 'eth0', podNamespace: 'n', podName: `p-${id}`, podUid: `u-${id}`, time: '' });
    writeFileSync(join(q, '2-b.json'), JSON.stringify(rec('b')));
    writeFileSync(join(q, '1-a.json'), JSON.stringify(rec('a')));
    writeFileSync(join(q, '3-c.json'), JSON.stringify(rec('c')));
    writeFileSync(join(q, '4-bad.json'), '{"containerId": 5}');
    writeFileSync(join(q, 'x.tmp'), 'ignored');
    const seen: string[] = [];
    const r = await drainDelQueue(run, async (x) => {
      seen.push(x.containerId);
      if (x.containerId === 'c') throw new Error('busy');
    });
    expect(seen).toEqual(['a', 'b', 'c']);
    expect(r).toMatchObject({ records: 3, handled: 2, malformed: ['4-bad.json'], failed: [{ file: '3-c.json', error: 'busy' }] });
    expect(readdirSync(q).sort()).toEqual(['3-c.json', 'x.tmp']);
    expect((await drainDelQueue(join(run, 'nope'), async () => undefined)).records).toBe(0);
  });
});
