#!/usr/bin/env node
// `npm run kube:up`: a test control plane for exploring by hand, left running
// (state in ~/.cache/podwire/kube/run/); `npm run kube:down` stops it.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from './build.mjs';
import { startControlPlane } from './controlplane.mjs';

const dir = join(cacheDir(), 'run');
if (existsSync(join(dir, 'state.json'))) {
  console.error(`kube:up: a control plane is already up (${join(dir, 'state.json')}); npm run kube:down first`);
  process.exit(1);
}
try {
  const cp = await startControlPlane({ dir, detached: true, log: (m) => console.error(m) });
  const state = { server: cp.server, caFile: cp.caFile, adminKubeconfig: cp.adminKubeconfig, agentKubeconfig: cp.agentKubeconfig,
    agentTokenFile: cp.agentTokenFile, etcdEndpoint: cp.etcdEndpoint, pids: cp.pids() };
  writeFileSync(join(dir, 'state.json'), `${JSON.stringify(state, null, 2)}\n`);
  console.log(`kube-apiserver ${cp.server} (etcd ${cp.etcdEndpoint})`);
  console.log(`admin:  KUBECONFIG=${cp.adminKubeconfig}`);
  console.log(`agent:  KUBECONFIG=${cp.agentKubeconfig}   (ServiceAccount istio-system/podwire-agent)`);
  console.log('stop it with: npm run kube:down');
} catch (err) {
  console.error(`kube:up: ${err.message}`);
  process.exit(1);
}
