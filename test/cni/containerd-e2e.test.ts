// podwire end to end through a real runtime: containerd + runc over CRI in a
// pwt- node netns, the test playing the kubelet (Pod object, then
// RunPodSandbox, then the status patch), a conflist of Debian's bridge +
// host-local into which the real installer writes podwire's entry, and the
// real podwire-cni forwarding to the in-process agent.
// - an ambient pod's sandbox comes up already redirected (before any container runs);
// - a sidecar pod gets istio-init's rules; a plain pod and an excluded one are untouched;
// - agent down: the ambient sandbox fails with the plugin's error and nothing is left, an
//   excluded pod still starts, and once the agent is back the retried sandbox is redirected;
// - a conflist rewritten without our entry gets it back; uninstall removes entry and binary.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { V1Container } from '@kubernetes/client-node';
import { Agent } from '../../lib/agent/agent.js';
import { createLogging } from '../../lib/util/log.js';
import { hostPort, tcpProbe } from '../../lib/demo/traffic.js';
import { parseInstallConfig } from '../../lib/install/config.js';
import { sidecarConfigFromPod } from '../../lib/redirect/annotations.js';
import { verify } from '../../lib/redirect/apply.js';
import { sidecarRules } from '../../lib/redirect/sidecar.js';
import { patchPodStatus } from '../../lib/kube/pods.js';
import { REDIRECTION_ANNOTATION } from '../../lib/mesh/constants.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { bridgeConflist, debianCniAvailable, makeCniBinDir, writeConflist } from '../helpers/cni-fixtures.js';
import { CONTAINERD_TOOLS, startContainerd, type Containerd, type Sandbox } from '../helpers/containerd.js';
import { GrpcError } from '../helpers/grpc.js';
import { adminClient, agentClient, createPod, describeKube, removeNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const inCI = process.env.CI === 'true' || process.env.CI === '1';
const SHIM = join(process.cwd(), 'build/Release/podwire-cni');

function prerequisites(): boolean {
  if (!privileged(...CONTAINERD_TOOLS, 'nft', 'iptables-save')) return false;
  const gone = [...(debianCniAvailable() ? [] : ['containernetworking-plugins']), ...(existsSync(SHIM) ? [] : [SHIM])];
  if (gone.length === 0) return true;
  if (inCI) throw new Error(`containerd e2e needs: ${gone.join(', ')} (CI=true: refusing to skip)`);
  process.stderr.write(`SKIPPING containerd e2e: needs ${gone.join(', ')}\n`);
  return false;
}

const GATEWAY = '10.88.9.1';
const conflistPath = (confDir: string) => join(confDir, '10-pwt.conflist');
const pluginTypes = (confDir: string) => (JSON.parse(readFileSync(conflistPath(confDir), 'utf8')) as { plugins: Array<{ type: string }> }).plugins.map((p) => p.type);

describeKube('podwire through containerd + CRI', () => {
  const ok = prerequisites();
  let node: AgentTestNode;
  let ctrd: Containerd;
  let work = '';
  let confDir = '';
  let binDir = '';
  let agent: Agent | undefined;
  let peer: ZtunnelPeer;
  let ambientNs = '';
  let plainNs = '';
  let excludedNs = '';
  let env: Record<string, string> = {};
  const quiet = () => createLogging({ levels: { default: 'none' }, json: true });

  async function startAgent(): Promise<Agent> {
    const { parseAgentConfig } = await import('../../lib/agent/config.js');
    const { INSTALL_SETTINGS } = await import('../../lib/install/config.js');
    const a = new Agent({
      config: parseAgentConfig(env, [], { foreign: INSTALL_SETTINGS }), install: parseInstallConfig(env),
      client: agentClient(), logging: quiet(), hostRuleRetryMs: 100,
    });
    await within('agent start', a.start(), 30_000);
    return a;
  }

  /** The kubelet's part: the Pod object first, then the sandbox, then the status with its IPs. */
  async function kubeletRun(namespace: string, name: string, body: { annotations?: Record<string, string>; containers?: V1Container[] } = {}): Promise<{ sb: Sandbox; uid: string }> {
    const admin = adminClient();
    const created = body.containers
      ? await admin.core.createNamespacedPod({ namespace, body: { metadata: { name, annotations: body.annotations ?? {} }, spec: { nodeName: node.name, terminationGracePeriodSeconds: 0, containers: body.containers } } })
      : await createPod(admin, namespace, name, node.name);
    const uid = created.metadata!.uid!;
    const sb = await ctrd.runPod({ name, namespace, uid });
    await patchPodStatus(admin, { namespace, name }, { status: { phase: 'Running', podIP: sb.ip, podIPs: sb.ips.map((ip) => ({ ip })) } });
    return { sb, uid };
  }

  async function outbound(sb: Sandbox): Promise<{ by: string; uid?: string; port?: number; origDst?: string }> {
    const ns = Netns.open(sb.hostNetnsPath);
    try {
      return await tcpProbe(ns, GATEWAY, 8080, { timeoutMs: 2000 }).catch((err: Error) => ({ by: `error: ${err.message}` }));
    } finally {
      ns.close();
    }
  }

  const nftTables = (sb: Sandbox) => execFileSync('nsenter', [`--net=${sb.hostNetnsPath}`, 'nft', 'list', 'tables'], { encoding: 'utf8' });
  const natRules = (sb: Sandbox) => execFileSync('nsenter', [`--net=${sb.hostNetnsPath}`, 'iptables-save', '-t', 'nat'], { encoding: 'utf8' });

  beforeAll(async () => {
    if (!ok) return;
    node = await AgentTestNode.create();
    work = mkdtempSync(join(tmpdir(), `pwt-cnie2e-${process.pid}-`));
    confDir = join(work, 'net.d');
    mkdirSync(confDir);
    binDir = makeCniBinDir(join(work, 'bin'));
    writeConflist(confDir, bridgeConflist({ bridge: 'pwtcbr9', subnet4: '10.88.9.0/24', subnet6: 'fd00:88:9::/64', ipamDir: join(work, 'ipam') }));
    ctrd = await startContainerd({ nodeNetns: `${node.prefix}node`, cniConfDir: confDir, cniBinDir: binDir });
    const admin = adminClient();
    // Namespaces for the whole file (freshNamespace's are per test); removed in afterAll.
    const ns = async (suffix: string, labels: Record<string, string> = {}) => {
      const name = `pwt-${process.pid}-e2e-${suffix}`;
      await admin.core.createNamespace({ body: { metadata: { name, labels } } });
      return name;
    };
    ambientNs = await ns('ambient', { 'istio.io/dataplane-mode': 'ambient' });
    plainNs = await ns('plain');
    excludedNs = await ns('excluded', { 'istio.io/dataplane-mode': 'ambient' });
    env = await node.env({
      HOST_MOUNTS_ROOT: ctrd.hostMountsRoot, MOUNTED_CNI_NET_DIR: confDir, CNI_BIN_TARGET_DIRS: binDir, CNI_PLUGIN_BINARY: SHIM,
      EXCLUDE_NAMESPACES: excludedNs, PLUGIN_AGENT_WAIT: '1s', AMBIENT_DRIFT_CHECK_INTERVAL: '0',
    });
    peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 100 });
    agent = await startAgent();
    peer.start();
    await until('ztunnel connected', () => agent!.node?.zds?.server.connectionCount === 1);
  }, 120_000);

  afterAll(async () => {
    await peer?.stop();
    await agent?.stop({ cleanup: true });
    await ctrd?.stop();
    const admin = adminClient();
    for (const ns of [ambientNs, plainNs, excludedNs]) if (ns) await removeNamespace(admin, ns).catch(() => undefined);
    await node?.teardown();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  it.skipIf(!ok)('the installer put podwire-cni into the chain under Istio\'s name', () => {
    expect(pluginTypes(confDir)).toEqual(['bridge', 'istio-cni']);
    expect(readFileSync(join(binDir, 'istio-cni')).equals(readFileSync(SHIM))).toBe(true);
    expect(agent!.readiness.unmet()).toEqual([]);
  });

  it.skipIf(!ok)('an ambient pod\'s sandbox comes up already redirected, before any container runs', async () => {
    const { sb, uid } = await kubeletRun(ambientNs, 'web');
    // No container was created: the redirection is there as soon as RunPodSandbox returns.
    expect(peer.active.has(uid)).toBe(true);
    expect(await outbound(sb)).toMatchObject({ by: 'ztunnel', uid, port: 15001, origDst: hostPort(GATEWAY, 8080) });
    const p = await adminClient().core.readNamespacedPod({ namespace: ambientNs, name: 'web' });
    expect(p.metadata?.annotations?.[REDIRECTION_ANNOTATION]).toBe('enabled');
    await ctrd.removePod(sb.id);
    await until('unenrolled on DEL', () => !agent!.node!.dataplane.cache.has(uid));
  }, 30_000);

  it.skipIf(!ok)('a sidecar pod gets istio-init\'s rules; a plain pod and an excluded-namespace pod are untouched', async () => {
    const made: Sandbox[] = [];
    try {
      const sidecar = await kubeletRun(plainNs, 'with-sidecar', {
        annotations: { 'sidecar.istio.io/status': '{}' },
        containers: [{ name: 'app', image: 'registry.invalid/a:1' }, { name: 'istio-proxy', image: 'registry.invalid/p:1', args: ['proxy', 'sidecar'] }],
      });
      made.push(sidecar.sb);
      // The plugin entry says native_nftables (NATIVE_NFTABLES=true): Istio's nftables sidecar tables.
      expect(nftTables(sidecar.sb)).toContain('table inet istio-proxy-nat');
      const { dualStack: _d, ...cfg } = sidecarConfigFromPod({ annotations: { 'sidecar.istio.io/status': '{}' }, podIps: sidecar.sb.ips });
      const podNs = Netns.open(sidecar.sb.hostNetnsPath);
      try {
        expect((await verify(podNs, sidecarRules(cfg), { backend: 'nftables' })).drift).toEqual([]);
      } finally {
        podNs.close();
      }
      expect(peer.active.has(sidecar.uid)).toBe(false);
      const plain = await kubeletRun(plainNs, 'plain');
      made.push(plain.sb);
      const excluded = await kubeletRun(excludedNs, 'excluded');
      made.push(excluded.sb);
      for (const { sb, uid } of [plain, excluded]) {
        expect(nftTables(sb)).not.toContain('istio');
        expect(natRules(sb)).not.toContain('ISTIO');
        expect(peer.active.has(uid)).toBe(false);
        expect((await outbound(sb)).by).not.toBe('ztunnel');
      }
    } finally {
      for (const sb of made) await ctrd.removePod(sb.id);
    }
  }, 30_000);

  it.skipIf(!ok)('agent down: an ambient sandbox fails with the plugin\'s error and leaves nothing, an excluded pod starts; back up, the retry is redirected', async () => {
    await agent!.stop({ cleanup: false });  // an upgrade: entry and binary stay
    agent = undefined;
    expect(pluginTypes(confDir)).toEqual(['bridge', 'istio-cni']);
    const admin = adminClient();
    const created = await createPod(admin, ambientNs, 'while-down', node.name);
    const uid = created.metadata!.uid!;
    // The bridge plugin's veths (the bridge itself stays, as on a node).
    const links = async () => (await (await node.node.netlink()).links.list()).map((l) => l.name).filter((n) => n.startsWith('veth')).sort();
    const linksBefore = await links();
    const t0 = Date.now();
    const err = await ctrd.runPod({ name: 'while-down', namespace: ambientNs, uid }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(GrpcError);
    expect((err as GrpcError).details).toContain('node agent not reachable');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);  // it waited agent_wait_ms (1 s) for the agent first
    expect(await ctrd.cri.listPodSandbox({})).toEqual(expect.not.arrayContaining([expect.objectContaining({ metadata: expect.objectContaining({ name: 'while-down' }) })]));
    expect(await links()).toEqual(linksBefore);  // no veth left on the node
    expect(ctrd.exec(['sh', '-c', 'ls /var/run/netns | wc -l']).stdout.trim()).toBe('0');  // no netns pin left
    const { readdirSync } = await import('node:fs');
    const leaseDir = join(work, 'ipam', 'pwt-net');
    expect((existsSync(leaseDir) ? readdirSync(leaseDir) : []).filter((f) => f.startsWith('10.88.9.'))).toEqual([]);  // DEL released the lease
    const excluded = await kubeletRun(excludedNs, 'excluded-while-down');
    expect(excluded.sb.ip).toMatch(/^10\.88\.9\./);
    await ctrd.removePod(excluded.sb.id);

    // The shim queued the DELs it could not hand over (the failed sandbox's, the excluded pod's); the next agent drains them.
    const queued = readdirSync(join(node.runDir, 'cni-del-queue')).filter((f) => f.endsWith('.json'));
    expect(queued.length).toBeGreaterThanOrEqual(2);
    agent = await startAgent();
    expect(readdirSync(join(node.runDir, 'cni-del-queue')).filter((f) => f.endsWith('.json'))).toEqual([]);
    await until('ztunnel reconnected', () => agent!.node?.zds?.server.connectionCount === 1, 10_000);
    const sb = await ctrd.runPod({ name: 'while-down', namespace: ambientNs, uid });  // the kubelet's retry
    expect(await outbound(sb)).toMatchObject({ by: 'ztunnel', uid, port: 15001 });
    await ctrd.removePod(sb.id);
  }, 60_000);

  it.skipIf(!ok)('a conflist rewritten without our entry gets it back within a second; uninstall removes entry and binary', async () => {
    agent ??= await startAgent();
    writeConflist(confDir, bridgeConflist({ bridge: 'pwtcbr9', subnet4: '10.88.9.0/24', subnet6: 'fd00:88:9::/64', ipamDir: join(work, 'ipam') }));
    const t0 = Date.now();
    await until('entry re-inserted', () => pluginTypes(confDir).includes('istio-cni'), 5_000);
    expect(Date.now() - t0).toBeLessThan(2_000);
    // Another component that keeps doing it: after more than 5 throttled reinstalls in a row, a warning and the metric.
    const loops0 = (await agent!.metrics.installRevertLoops.get()).values[0]?.value ?? 0;
    for (let i = 0; i < 8 && ((await agent!.metrics.installRevertLoops.get()).values[0]?.value ?? 0) === loops0; i++) {
      writeConflist(confDir, bridgeConflist({ bridge: 'pwtcbr9', subnet4: '10.88.9.0/24', subnet6: 'fd00:88:9::/64', ipamDir: join(work, 'ipam') }));
      await until('entry re-inserted', () => pluginTypes(confDir).includes('istio-cni'), 5_000);
    }
    expect((await agent!.metrics.installRevertLoops.get()).values[0]?.value).toBe(loops0 + 1);
    await agent!.stop({ cleanup: true });
    agent = undefined;
    expect(pluginTypes(confDir)).toEqual(['bridge']);
    expect(existsSync(join(binDir, 'istio-cni'))).toBe(false);
  }, 60_000);
});
