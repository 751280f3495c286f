// `podwire agent` as a real process: --help lists every setting, a bad
// setting stops it with exit 2 naming the setting, and `kill -9` with 50
// enrolled pods loses nothing — the next agent is ready quickly, rewrites
// no running pod's rules (nft handles unchanged), gives ztunnel the whole
// snapshot and leaves the probe set exact. Its stderr is JSON lines.
import { execFileSync } from 'node:child_process';
import { afterEach, expect, it } from 'vitest';
import { NftProbeSet } from '../../lib/dataplane/probe-set-nft.js';
import { REDIRECTION_ANNOTATION } from '../../lib/mesh/constants.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode, type TestPod } from '../helpers/agent-node.js';
import { runCli, spawnAgent, type SpawnedCli } from '../helpers/cli.js';
import { httpGet } from '../helpers/http.js';
import { adminClient, describeKube, freshNamespace, kubeEnv, removeNamespace, until } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

it('podwire agent --help lists every setting with its env name, flag and default', async () => {
  const r = await runCli('agent', '--help');
  expect(r.code).toBe(0);
  for (const s of ['NODE_NAME / --node-name', 'AMBIENT_ENABLEMENT_SELECTOR', 'ZTUNNEL_UDS_ADDRESS', 'CNI_AGENT_RUN_DIR', 'NATIVE_NFTABLES', 'MONITORING_PORT / --monitoring-port', 'AMBIENT_DRIFT_CHECK_INTERVAL', '--log_output_level'])
    expect(r.out).toContain(s);
  expect(r.out).toMatch(/MONITORING_PORT \/ --monitoring-port\n.*\n\s+default: 15014/);
  expect(r.out).toMatch(/AMBIENT_DRIFT_CHECK_INTERVAL .*\n.*\n\s+default: 1m\n/);
});

it.each([
  [{ AMBIENT_IPV6: 'yes', NODE_NAME: 'n1', AMBIENT_ENABLED: 'true' }, 'AMBIENT_IPV6="yes"'],
  [{ AMBIENT_ENABLED: 'true' }, 'NODE_NAME'],
  [{ NODE_NAME: 'n1', AMBIENT_ENABLED: 'false' }, 'AMBIENT_ENABLED'],
  [{ NODE_NAME: 'n1', AMBIENT_ENABLED: 'true', MONITORING_PORT: '99999' }, 'MONITORING_PORT="99999"'],
])('a bad setting stops it at once with exit 2 naming it: %j', async (env, named) => {
  const saved = { ...process.env };
  try {
    for (const k of ['NODE_NAME', 'AMBIENT_ENABLED', 'AMBIENT_IPV6', 'MONITORING_PORT']) delete process.env[k];
    Object.assign(process.env, env);
    const r = await runCli('agent');
    expect(r.code).toBe(2);
    expect(r.err).toContain(named);
    expect(r.err).not.toContain('Settings:');  // the message, not the whole help
  } finally {
    process.env = saved;
  }
});

/** `nft -a list ruleset` of a pod: rule handles change whenever rules are rewritten. */
const ruleset = (p: TestPod) => execFileSync('ip', ['netns', 'exec', p.netnsName, 'nft', '-a', 'list', 'ruleset'], { encoding: 'utf8' });

const startAgent = (env: Record<string, string>): SpawnedCli =>
  spawnAgent({ ...env, KUBECONFIG: kubeEnv().agentKubeconfig }, (fn) => cleanups.push(fn));

async function readyz(env: Record<string, string>): Promise<number> {
  return (await httpGet({ host: '127.0.0.1', port: Number(env.HEALTH_PORT) }, '/readyz').catch(() => ({ status: 0 }))).status;
}

describeKube('podwire agent (process)', () => {
  it.skipIf(!privileged('nft'))('kill -9 with 50 enrolled pods: the next agent is ready fast, rewrites no rules, ztunnel gets the full snapshot, probe set exact; its uninstall releases every pod', async () => {
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    const admin = adminClient();
    const ns = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
    cleanups.push(() => removeNamespace(admin, ns));
    const pods: TestPod[] = [];
    for (let i = 0; i < 50; i++) pods.push(await node.addPod(ns, `app-${i}`));
    const env = await node.env({ AMBIENT_DRIFT_CHECK_INTERVAL: '0' });

    const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 100, listeners: false });
    cleanups.push(() => peer.stop());
    const snapshots: Array<{ connection: number; adds: Set<string>; addMessages: number }> = [];
    peer.on('connect', (connection: number) => snapshots.push({ connection, adds: new Set(), addMessages: 0 }));
    peer.on('message', (e: { connection: number; type: string; uid?: string }) => {
      const s = snapshots.find((x) => x.connection === e.connection);
      if (s && e.type === 'add' && e.uid) {
        s.adds.add(e.uid);
        s.addMessages++;
      }
    });
    peer.start();

    const first = startAgent(env);
    await until('first agent ready', async () => (await readyz(env)) === 200, 60_000);
    const annotated = async () => {
      const l = await admin.core.listNamespacedPod({ namespace: ns });
      return l.items.filter((p) => p.metadata?.annotations?.[REDIRECTION_ANNOTATION] === 'enabled').length;
    };
    await until('50 pods enabled', async () => (await annotated()) === 50, 60_000);
    await until('ztunnel holds 50', () => peer.active.size === 50);
    const before = new Map(pods.map((p) => [p.uid, ruleset(p)]));
    for (const p of pods) expect(before.get(p.uid)).toContain('table inet istio-ambient');

    first.child.kill('SIGKILL');
    const killed = await first.done;
    expect(killed.signal).toBe('SIGKILL');
    // Every stderr line is a JSON object with Istio's fields; lines about a pod name it.
    const lines = killed.err.split('\n').filter((l) => l !== '');
    expect(lines.length).toBeGreaterThan(50);
    for (const l of lines) expect(JSON.parse(l)).toMatchObject({ level: expect.any(String), time: expect.any(String), scope: 'cni-agent', msg: expect.any(String) });
    // (A pod reached before ztunnel reconnected is retried: 'pending', then 're-enrolled'.)
    const enrolledLines = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'ambient: pod enrolled' || l.msg === 'ambient: pod re-enrolled');
    expect([...new Set(enrolledLines.map((l) => l.pod))].sort()).toEqual(pods.map((p) => `${ns}/${p.name}`).sort());

    const connectionsBefore = snapshots.length;
    const t0 = Date.now();
    const second = startAgent(env);
    await until('second agent ready', async () => (await readyz(env)) === 200, 30_000);
    const readyMs = Date.now() - t0;
    expect(readyMs).toBeLessThan(15_000);  // includes node's startup and TS loading; bench/agent.ts measures start() itself
    await until('ztunnel reconnected with a full snapshot', () => snapshots.length > connectionsBefore && snapshots.at(-1)!.adds.size === 50, 15_000);
    expect([...snapshots.at(-1)!.adds].sort()).toEqual(pods.map((p) => p.uid).sort());
    for (const p of pods) expect(ruleset(p), `${p.name} rules rewritten`).toBe(before.get(p.uid));
    const entries = await new NftProbeSet(node.node, true).list();
    expect(entries.map((e) => `${e.ip}=${e.uid}`).sort()).toEqual(pods.flatMap((p) => [`${p.ip4}=${p.uid}`, `${p.ip6}=${p.uid}`]).sort());
    // The restored pods are not enrolled again by the informers: ztunnel got each once (the snapshot), no live add.
    await new Promise((r) => setTimeout(r, 1000));
    expect(snapshots.at(-1)!.addMessages).toBe(50);
    // The installer ran once the agent was ready: plugin binary under Istio's name, entry appended to the primary conflist.
    const { readFileSync, existsSync } = await import('node:fs');
    const conflist = () => JSON.parse(readFileSync(`${node.cniNetDir}/10-bridge.conflist`, 'utf8')) as { plugins: Array<{ type: string }> };
    expect(conflist().plugins.map((p) => p.type)).toEqual(['bridge', 'istio-cni']);
    expect(existsSync(`${node.cniBinDir}/istio-cni`)).toBe(true);
    // SIGTERM with no istio-cni-node DaemonSet: an uninstall — entry, binary and host rules go, and every
    // pod is released (its in-pod rules removed, ztunnel told) so it keeps working unredirected.
    second.child.kill('SIGTERM');
    const stopped = await second.done;
    expect(stopped.code).toBe(0);
    expect(conflist().plugins.map((p) => p.type)).toEqual(['bridge']);
    expect(existsSync(`${node.cniBinDir}/istio-cni`)).toBe(false);
    expect(execFileSync('ip', ['netns', 'exec', `${node.prefix}node`, 'nft', 'list', 'tables'], { encoding: 'utf8' })).not.toContain('istio-ambient-nat');
    for (const p of pods) expect(ruleset(p), `${p.name} released`).not.toContain('istio');
    await until('ztunnel told of every release', () => peer.active.size === 0, 5000);
    const second_ = stopped.err.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { msg: string });
    expect(second_.filter((l) => /pod (re-)?enrolled/.test(l.msg))).toEqual([]);
    expect(second_.some((l) => /startup snapshot: 50 pods, 0 repaired, 0 failed, 100 probe entries, 0 pruned/.test(l.msg))).toBe(true);
    expect(second_.some((l) => l.msg === 'uninstall: 50 pods taken out of the mesh')).toBe(true);
  }, 180_000);
});
