// A real cluster on this machine: the control plane of controlplane.mjs in cluster mode, a
// kube-controller-manager and a kube-scheduler beside it (host processes that only talk to the
// apiserver on 127.0.0.1 and serve nothing), and one or more real nodes (node.mjs) joined by a
// fabric netns: a bridge that every node's eth0 plugs into, each node routing the others' pod
// CIDRs to them, so pod → pod traffic crosses nodes.
//
//   const c = await startCluster({ dir, nodes: 2, images });  ...  await c.stop();
// Used by the end-to-end tests (test/e2e/) and `npm run cluster:up`.
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBinaries, ensureNodeBinaries } from './build.mjs';
import { startControlPlane } from './controlplane.mjs';
import { removeNode, startNode } from './node.mjs';

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const FORWARDER = fileURLToPath(new URL('./forwarder.mjs', import.meta.url));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function ip(args) {
  const r = spawnSync('ip', args, { encoding: 'utf8', env: { PATH } });
  if (r.status !== 0) throw Object.assign(new Error(`ip ${args.join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`), { code: 'CLUSTER_SETUP' });
}

/** Node i (1-based): its name, netns, address on the fabric and pod CIDR. */
export function nodePlan(prefix, i) {
  return { name: `${prefix}-${i}`, netnsName: `${prefix}-${i}`, nodeIp: `10.200.0.${10 + i}`, podCidr: `10.244.${i}.0/24` };
}

function startHostProcess(bin, args, logFile, detached) {
  const fd = openSync(logFile, 'a');
  try {
    const argv = detached ? [bin, ...args] : ['setpriv', '--pdeathsig', 'KILL', '--', bin, ...args];
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', fd, fd], detached, env: { PATH } });
    child.unref();
    child.on('error', () => undefined);
    return child;
  } finally {
    closeSync(fd);
  }
}

async function killPid(pid) {
  if (!pid) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return;
  }
  for (let i = 0; i < 200; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await sleep(25);
  }
}

/**
 * Starts a cluster in `dir` (which it owns and removes on stop).
 * `images`: [{ tarball }] imported into every node's runtime; `sandboxImage`: the pause ref
 * (among `images`); `taints`: registerWithTaints for every kubelet.
 */
export async function startCluster({ dir, nodes: count = 1, images = [], sandboxImage, taints = [], detached = false, log = () => undefined, prefix, fabricNetns: fabricName }) {
  if (!dir) throw new TypeError('startCluster: dir is required');
  if (!sandboxImage) throw new TypeError('startCluster: sandboxImage is required');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  mkdirSync(join(dir, 'logs'), { recursive: true });
  const base = prefix ?? `pwt-node-${process.pid}`;
  const plans = Array.from({ length: count }, (_, k) => nodePlan(base, k + 1));
  const bins = { ...ensureBinaries({ log }), ...ensureNodeBinaries({ log }) };
  const fabricNetns = fabricName ?? `pwt-fabric-${process.pid}`;
  const started = { cp: undefined, nodes: [], host: [] };
  const stop = async () => {
    const problems = [];
    for (const n of started.nodes.reverse()) await n.stop().catch((e) => problems.push(e.message));
    for (const c of started.host) await killPid(c.pid);
    spawnSync('ip', ['netns', 'del', fabricNetns], { env: { PATH } });
    await started.cp?.stop().catch((e) => problems.push(e.message));
    rmSync(dir, { recursive: true, force: true });
    if (problems.length) throw Object.assign(new Error(`cluster stop: ${problems.join('; ')}`), { code: 'CLUSTER_STOP' });
  };
  try {
    const cp = await startControlPlane({ dir: join(dir, 'cp'), log, detached, nodes: plans.map((p) => p.name) });
    started.cp = cp;
    const apiPort = Number(new URL(cp.server).port);
    const kube = ['--kubeconfig', cp.adminKubeconfig];
    started.host.push(startHostProcess(bins.controllerManager, [...kube, '--leader-elect=false', '--secure-port=0',
      '--root-ca-file', cp.caFile, '--service-account-private-key-file', cp.saKey, '--use-service-account-credentials=false',
      '--cluster-signing-cert-file', cp.caFile, '--cluster-signing-key-file', cp.caKey,
      '--controllers', '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route', '--concurrent-deployment-syncs=5',
      '--node-monitor-grace-period=20s', '--v=1'], join(dir, 'logs', 'kube-controller-manager.log'), detached));
    started.host.push(startHostProcess(bins.scheduler, [...kube, '--leader-elect=false', '--secure-port=0', '--v=1'],
      join(dir, 'logs', 'kube-scheduler.log'), detached));

    if (!existsSync(`/run/netns/${fabricNetns}`)) ip(['netns', 'add', fabricNetns]);
    ip(['-n', fabricNetns, 'link', 'set', 'lo', 'up']);
    ip(['-n', fabricNetns, 'link', 'add', 'br0', 'type', 'bridge']);
    ip(['-n', fabricNetns, 'link', 'set', 'br0', 'up']);
    const cluster = { fabricNetns, caFile: cp.caFile, apiPort, forwarderScript: FORWARDER };
    for (const plan of plans) {
      started.nodes.push(await startNode({
        ...plan, dir: join(dir, 'nodes', plan.name), cluster, token: cp.nodeTokens[plan.name], kubelet: bins.kubelet,
        sandboxImage, taints, detached, log,
      }));
    }
    // Each node routes the others' pod CIDRs to them over the fabric.
    for (const a of plans) {
      for (const b of plans) if (a !== b) ip(['-n', a.netnsName, 'route', 'replace', b.podCidr, 'via', b.nodeIp, 'dev', 'eth0']);
    }
    for (const n of started.nodes) for (const img of images) n.importImage(img.tarball);
    await waitNodesReady(cp, plans.map((p) => p.name), 120_000);
    const kubectl = (args, o = {}) => {
      // Its discovery cache in the cluster's dir: without HOME kubectl would write ./.kube wherever it runs.
      const r = spawnSync(bins.kubectl, ['--kubeconfig', cp.adminKubeconfig, '--cache-dir', join(dir, 'kubectl-cache'), ...args],
        { encoding: 'utf8', input: o.input, timeout: o.timeoutMs ?? 60_000, env: { PATH, HOME: dir } });
      if (r.status !== 0 && !o.allowFail) throw Object.assign(new Error(`kubectl ${args.join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`), { code: 'KUBECTL', stderr: r.stderr });
      return r;
    };
    const record = () => ({
      dir, fabricNetns, server: cp.server, caFile: cp.caFile, adminKubeconfig: cp.adminKubeconfig, kubectl: bins.kubectl,
      hostPids: [...started.host.map((c) => c.pid), ...Object.values(cp.pids())].filter(Boolean),
      nodes: started.nodes.map((n) => ({ ...n.record(), nodeIp: n.nodeIp, podCidr: n.podCidr })),
    });
    writeFileSync(join(dir, 'cluster.json'), `${JSON.stringify(record(), null, 2)}\n`);
    return { dir, cp, nodes: started.nodes, bins, kubectl, stop, record };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}

/**
 * Removes a cluster from its record (cluster.record(), or `<dir>/cluster.json`) in a process
 * that did not start it: every node (processes, cgroups, netns, dir), the controller-manager,
 * scheduler, apiserver and etcd, the fabric netns and the cluster's dir. Idempotent.
 */
export async function removeCluster(record) {
  const problems = [];
  for (const n of [...record.nodes].reverse()) await removeNode(n).catch((e) => problems.push(e.message));
  for (const pid of record.hostPids ?? []) await killPid(pid);
  spawnSync('ip', ['netns', 'del', record.fabricNetns], { env: { PATH } });
  rmSync(record.dir, { recursive: true, force: true });
  if (problems.length) throw Object.assign(new Error(`cluster stop: ${problems.join('; ')}`), { code: 'CLUSTER_STOP' });
}

/** Waits until every named Node reports Ready=True. */
export async function waitNodesReady(cp, names, timeoutMs) {
  const end = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const r = await cp.admin('GET', '/api/v1/nodes').catch((e) => ({ status: 0, body: e.message }));
    if (r.status === 200) {
      const ready = new Set(r.body.items.filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).map((n) => n.metadata.name));
      if (names.every((n) => ready.has(n))) return;
      last = `ready: [${[...ready].join(', ')}] of [${names.join(', ')}]`;
    }
    if (Date.now() > end) throw Object.assign(new Error(`nodes not Ready after ${timeoutMs} ms (${last})`), { code: 'CLUSTER_START' });
    await sleep(250);
  }
}
