#!/usr/bin/env node
// Builds the test control plane's binaries — kube-apiserver and etcd —, the
// real node's — kubelet, kube-controller-manager, kube-scheduler, kubectl
// (scripts/kube/cluster.mjs) — and helm (the chart tests) from their published
// Go modules through the Go module proxy, and caches them
// under ~/.cache/podwire/kube/bin/ keyed by version and by the hash of our
// wrapper module (go.mod + go.sum in scripts/kube/modules/<name>/), so only
// the first run on a machine pays. Nothing of those projects is in this
// repo: only the wrapper modules, which pin the release and point each
// locally-replaced module of theirs at its published version.
//   node scripts/kube/build.mjs          builds what is missing, prints the paths
//   import { ensureBinaries, ensureNodeBinaries, ensureHelm } from './build.mjs'
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

/** What we build: the wrapper module dir, the package to build, and the version it pins. */
export const COMPONENTS = {
  'kube-apiserver': {
    module: 'modules/kube-apiserver', pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', version: 'v1.36.3',
    // What a release build stamps (the apiserver reports and compares its own version).
    ldflags: ['-X k8s.io/component-base/version.gitVersion=v1.36.3', '-X k8s.io/component-base/version.gitMajor=1',
      '-X k8s.io/component-base/version.gitMinor=36', '-X k8s.io/component-base/version.gitTreeState=clean'],
  },
  // The real node's parts (scripts/kube/node.mjs, cluster.mjs): same release, one wrapper module.
  ...Object.fromEntries(['kubelet', 'kube-controller-manager', 'kube-scheduler', 'kubectl'].map((name) => [name, {
    module: 'modules/kube-node', pkg: `k8s.io/kubernetes/cmd/${name}`, version: 'v1.36.3',
    ldflags: ['-X k8s.io/component-base/version.gitVersion=v1.36.3', '-X k8s.io/component-base/version.gitMajor=1',
      '-X k8s.io/component-base/version.gitMinor=36', '-X k8s.io/component-base/version.gitTreeState=clean'],
  }])),
  etcd: { module: 'modules/etcd', pkg: 'go.etcd.io/etcd/server/v3', version: 'v3.6.16', ldflags: [] },
  helm: {
    module: 'modules/helm', pkg: 'helm.sh/helm/v3/cmd/helm', version: 'v3.22.0',
    // What helm's Makefile stamps: its version, and the Kubernetes version `helm template` and
    // `helm lint` assume without a cluster (client-go v0.37 → 1.37; unstamped it is 1.20).
    ldflags: ['-X helm.sh/helm/v3/internal/version.version=v3.22.0', '-X helm.sh/helm/v3/internal/version.gitTreeState=clean',
      '-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1', '-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37',
      '-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1', '-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37'],
  },
};

export function cacheDir() {
  return process.env.PODWIRE_KUBE_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'podwire', 'kube');
}

function binaryPath(name) {
  const c = COMPONENTS[name];
  const dir = join(here, c.module);
  const hash = createHash('sha256').update(JSON.stringify(c)).update(readFileSync(join(dir, 'go.mod'))).update(readFileSync(join(dir, 'go.sum'))).digest('hex').slice(0, 12);
  return join(cacheDir(), 'bin', `${name}-${c.version}-${hash}`);
}

function readPeakRssKb(stderr) {
  const m = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr);
  return m ? Number(m[1]) : undefined;
}

/** Builds one component unless cached; returns its path and, when built now, what the build cost. */
export function ensureBinary(name, { log = (m) => process.stderr.write(`${m}\n`) } = {}) {
  const out = binaryPath(name);
  if (existsSync(out)) return { path: out, built: false };
  const c = COMPONENTS[name];
  const go = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (go.status !== 0) throw Object.assign(new Error(`building ${name} needs Go (go version failed: ${go.error?.message ?? go.stderr})`), { code: 'KUBE_BUILD_NO_GO' });
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.tmp-${process.pid}`;
  log(`kube: building ${name} ${c.version} from the Go module proxy (first run on this machine only; ${go.stdout.trim()})`);
  const t0 = Date.now();
  // /usr/bin/time -v reports the build's peak memory (of the largest process: the compiler or linker).
  const timeBin = existsSync('/usr/bin/time') ? ['/usr/bin/time', '-v'] : [];
  const args = [...timeBin, 'go', 'build', '-mod=readonly', '-trimpath', `-ldflags=-s -w ${c.ldflags.join(' ')}`, '-o', tmp, c.pkg];
  const r = spawnSync(args[0], args.slice(1), {
    cwd: join(here, c.module),
    encoding: 'utf8',
    env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-buildvcs=false' },
    stdio: ['ignore', 'inherit', 'pipe'],
    maxBuffer: 64 * 1024 * 1024,
  });
  const seconds = Math.round((Date.now() - t0) / 1000);
  const stderr = r.stderr ?? '';
  if (r.status !== 0) {
    rmSync(tmp, { force: true });
    process.stderr.write(stderr.split('\n').filter((l) => !/^\s+\S.*: /.test(l) || /error|cannot|undefined/i.test(l)).slice(-40).join('\n'));
    throw Object.assign(new Error(`building ${name} ${c.version} failed (exit ${r.status}) after ${seconds}s`), { code: 'KUBE_BUILD_FAILED' });
  }
  renameSync(tmp, out);
  const peakRssMb = (() => { const kb = readPeakRssKb(stderr); return kb ? Math.round(kb / 1024) : undefined; })();
  const record = { name, version: c.version, seconds, peakRssMb, date: new Date().toISOString() };
  writeFileSync(`${out}.build.json`, `${JSON.stringify(record, null, 2)}\n`);
  log(`kube: built ${name} in ${seconds}s${peakRssMb ? `, peak ${peakRssMb} MB` : ''} → ${out}`);
  return { path: out, built: true, ...record };
}

/** Both control-plane binaries (built when missing). */
export function ensureBinaries(opts) {
  return { kubeApiserver: ensureBinary('kube-apiserver', opts).path, etcd: ensureBinary('etcd', opts).path };
}

/** The real node's binaries (built when missing): kubelet, kube-controller-manager, kube-scheduler, kubectl. */
export function ensureNodeBinaries(opts) {
  return {
    kubelet: ensureBinary('kubelet', opts).path,
    controllerManager: ensureBinary('kube-controller-manager', opts).path,
    scheduler: ensureBinary('kube-scheduler', opts).path,
    kubectl: ensureBinary('kubectl', opts).path,
  };
}

/** The helm binary for the chart tests (built when missing). */
export function ensureHelm(opts) {
  return ensureBinary('helm', opts).path;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    const b = { ...ensureBinaries(), helm: ensureHelm(), ...(process.argv.includes('--control-plane-only') ? {} : ensureNodeBinaries()) };
    console.log(JSON.stringify(b, null, 2));
  } catch (err) {
    console.error(`kube build: ${err.message}`);
    process.exit(1);
  }
}
