// The agent's iptables variant, chosen in its host netns: the variant of an earlier agent's host chain
// when only one holds it, else as upstream does (legacy when
// iptables-legacy already holds rules there, else nft), kept in <run dir>/iptables-backend.json
// and reused, shown in podwire_backend_info and the start-up log. The "host" is the simulated
// node's pwt- netns (entered through <proc root>/1/ns/net); the rules there are made with the
// real iptables-legacy-restore / iptables-nft-restore.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { Agent } from '../../lib/agent/agent.js';
import { iptables } from '../../lib/net/xtables/iptables.js';
import { createLogging } from '../../lib/util/log.js';
import { ZtunnelPeer } from '../../lib/testing/ztunnel-peer.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { httpGet } from '../helpers/http.js';
import { adminClient, agentClient, describeKube, freshNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';
import { parsePrometheusText } from '../helpers/prometheus.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

// What kube-proxy or a node firewall leaves in the host netns (never matches: port 9).
const HOST_RULES = '*filter\n:KUBE-FIREWALL - [0:0]\n-A INPUT -j KUBE-FIREWALL\n-A KUBE-FIREWALL -p udp --dport 9 -j DROP\nCOMMIT\n';

async function setup(prepare: (node: AgentTestNode) => Promise<void> | void) {
  const node = await AgentTestNode.create();
  cleanups.push(() => node.teardown());
  await prepare(node);
  const logs: string[] = [];
  const agent = new Agent({
    config: await node.config({ NATIVE_NFTABLES: 'false', AMBIENT_DRIFT_CHECK_INTERVAL: '0' }),
    client: agentClient(), hostRuleRetryMs: 100, hostRuleAttempts: 1,
    logging: createLogging({ levels: { default: 'info' }, json: true, sink: { write: (l: string) => logs.push(l) } }),
  });
  cleanups.push(() => agent.stop({ cleanup: true }));
  await within('agent start', agent.start(), 30_000);
  return { node, agent, logs };
}

/** Which variants hold the host probe rule (the `POSTROUTING → ISTIO_POSTRT` jump), per family. */
async function hostRuleIn(node: AgentTestNode): Promise<string[]> {
  const out: string[] = [];
  for (const mode of ['legacy', 'nft'] as const) {
    for (const family of [4, 6] as const) {
      // Without -t: legacy lists only the tables that exist (asking for one would create it).
      if ((await iptables.saveText(node.node, { mode, family })).includes('-A POSTROUTING -j ISTIO_POSTRT')) out.push(`${mode}/v${family}`);
    }
  }
  return out;
}

async function backendInfo(agent: Agent): Promise<Array<Record<string, string>>> {
  const m = parsePrometheusText((await httpGet({ host: '127.0.0.1', port: agent.config.monitoringPort }, '/metrics')).body);
  return (m.get('podwire_backend_info') ?? []).filter((s) => s.value === 1).map((s) => s.labels);
}

const state = (node: AgentTestNode) => JSON.parse(readFileSync(join(node.runDir, 'iptables-backend.json'), 'utf8')) as { mode: string; v6: { mode: string } | null };

describeKube('the iptables variant the agent programs', () => {
  it.skipIf(!privileged('iptables-legacy', 'iptables-nft', 'ip6tables-legacy', 'ip6tables-nft', 'ipset'))(
    'a host netns holding legacy rules → legacy for host and in-pod rules, in the metric, the log and the state file',
    async () => {
      const { node, agent, logs } = await setup(async (n) => {
        await iptables.restore(n.node, HOST_RULES, { mode: 'legacy', family: 4 });
        await iptables.restore(n.node, HOST_RULES, { mode: 'legacy', family: 6 });
      });
      expect(await hostRuleIn(node)).toEqual(['legacy/v4', 'legacy/v6']);
      expect(await backendInfo(agent)).toEqual([{ backend: 'iptables', iptables_variant: 'legacy' }]);
      expect(agent.iptables).toMatchObject({ mode: 'legacy', detected: { source: 'detected', v6: { mode: 'legacy' } }, warnings: [] });
      expect(logs.some((l) => l.includes('iptables variant: legacy (iptables-legacy already holds rules in the host netns'))).toBe(true);
      expect(state(node)).toMatchObject({ mode: 'legacy', v6: { mode: 'legacy' } });

      // A pod enrolled now gets its in-pod rules in legacy too (upstream commits pods to the host's variant).
      const peer = new ZtunnelPeer({ path: node.zdsPath, backoffMaxMs: 200 }).start();
      cleanups.push(() => peer.stop());
      const pod = await node.addPod(await freshNamespace(adminClient(), { 'istio.io/dataplane-mode': 'ambient' }), 'app');
      await until('pod enrolled', () => agent.node?.dataplane.cache.get(pod.uid)?.netns, 20_000);
      const ns = node.openPod(pod);
      try {
        expect(await iptables.saveText(ns, { mode: 'legacy' })).toContain('-j ISTIO_OUTPUT');
        expect(await iptables.saveText(ns, { mode: 'nft' })).not.toContain('ISTIO_');
      } finally {
        ns.close();
      }
    },
  );

  it.skipIf(!privileged('iptables-legacy', 'iptables-nft', 'ip6tables-legacy', 'ip6tables-nft', 'ipset'))(
    'a host netns holding nft rules, or none → nft (upstream\'s choice without legacy rules), and no legacy table is made',
    async () => {
      for (const withRules of [true, false]) {
        const { node, agent } = await setup(async (n) => {
          if (withRules) await iptables.restore(n.node, HOST_RULES, { mode: 'nft', family: 4 });
        });
        expect(await hostRuleIn(node), `nft rules: ${withRules}`).toEqual(['nft/v4', 'nft/v6']);
        expect(agent.iptables?.mode).toBe('nft');
        expect(await iptables.save(node.node, { mode: 'legacy' })).toEqual([]);
        expect(await backendInfo(agent)).toEqual([{ backend: 'iptables', iptables_variant: 'nft' }]);
        expect(state(node)).toMatchObject({ mode: 'nft', v6: { mode: 'nft' } });
        await agent.stop({ cleanup: true });
      }
    },
  );

  it.skipIf(!privileged('iptables-legacy', 'iptables-nft', 'ip6tables-legacy', 'ip6tables-nft', 'ipset'))(
    'a node upstream\'s agent ran (its host chain in nft, a legacy table of its detection probe, no state file) → nft, so its pods\' rules are found where they are',
    async () => {
      // Upstream's host rule in nft; `iptables-legacy-save` prints a table, which alone says legacy.
      const upstreamHost = '*nat\n:ISTIO_POSTRT - [0:0]\n-A POSTROUTING -j ISTIO_POSTRT\nCOMMIT\n';
      const { node, agent, logs } = await setup(async (n) => {
        for (const family of [4, 6] as const) {
          await iptables.restore(n.node, upstreamHost, { mode: 'nft', family });
          await iptables.restore(n.node, HOST_RULES, { mode: 'legacy', family });
        }
      });
      expect(agent.iptables).toMatchObject({ mode: 'nft', detected: { source: 'host-rules', v6: { mode: 'nft' } } });
      expect(await hostRuleIn(node)).toEqual(['nft/v4', 'nft/v6']);
      expect(logs.some((l) => l.includes('iptables variant: nft (the host netns already holds an earlier agent\'s ISTIO_POSTRT chain in nft only'))).toBe(true);
      expect(state(node)).toMatchObject({ mode: 'nft', v6: { mode: 'nft' } });
    },
  );

  it.skipIf(!privileged('iptables-legacy', 'iptables-nft', 'ip6tables-legacy', 'ip6tables-nft', 'ipset'))(
    'the persisted choice is reused: an earlier start\'s legacy stays legacy on a host netns that would detect nft',
    async () => {
      const { node, agent, logs } = await setup((n) => {
        mkdirSync(n.runDir, { recursive: true, mode: 0o700 });
        writeFileSync(join(n.runDir, 'iptables-backend.json'), `${JSON.stringify({ mode: 'legacy', version: '1.8.9', v6: { mode: 'legacy', version: '1.8.9' } })}\n`);
      });
      expect(await hostRuleIn(node)).toEqual(['legacy/v4', 'legacy/v6']);
      expect(agent.iptables).toMatchObject({ mode: 'legacy', detected: { source: 'state' } });
      expect(await backendInfo(agent)).toEqual([{ backend: 'iptables', iptables_variant: 'legacy' }]);
      expect(logs.some((l) => l.includes('iptables variant: legacy (kept from an earlier start in'))).toBe(true);
    },
  );
});
