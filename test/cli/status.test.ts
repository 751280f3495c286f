// `podwire status` and `podwire explain` — the real CLI, as a child process, asking the real agent
// (in-process, against the real control plane, real netns and nftables, a ztunnel-like peer) over
// its root-only status socket: per pod the decision and its reason, rules verified when and by
// what, the ztunnel connection that acked it, its probe-set entries, its last drift (after a
// flushed ruleset the drift check repairs) and its last enrollment failure (a ztunnel nack) with
// its Event; per node backend, ztunnel connections, install state, queue, readiness.
import { execFileSync } from 'node:child_process';
import { lstatSync } from 'node:fs';
import { dirname } from 'node:path';
import { PatchStrategy } from '@kubernetes/client-node';
import { afterEach, expect, it } from 'vitest';
import { Agent } from '../../lib/agent/agent.js';
import { parseAgentConfig } from '../../lib/agent/config.js';
import { INSTALL_SETTINGS, parseInstallConfig } from '../../lib/install/config.js';
import type { Explanation, NodeStatus, PodStatus } from '../../lib/agent/status.js';
import { createLogging } from '../../lib/util/log.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { runCli, spawnCli } from '../helpers/cli.js';
import { adminClient, agentClient, describeKube, freshNamespace, removeNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

/** The real CLI in its own process; its stdout parsed when `json`. */
async function cli(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const r = await spawnCli(args, { timeoutMs: 60_000 }).done;
  return { code: r.code, out: r.out, err: r.err };
}

async function statusJson(socket: string): Promise<NodeStatus> {
  const r = await cli(['status', '--socket', socket, '--json']);
  expect(r.err).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.out) as NodeStatus;
}

const podOf = (s: NodeStatus, name: string): PodStatus => {
  const p = s.pods.find((x) => x.name === name);
  expect(p, name).toBeDefined();
  return p!;
};

describeKube('podwire status / explain against the real agent', () => {
  it.skipIf(!privileged('nft'))('reports every pod\'s decision, rules, ztunnel ack, probe set, drift and failure, and the node\'s state; explain says why in one paragraph', async () => {
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    cleanups.push(() => removeNamespace(admin, ns));
    const env = await node.env({ AMBIENT_DRIFT_CHECK_INTERVAL: '1s' });
    const config = parseAgentConfig(env, [], { foreign: INSTALL_SETTINGS });
    const agent = new Agent({
      config, install: parseInstallConfig(env), client: agentClient(), hostRuleRetryMs: 100,
      logging: createLogging({ levels: { default: 'info' }, json: true, sink: { write: () => undefined } }),
    });
    cleanups.push(() => agent.stop({ cleanup: true }));
    const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 200 });
    cleanups.push(() => peer.stop());

    const meshed = await node.addPod(ns, 'meshed');
    const flushed = await node.addPod(ns, 'flushed');
    const optedOut = await node.addPod(ns, 'opted-out', { 'istio.io/dataplane-mode': 'none' });
    const refused = await node.addPod(ns, 'refused');
    // ztunnel refuses this one's add: a retryable enrollment failure at stage ztunnel, with an Event.
    peer.faults.nackUids = new Map([[refused.uid, 'failed to start proxy: test']]);

    const socket = `${config.cniAgentRunDir}/status.sock`;
    await within('agent start', agent.start(), 30_000);
    peer.start();
    await until('ztunnel connected', () => agent.node?.zds?.server.connectionCount === 1);

    // Root-only: the socket is 0600 and root's, in the agent's 0700 run dir.
    const st = lstatSync(socket);
    expect(st.isSocket()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.uid).toBe(0);
    expect(lstatSync(dirname(socket)).mode & 0o077).toBe(0);

    // Before the label nothing is selected; the reason says so.
    const before = await statusJson(socket);
    expect(podOf(before, 'meshed')).toMatchObject({ state: 'not-enrolled', decision: { enroll: false, reason: 'not-selected' } });

    await admin.call({ verb: 'patch', resource: 'namespaces', name: ns },
      (o) => admin.core.patchNamespace({ name: ns, body: { metadata: { labels: { 'istio.io/dataplane-mode': 'ambient' } } } }, o),
      { contentType: PatchStrategy.MergePatch });
    // Enrolled: the whole enrollment done (the dataplane caches the pod before its last steps).
    await until('meshed and flushed enrolled', () => [meshed, flushed].every((p) => agent.podStatus.get(p.uid)?.rulesVerifiedAt), 20_000);
    await until('the refused pod failed', () => agent.podStatus.get(refused.uid)?.lastFailure, 20_000);

    const s = await statusJson(socket);
    expect(s).toMatchObject({ version: 1, node: node.name, ready: true, backend: { backend: 'nftables' } });
    // The installer ran: the plugin's entry is in the node's bridge conflist.
    expect(s.install).toEqual({ enabled: true, ready: true, configPath: `${node.cniNetDir}/10-bridge.conflist` });
    expect(s.readiness.every((r) => r.met)).toBe(true);
    expect(s.readiness.map((r) => r.condition)).toEqual(['installed', 'informersSynced', 'snapshotReconciled', 'nodeUntainted']);
    expect(s.ztunnel.socket).toBe(node.zdsPath);
    expect(s.ztunnel.connections).toHaveLength(1);
    const conn = s.ztunnel.connections[0]!;
    expect(conn).toMatchObject({ state: 'ready', pid: process.pid, uid: 0 });
    expect(s.queue).toMatchObject({ inFlight: expect.any(Number), queued: expect.any(Number) });
    expect(s.driftCheck.intervalMs).toBe(1000);

    const m = podOf(s, 'meshed');
    expect(m).toMatchObject({
      namespace: ns, uid: meshed.uid, phase: 'Running', state: 'enrolled', annotation: 'enabled',
      decision: { enroll: true, reason: 'selected', selector: 1 },
      // Verified at its enrollment, and again by every 1 s drift round since.
      rulesVerifiedBy: expect.stringMatching(/^(enrollment|drift-check)$/),
      ztunnelAck: { connection: conn.id, type: 'add' },
    });
    expect(m.probeSet.sort()).toEqual([meshed.ip4, meshed.ip6].sort());
    expect(m.netnsInode).toBe(lstatSync(meshed.netnsPath).ino);
    expect(Date.parse(m.rulesVerifiedAt!)).toBeGreaterThan(Date.parse(before.at));
    expect(podOf(s, 'opted-out')).toMatchObject({ uid: optedOut.uid, state: 'not-enrolled', probeSet: [], decision: { enroll: false, reason: 'pod-not-selected' } });
    const r = podOf(s, 'refused');
    expect(r.lastFailure).toMatchObject({ stage: 'ztunnel', retryable: true, event: { reason: 'EnrollFailed' } });
    expect(r.lastFailure!.error).toContain('failed to start proxy: test');
    // Its rules are in, but ztunnel does not hold it: not shown as enrolled.
    expect(r.state).toBe('failing');

    // Someone flushes a pod's rules: the drift check finds and repairs it; status shows both.
    execFileSync('ip', ['netns', 'exec', flushed.netnsName, 'nft', 'flush', 'ruleset']);
    await until('drift repaired', () => agent.podStatus.get(flushed.uid)?.lastDrift, 20_000);
    const after = await statusJson(socket);
    const f = podOf(after, 'flushed');
    expect(f.lastDrift).toMatchObject({ event: { reason: 'RedirectionDriftRepaired' }, failed: [] });
    expect(f.lastDrift!.repaired).toContain('rules');
    expect(f.rulesVerifiedBy).toBe('drift-check');
    expect(after.driftCheck.lastRound?.checked).toBeGreaterThanOrEqual(2);

    // The human view: one line per pod with its state and decision.
    const human = await runCli('status', '--socket', socket);
    expect(human.code).toBe(0);
    expect(human.out).toContain(`node ${node.name}: ready`);
    expect(human.out).toContain('backend: nftables');
    expect(human.out).toContain(`install: ready, ${node.cniNetDir}/10-bridge.conflist`);
    expect(human.out).toMatch(new RegExp(`${ns}\\s+meshed\\s+enrolled\\s+selected \\(entry 1\\)`));
    expect(human.out).toMatch(new RegExp(`${ns}\\s+opted-out\\s+not-enrolled\\s+pod-not-selected`));

    // explain: one actionable paragraph; exit 0 in the mesh, 3 out of it.
    const inMesh = await cli(['explain', `${ns}/meshed`, '--socket', socket]);
    expect(inMesh.code).toBe(0);
    expect(inMesh.out.trim().split('\n')).toHaveLength(1);
    expect(inMesh.out).toContain(`namespace ${ns} has istio.io/dataplane-mode=ambient`);
    expect(inMesh.out).toContain(`ztunnel connection ${conn.id} acked its add`);
    const out = await cli(['explain', `${ns}/opted-out`, '--socket', socket]);
    expect(out.code).toBe(3);
    expect(out.out).toContain('the pod has istio.io/dataplane-mode=none');
    expect(out.out).toContain(`kubectl -n ${ns} label pod opted-out istio.io/dataplane-mode-`);
    const failed = await cli(['explain', `${ns}/refused`, '--socket', socket, '--json']);
    const e = JSON.parse(failed.out) as Explanation;
    expect(e.inMesh).toBe(false);
    expect(e.text).toContain('in stage ztunnel');
    expect(e.text).toContain('Warning Event EnrollFailed');
    expect(e.text).toContain(`kubectl -n ${ns} describe pod refused`);
    const unknown = await cli(['explain', `${ns}/nonesuch`, '--socket', socket]);
    expect(unknown.code).toBe(3);
    expect(unknown.out).toContain(`knows no pod ${ns}/nonesuch`);

    // Errors: a bad pod ref is a usage error before any request; no agent: exit 1 naming the path.
    expect((await runCli('explain', 'no-slash', '--socket', socket)).code).toBe(2);
    const none = await runCli('status', '--socket', `${node.dir}/nothing.sock`);
    expect(none.code).toBe(1);
    expect(none.err).toContain(`${node.dir}/nothing.sock`);
    expect(none.err).toContain('ERR_STATUS_CONNECT');

    // Stopped: the socket is gone with the agent.
    await agent.stop({ cleanup: true });
    expect(() => lstatSync(socket)).toThrow(/ENOENT/);
  }, 120_000);
});
