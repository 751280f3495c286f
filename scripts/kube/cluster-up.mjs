#!/usr/bin/env node
// `npm run cluster:up [-- --nodes N]`: the end-to-end tests' cluster (cluster.mjs), left running
// for exploring by hand: a control plane with controller-manager and scheduler, N kubelet nodes
// (default 2) in pwt-up-<i> netns with pause, busybox and podwire's image imported, and a
// `podwire ztunnel-sim` per node holding the node's ZDS socket as ztunnel would. State in
// ~/.cache/podwire/kube/cluster/ (cluster.json); `npm run cluster:down` removes all of it.
import { closeSync, existsSync, openSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir, ensureHelm } from './build.mjs';
import { startCluster } from './cluster.mjs';
import { clusterImages, VERSION } from './images.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const dir = join(cacheDir(), 'cluster');
const usage = 'Usage: npm run cluster:up [-- --nodes N]   (N from 1 to 4, default 2)';

function parse(argv) {
  let nodes = 2;
  for (let i = 0; i < argv.length; i++) {
    const [k, inline] = argv[i].split(/=(.*)/s, 2);
    if (k === '--nodes') {
      const v = inline ?? argv[++i];
      if (!/^[1-4]$/.test(v ?? '')) throw new Error(`--nodes needs 1 to 4, got ${JSON.stringify(v)}\n${usage}`);
      nodes = Number(v);
    } else if (k === '-h' || k === '--help') {
      console.log(usage);
      process.exit(0);
    } else {
      throw new Error(`unknown argument ${JSON.stringify(argv[i])}\n${usage}`);
    }
  }
  return { nodes };
}

try {
  const { nodes } = parse(process.argv.slice(2));
  if (existsSync(dir)) {
    throw new Error(`a cluster is already up (or half removed) in ${dir}; npm run cluster:down first`);
  }
  const { images, sandboxImage } = clusterImages();
  const c = await startCluster({ dir, nodes, images, sandboxImage, detached: true, prefix: 'pwt-up', fabricNetns: 'pwt-up-fabric', log: (m) => console.error(m) });
  const sims = c.nodes.map((n) => {
    const fd = openSync(join(n.dir, 'logs', 'ztunnel-sim.log'), 'a');
    try {
      const child = spawn(process.execPath, [join(root, 'bin/podwire.js'), 'ztunnel-sim', '--socket', join(n.dir, 'ztunnel', 'ztunnel.sock')],
        { stdio: ['ignore', fd, fd], detached: true });
      child.unref();
      return child.pid;
    } finally {
      closeSync(fd);
    }
  });
  const record = c.record();
  record.hostPids.push(...sims);
  writeFileSync(join(dir, 'cluster.json'), `${JSON.stringify(record, null, 2)}\n`);
  const helm = ensureHelm();
  console.log(`cluster up: ${c.nodes.map((n) => `${n.name} (${n.nodeIp}, pods ${n.podCidr})`).join(', ')}`);
  console.log(`  export KUBECONFIG=${c.cp.adminKubeconfig}`);
  console.log(`  kubectl: ${c.bins.kubectl}`);
  console.log(`  install podwire: ${helm} install podwire deploy/chart/podwire -n istio-system --create-namespace --set hub=localhost --set tag=${VERSION}`);
  for (const n of record.nodes) console.log(`  a shell on ${n.name}: nsenter -t ${n.pids[0]} -m -p -n -r -w`);
  console.log('  logs: <node dir>/logs/{kubelet,containerd,ztunnel-sim}.log, <node dir>/pod-logs/');
  console.log('stop it with: npm run cluster:down');
} catch (err) {
  console.error(`cluster:up: ${err.message}`);
  process.exit(1);
}
