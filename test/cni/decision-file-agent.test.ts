// The decision file as a real Agent keeps it (lib/agent/agent.ts wiring of
// lib/cni/decision-file.ts): absent until the informers synced, there with this node's pods and
// the ambient namespace once start() resolved, current after a namespace label, and still there,
// after the agent stopped (what podwire-cni reads while no agent answers).
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { PatchStrategy } from '@kubernetes/client-node';
import { Agent } from '../../lib/agent/agent.js';
import { createLogging } from '../../lib/util/log.js';
import { AgentTestNode } from '../helpers/agent-node.js';
import { adminClient, agentClient, createPod, describeKube, freshNamespace, removeNamespace, until, within } from '../helpers/kube.js';
import { privileged } from '../helpers/privileged.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch((err: unknown) => console.error('cleanup:', err));
});

interface FileShape {
  version: number; generation: number; node: string; excludeNamespaces: string[]; meshNamespaces: string[];
  pods: Array<{ namespace: string; name: string; uid: string; mesh: boolean }>;
}

async function setNamespaceLabel(name: string, value: string | null): Promise<void> {
  const admin = adminClient();
  await admin.call({ verb: 'patch', resource: 'namespaces', name },
    (o) => admin.core.patchNamespace({ name, body: { metadata: { labels: { 'istio.io/dataplane-mode': value } } } }, o),
    { contentType: PatchStrategy.MergePatch });
}

describeKube('podwire agent: the decision file', () => {
  it.skipIf(!privileged('nft'))('appears with the right content once synced, follows a namespace label, and stays after the agent stops', async () => {
    const node = await AgentTestNode.create();
    cleanups.push(() => node.teardown());
    const admin = adminClient();
    const ambient = await freshNamespace(admin, { 'istio.io/dataplane-mode': 'ambient' });
    const plain = await freshNamespace(admin);
    cleanups.push(() => removeNamespace(admin, ambient), () => removeNamespace(admin, plain));
    // Pods bound to the node and left Pending: the file lists them, nothing needs enrolling.
    const uid = async (ns: string, name: string, labels: Record<string, string> = {}) => (await createPod(admin, ns, name, node.name, labels)).metadata!.uid!;
    const uids = {
      web: await uid(ambient, 'web'),
      optedOut: await uid(ambient, 'opted-out', { 'istio.io/dataplane-mode': 'none' }),
      optedIn: await uid(plain, 'opted-in', { 'istio.io/dataplane-mode': 'ambient' }),
      plainPod: await uid(plain, 'plain'),
    };
    const config = await node.config({ EXCLUDE_NAMESPACES: 'kube-system,pwt-excluded' });
    const agent = new Agent({ config, client: agentClient(), hostRuleRetryMs: 100, logging: createLogging({ levels: { default: 'none' }, json: true }) });
    cleanups.push(() => agent.stop({ cleanup: true }));
    const path = join(config.cniAgentRunDir, 'cni-decisions.json');
    expect(existsSync(path)).toBe(false);

    await within('agent start', agent.start(), 30_000);
    const read = () => JSON.parse(readFileSync(path, 'utf8')) as FileShape;
    const f = read();
    expect(f).toMatchObject({ version: 1, node: node.name, excludeNamespaces: ['kube-system', 'pwt-excluded'] });
    expect(f.pods).toEqual([
      { namespace: ambient, name: 'opted-out', uid: uids.optedOut, mesh: false },
      { namespace: ambient, name: 'web', uid: uids.web, mesh: true },
      { namespace: plain, name: 'opted-in', uid: uids.optedIn, mesh: true },
      { namespace: plain, name: 'plain', uid: uids.plainPod, mesh: false },
    ].sort((a, b) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : a.name < b.name ? -1 : 1)));
    // The ambient namespace, and the plain one for the pod of this node that opted in there.
    expect(f.meshNamespaces).toEqual(expect.arrayContaining([ambient, plain]));
    const st = lstatSync(path);
    expect([st.isFile(), st.uid, st.mode & 0o7777]).toEqual([true, 0, 0o600]);

    // The ambient namespace unlabelled while the agent runs: web no longer needs the plugin.
    await setNamespaceLabel(ambient, null);
    await until('the file follows the unlabel', () => {
      const g = read();
      return !g.meshNamespaces.includes(ambient) && g.pods.find((p) => p.name === 'web')?.mesh === false;
    });

    await agent.stop({ cleanup: false });
    const kept = readFileSync(path, 'utf8');
    expect(JSON.parse(kept)).toMatchObject({ version: 1, node: node.name });
    expect((JSON.parse(kept) as FileShape).meshNamespaces).toContain(plain);
    expect(lstatSync(path).isFile()).toBe(true);
  }, 90_000);
});
