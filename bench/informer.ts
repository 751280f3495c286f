// Issue benchmark: the node agent's pod informer. 5,000 pods in the cluster,
// 110 of them on our node: time to sync of the node-filtered informer
// (spec.nodeName field selector, what podwire and Istio do) against an
// unfiltered informer of all pods (what a naive agent does), and each one's
// process RSS and CPU while syncing and over a quiet period of watching.
// Each informer runs in a fresh child process, so one's heap does not count
// against the other's.
//   npm run bench -- informer [RUNS=5] [QUIET_S=20]
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1Pod } from '@kubernetes/client-node';
import { KubeClient } from '../lib/kube/client.js';
import { loadKubeconfig } from '../lib/kube/config.js';
import { Informer } from '../lib/kube/informer.js';
import { PODS, podInformer } from '../lib/kube/resources.js';
import { mapLimit } from '../lib/util/limit.js';
import { writeResults, type Series } from './lib/report.js';

const TOTAL = 5_000;
const ON_NODE = 110;
const NODE = 'bench-node';
const RUNS = Number((process.argv[2] !== '--child' && process.argv[2]) || process.env.RUNS || 5);
const QUIET_S = Number((process.argv[2] !== '--child' && process.argv[3]) || process.env.QUIET_S || 20);

interface ChildResult {
  syncMs: number;
  pods: number;
  rssBeforeMb: number;
  rssSyncedMb: number;
  cpuSyncMs: number;
  rssQuietMb?: number;
  cpuQuietPct?: number;
  heapSyncedMb: number;
}

const mb = (b: number) => Math.round(b / 1e5) / 10;

// ---- child: one informer, measured -----------------------------------------
async function child(kind: 'filtered' | 'all', kubeconfig: string, quietS: number): Promise<void> {
  const client = new KubeClient(loadKubeconfig(kubeconfig), { requestTimeoutMs: 60_000 });
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const inf: Informer<V1Pod> = kind === 'filtered' ? podInformer(client, { nodeName: NODE }) : new Informer(client, PODS);
  await inf.start().synced;
  const syncMs = performance.now() - t0;
  const c1 = process.cpuUsage(cpu0);
  global.gc?.();
  const mem = process.memoryUsage();
  const out: ChildResult = {
    syncMs, pods: inf.size, rssBeforeMb: mb(rssBefore), rssSyncedMb: mb(mem.rss), heapSyncedMb: mb(mem.heapUsed),
    cpuSyncMs: Math.round((c1.user + c1.system) / 1000),
  };
  if (quietS > 0) {
    const q0 = process.cpuUsage();
    const w0 = performance.now();
    await new Promise((r) => setTimeout(r, quietS * 1000));
    const q = process.cpuUsage(q0);
    out.cpuQuietPct = Math.round(((q.user + q.system) / 1000 / (performance.now() - w0)) * 10_000) / 100;
    out.rssQuietMb = mb(process.memoryUsage().rss);
  }
  await inf.stop();
  client.close();
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

function runChild(kind: 'filtered' | 'all', kubeconfig: string, quietS: number): Promise<ChildResult> {
  const self = fileURLToPath(import.meta.url);
  const p = spawn(process.execPath, ['--expose-gc', self, '--child', kind, kubeconfig, String(quietS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout.setEncoding('utf8').on('data', (d: string) => { out += d; });
  return new Promise((resolve, reject) => {
    p.once('error', reject);
    p.once('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!) as ChildResult) : reject(new Error(`child ${kind} exited ${code}`))));
  });
}

// ---- parent: the cluster, the runs, the report -------------------------------
async function main(): Promise<void> {
  const { startControlPlane } = await import(new URL('../../scripts/kube/controlplane.mjs', import.meta.url).href) as typeof import('../scripts/kube/controlplane.mjs');
  const dir = mkdtempSync(join(tmpdir(), 'pwt-bench-kube-'));
  const cp = await startControlPlane({ dir: join(dir, 'cp'), log: (m: string) => console.error(m) });
  const admin = new KubeClient(loadKubeconfig(cp.adminKubeconfig), { requestTimeoutMs: 30_000 });
  try {
    const namespaces = Array.from({ length: 10 }, (_, i) => `bench-${i}`);
    for (const name of namespaces) await admin.core.createNamespace({ body: { metadata: { name } } });
    const t0 = Date.now();
    // 110 on our node, the rest spread over 49 other nodes; realistic pod specs (labels, two containers).
    await mapLimit(Array.from({ length: TOTAL }, (_, i) => i), 32, async (i) => {
      const onNode = i % Math.floor(TOTAL / ON_NODE) === 0 && i / Math.floor(TOTAL / ON_NODE) < ON_NODE;
      await admin.core.createNamespacedPod({
        namespace: namespaces[i % namespaces.length]!,
        body: {
          metadata: { name: `pod-${i}`, labels: { app: `app-${i % 50}`, 'pod-template-hash': 'abcdef1234' }, annotations: { 'bench/i': String(i) } },
          spec: {
            nodeName: onNode ? NODE : `node-${i % 49}`,
            containers: [
              { name: 'app', image: 'registry.invalid/app:1.0', ports: [{ containerPort: 8080 }], env: [{ name: 'MODE', value: 'bench' }], resources: { requests: { cpu: '100m', memory: '64Mi' } } },
              { name: 'sidecar', image: 'registry.invalid/sidecar:1.0', args: ['--port', '15001'] },
            ],
          },
        },
      });
    });
    const onNodeCount = (await admin.core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${NODE}` })).items.length;
    console.log(`created ${TOTAL} pods (${onNodeCount} on ${NODE}) in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

    const series: Series[] = [];
    const variants = [
      { kind: 'filtered' as const, label: `podwire node-filtered informer: sync ${ON_NODE} of ${TOTAL} pods` },
      { kind: 'all' as const, label: `naive unfiltered informer: sync all ${TOTAL} pods` },
    ];
    for (const v of variants) {
      await runChild(v.kind, cp.adminKubeconfig, 0); // warm-up (apiserver caches, page cache)
      const runs: ChildResult[] = [];
      for (let r = 0; r < RUNS; r++) runs.push(await runChild(v.kind, cp.adminKubeconfig, 0));
      const quiet = await runChild(v.kind, cp.adminKubeconfig, QUIET_S);
      const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      const notes = {
        pods: runs[0]!.pods,
        rssBeforeMb: med(runs.map((x) => x.rssBeforeMb)),
        rssSyncedMb: med(runs.map((x) => x.rssSyncedMb)),
        rssGrowthMb: Math.round((med(runs.map((x) => x.rssSyncedMb)) - med(runs.map((x) => x.rssBeforeMb))) * 10) / 10,
        heapSyncedMb: med(runs.map((x) => x.heapSyncedMb)),
        cpuSyncMs: med(runs.map((x) => x.cpuSyncMs)),
        quietSeconds: QUIET_S,
        cpuQuietPct: quiet.cpuQuietPct,
        rssAfterQuietMb: quiet.rssQuietMb,
      };
      console.log(v.label, notes);
      series.push({ label: v.label, samples: runs.map((x) => x.syncMs * 1000), notes });
    }
    writeResults('informer', `Pod informer time to sync: ${ON_NODE} pods on the node of ${TOTAL} (field selector vs none)`, series, {
      'naive unfiltered / podwire node-filtered (time to sync)': [variants[1]!.label, variants[0]!.label],
    });
  } finally {
    admin.close();
    await cp.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === '--child') {
  await child(process.argv[3] as 'filtered' | 'all', process.argv[4]!, Number(process.argv[5]));
} else {
  await main();
}
