// The agent's nftables host probe rule matches the kubelet's UID, found as upstream finds it: a
// process named kubelet under HOST_PROC_ROOT (here the simulated node's proc root, with the test
// writing the kubelet's entry as it writes the pods'), KUBELET_UID over it, and no start without
// one (nftables only). The rule is read back from the node's pwt- netns with `nft -j`.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { Agent, AgentStartError } from '../../lib/agent/agent.js';
import { KubeletUidError } from '../../lib/agent/kubelet-uid.js';
import type { AgentConfig } from '../../lib/agent/config.js';
import { createLogging } from '../../lib/util/log.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { agentClient, describeKube, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

const KUBELET_PID = 500;  // below the pods' fake pids (1000 + i)

/** The kubelet's proc entry, as the kernel shows it. */
function addKubelet(node: AgentTestNode, uid: number, pid = KUBELET_PID): void {
  const dir = join(node.procRoot, String(pid));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'comm'), 'kubelet\n');
  writeFileSync(join(dir, 'cmdline'), '/usr/bin/kubelet\0--config=/var/lib/kubelet/config.yaml\0');
  writeFileSync(join(dir, 'status'), `Name:\tkubelet\nState:\tS (sleeping)\nPid:\t${pid}\nPPid:\t1\nUid:\t${uid}\t${uid}\t${uid}\t${uid}\nGid:\t0\t0\t0\t0\n`);
  writeFileSync(join(dir, 'cgroup'), '0::/system.slice/kubelet.service\n');
}

/** The UIDs the node's nftables rules match with `meta skuid`. */
async function skuids(node: AgentTestNode): Promise<number[]> {
  const r = await node.node.spawn(['nft', '-j', 'list', 'ruleset'], { timeoutMs: 10_000 });
  expect(r.code, r.stderr).toBe(0);
  const out: number[] = [];
  for (const item of (JSON.parse(r.stdout) as { nftables: Array<{ rule?: { expr: unknown[] } }> }).nftables) {
    for (const e of item.rule?.expr ?? []) {
      const m = (e as { match?: { left?: { meta?: { key?: string } }; right?: unknown } }).match;
      if (m?.left?.meta?.key === 'skuid') out.push(m.right as number);
    }
  }
  return out;
}

async function setup(env: Record<string, string>, opts: { hostRuleAttempts?: number; sink?: (line: string) => void } = {}) {
  const node = await AgentTestNode.create();
  cleanups.push(() => node.teardown());
  // KUBELET_UID empty: look the kubelet up (the test helpers' default is an override, 0).
  const config: AgentConfig = await node.config({ KUBELET_UID: '', AMBIENT_DRIFT_CHECK_INTERVAL: '0', ...env });
  const logs: string[] = [];
  const agent = new Agent({
    config, client: agentClient(), hostRuleRetryMs: 100, hostRuleAttempts: opts.hostRuleAttempts ?? 1,
    logging: createLogging({ levels: { default: 'info' }, json: true, sink: { write: (l: string) => { logs.push(l); opts.sink?.(l); } } }),
  });
  cleanups.push(() => agent.stop({ cleanup: true }));
  return { node, agent, logs };
}

describeKube('the kubelet UID of the nftables host probe rule', () => {
  it.skipIf(!privileged('nft'))('is the kubelet process\'s real UID, found under HOST_PROC_ROOT', async () => {
    const { node, agent, logs } = await setup({});
    addKubelet(node, 4321);
    await within('agent start', agent.start(), 30_000);
    expect(agent.backend).toBe('nftables');
    expect(await skuids(node)).toEqual([4321, 4321]);  // the IPv4 and IPv6 rules
    expect(agent.kubeletUid).toMatchObject({ uid: 4321, source: 'process', processes: [{ pid: KUBELET_PID, name: 'kubelet' }] });
    expect(logs.some((l) => l.includes(`kubelet uid 4321 (kubelet pid ${KUBELET_PID})`))).toBe(true);
  });

  it.skipIf(!privileged('nft'))('KUBELET_UID wins over the process', async () => {
    const { node, agent } = await setup({ KUBELET_UID: '777' });
    addKubelet(node, 4321);
    await within('agent start', agent.start(), 30_000);
    expect(await skuids(node)).toEqual([777, 777]);
    expect(agent.kubeletUid).toMatchObject({ uid: 777, source: 'setting' });
  });

  it.skipIf(!privileged('nft'))('no kubelet: the start fails at the host probe rules with KubeletUidError, and nothing is programmed', async () => {
    const { node, agent } = await setup({});
    const err = await agent.start().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(AgentStartError);
    expect(err).toMatchObject({ code: 'ERR_AGENT_START', stage: 'host probe rules' });
    const cause = (err as AgentStartError).cause;
    expect(cause).toBeInstanceOf(KubeletUidError);
    expect(cause).toMatchObject({ code: 'ERR_KUBELET_NOT_FOUND', procRoot: node.procRoot });
    expect(await skuids(node)).toEqual([]);
  });

  it.skipIf(!privileged('nft'))('a kubelet that starts after the agent is found by the next attempt', async () => {
    let node: AgentTestNode | undefined;
    const s = await setup({}, {
      hostRuleAttempts: 2,
      // The first attempt's retry line is written before the agent waits: the kubelet "starts" then.
      sink: (l) => { if (l.includes('host probe rules (attempt 1/2)')) addKubelet(node!, 1500); },
    });
    node = s.node;
    await within('agent start', s.agent.start(), 30_000);
    expect(await skuids(node)).toEqual([1500, 1500]);
    expect(s.logs.some((l) => l.includes('no kubelet (or kubelite) process'))).toBe(true);
  });

  it.skipIf(!privileged('ipset'))('the iptables backend needs no kubelet (its rule matches --socket-exists)', async () => {
    const { agent } = await setup({ NATIVE_NFTABLES: 'false' });
    await within('agent start', agent.start(), 30_000);
    expect(agent.backend).toBe('iptables');
    expect(agent.kubeletUid).toBeUndefined();
  });
});
