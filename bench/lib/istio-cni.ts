// Upstream's CNI plugin binary (`istio.io/istio/cni/cmd/istio-cni`), built from the Go module
// proxy in a throwaway wrapper module and cached under ~/.cache/podwire/istio/bin/ (as
// scripts/kube/build.mjs caches the control plane), so only the first run on a machine pays
// (about 1.5 minutes here, downloads included). The proxy serves istio.io/istio only as pseudo-versions of
// its main branch (`go list -m -versions istio.io/istio` lists none), so one is pinned here.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const ISTIO_VERSION = 'v0.0.0-20260827124520-eed52ebb66ad';
export const ISTIO_CNI_PKG = 'istio.io/istio/cni/cmd/istio-cni';

export function istioCniPath(): string {
  const cache = process.env.PODWIRE_ISTIO_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'podwire', 'istio');
  return join(cache, 'bin', `istio-cni-${ISTIO_VERSION}`);
}

/**
 * The istio.io/istio module's source tree in the Go module cache (`go mod download`, the fetch
 * `go get` in ensureIstioCni does too), downloading it first when missing: upstream's Helm chart
 * (manifests/charts/istio-cni) is read from there by the chart parity tests. Throws when it
 * cannot be had (no Go, no proxy): a failure of the caller, never a skip.
 */
export function ensureIstioModule(opts: { timeoutS?: number } = {}): string {
  const r = spawnSync('go', ['mod', 'download', '-json', `istio.io/istio@${ISTIO_VERSION}`], {
    encoding: 'utf8', timeout: (opts.timeoutS ?? 300) * 1000, env: { ...process.env, GOFLAGS: '-mod=mod' }, maxBuffer: 1 << 20,
  });
  let dir: unknown;
  try {
    dir = (JSON.parse(r.stdout) as { Dir?: unknown; Error?: unknown }).Dir;
  } catch {
    dir = undefined;
  }
  if (r.status !== 0 || typeof dir !== 'string' || !existsSync(dir)) {
    throw new Error(`go mod download istio.io/istio@${ISTIO_VERSION} failed (exit ${r.status}${r.error ? `, ${r.error.message}` : ''}): ${(r.stdout + r.stderr).trim().split('\n').slice(-3).join(' ')}`);
  }
  return dir;
}

/** The cached binary, building it first when missing (at most `timeoutS`); undefined + why when it cannot be built. */
export function ensureIstioCni(opts: { timeoutS?: number; log?: (m: string) => void } = {}): { path?: string; built: boolean; seconds?: number; why?: string } {
  const out = istioCniPath();
  if (existsSync(out)) return { path: out, built: false };
  const log = opts.log ?? ((m: string) => process.stderr.write(`${m}\n`));
  const dir = mkdtempSync(join(tmpdir(), 'pwt-istio-cni-build-'));
  const t0 = Date.now();
  try {
    writeFileSync(join(dir, 'go.mod'), 'module podwire.local/istiocni\n\ngo 1.24\n');
    log(`istio-cni: building ${ISTIO_CNI_PKG}@${ISTIO_VERSION} from the Go module proxy (first run only)`);
    const env = { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=mod -buildvcs=false' };
    const timeout = (opts.timeoutS ?? 480) * 1000;
    // The module itself first, as the chart tests fetch it (ensureIstioModule); then its dependencies.
    try {
      ensureIstioModule({ timeoutS: opts.timeoutS ?? 480 });
    } catch (err) {
      return { built: false, why: (err as Error).message };
    }
    const get = spawnSync('go', ['get', `istio.io/istio@${ISTIO_VERSION}`], { cwd: dir, env, encoding: 'utf8', timeout });
    if (get.status !== 0) return { built: false, why: `go get failed: ${(get.stderr || get.error?.message || '').trim().split('\n').slice(-3).join(' ')}` };
    mkdirSync(dirname(out), { recursive: true });
    const tmp = `${out}.tmp-${process.pid}`;
    const left = Math.max(10_000, timeout - (Date.now() - t0));
    const b = spawnSync('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', tmp, ISTIO_CNI_PKG], { cwd: dir, env, encoding: 'utf8', timeout: left });
    if (b.status !== 0) {
      rmSync(tmp, { force: true });
      return { built: false, why: `go build failed${b.error ? ` (${b.error.message})` : ''}: ${(b.stderr ?? '').trim().split('\n').slice(-3).join(' ')}` };
    }
    renameSync(tmp, out);
    const seconds = Math.round((Date.now() - t0) / 1000);
    log(`istio-cni: built in ${seconds} s → ${out}`);
    return { path: out, built: true, seconds };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
