// vitest globalSetup: one real control plane (etcd + kube-apiserver, see
// scripts/kube/controlplane.mjs) per test run. Its facts go to a JSON file
// whose path is in PODWIRE_KUBE_STATE (test files read it through
// test/helpers/kube.ts). The binaries are built (once per machine) by
// scripts/test.mjs before vitest starts. PODWIRE_KUBE=off skips it outside
// CI, for quick runs of tests that do not need Kubernetes.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControlPlane, type ControlPlane } from '../../scripts/kube/controlplane.mjs';

let cp: ControlPlane | undefined;

// A run killed before its teardown leaves its state dir (its processes die with it): remove those
// of dead runs. The dir name carries the creating process's pid.
function sweepStaleStateDirs(): void {
  for (const name of readdirSync(tmpdir())) {
    const pid = /^pwt-kube-state-(\d+)-/.exec(name)?.[1];
    if (pid === undefined) continue;
    try {
      process.kill(Number(pid), 0);
    } catch (err) {
      if ((err as { code?: string }).code === 'ESRCH') rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  }
}
let stateDir: string | undefined;

export async function setup(): Promise<void> {
  const inCI = process.env.CI === 'true' || process.env.CI === '1';
  if (process.env.PODWIRE_KUBE === 'off' && !inCI) return;
  if (process.env.PODWIRE_KUBE_BUILD_FAILED === '1') throw new Error('the test control plane could not be built (see "kube:" above)');
  sweepStaleStateDirs();
  stateDir = mkdtempSync(join(tmpdir(), `pwt-kube-state-${process.pid}-`));
  cp = await startControlPlane({ dir: join(stateDir, 'cp'), log: (m) => process.stderr.write(`${m}\n`) });
  const state = join(stateDir, 'state.json');
  writeFileSync(state, JSON.stringify({
    server: cp.server, caFile: cp.caFile, adminKubeconfig: cp.adminKubeconfig, adminToken: cp.adminToken,
    agentKubeconfig: cp.agentKubeconfig, agentTokenFile: cp.agentTokenFile, etcdEndpoint: cp.etcdEndpoint, pids: cp.pids(),
  }, null, 2));
  process.env.PODWIRE_KUBE_STATE = state;
}

export async function teardown(): Promise<void> {
  await cp?.stop();
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
}
