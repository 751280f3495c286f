// Upstream's istio-cni Helm chart, read from the istio.io/istio module in the Go module cache
// (downloaded there by bench/lib/istio-cni.ts ensureIstioModule, the version the benchmarks build
// upstream's plugin from). Read, never copied into the project.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { ensureIstioModule, ISTIO_VERSION } from '../../bench/lib/istio-cni.js';

export { ISTIO_VERSION };

/** manifests/charts/istio-cni of the module (fetched first when missing; throws when it cannot be). */
export function upstreamChartDir(): string {
  return join(ensureIstioModule(), 'manifests', 'charts', 'istio-cni');
}

/** Upstream's values.yaml, parsed. */
export function upstreamValues(): Record<string, any> {
  return load(readFileSync(join(upstreamChartDir(), 'values.yaml'), 'utf8')) as Record<string, any>;
}

/** files/profile-*.yaml by name (`platform-k3s`, `ambient`, `compatibility-version-1.25`, ...), parsed. */
export function upstreamProfiles(): Map<string, Record<string, any>> {
  const dir = join(upstreamChartDir(), 'files');
  const out = new Map<string, Record<string, any>>();
  for (const f of readdirSync(dir).sort()) {
    const m = /^profile-(.+)\.yaml$/.exec(f);
    if (m) out.set(m[1]!, (load(readFileSync(join(dir, f), 'utf8')) as Record<string, any> | null) ?? {});
  }
  return out;
}

/**
 * Leaf paths of a values tree (`ambient.dnsCapture`, `global.logging.level`). Maps that are
 * values in their own right (resources, tolerations, selectors: anything the chart passes
 * through whole) are leaves: `whole` names them.
 */
export function leafPaths(tree: Record<string, any>, whole: ReadonlySet<string>, prefix = ''): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(tree)) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v) && !whole.has(path) && Object.keys(v).length > 0) out.push(...leafPaths(v, whole, path));
    else out.push(path);
  }
  return out;
}
