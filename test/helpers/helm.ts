// Real helm (built from its Go module by scripts/kube/build.mjs and cached next to the control
// plane's binaries) run against podwire's chart. Its cache, config and data homes are a pwt-
// temp dir of its own, so nothing under the user's ~/.cache/helm or ~/.config/helm is read or
// written; close() removes it.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { loadAll } from 'js-yaml';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The chart under test. */
export const CHART_DIR = join(root, 'deploy/chart/podwire');

/** helm exited non-zero (or could not run); stderr says why. */
export class HelmError extends Error {
  override readonly name = 'HelmError';
  readonly code = 'ERR_HELM';
  constructor(readonly args: readonly string[], readonly exitCode: number | null, readonly stderr: string) {
    super(`helm ${args.join(' ')} failed (exit ${exitCode}): ${stderr.trim().slice(0, 2000)}`);
  }
}

interface BuildModule { ensureHelm(opts?: { log?: (m: string) => void }): string }

/**
 * The cached helm binary, built now if missing (minutes, once per machine). A failed build
 * throws: it is a failure of the test, never a skip. build.mjs is a plain script without a
 * declaration file, hence the typed dynamic import.
 */
export async function helmBinary(): Promise<string> {
  const mod = (await import(pathToFileURL(join(root, 'scripts/kube/build.mjs')).href)) as BuildModule;
  return mod.ensureHelm({ log: (m) => process.stderr.write(`${m}\n`) });
}

export interface Rendered {
  /** helm's output as text. */
  text: string;
  /** Every document as plain data (no model types: a misspelt field survives, to be caught). */
  objects: Record<string, any>[];
}

export class Helm {
  private readonly home = mkdtempSync(join(tmpdir(), 'pwt-helm-'));
  private files = 0;

  private constructor(readonly binary: string) {}

  static async open(): Promise<Helm> {
    return new Helm(await helmBinary());
  }

  /**
   * Runs helm; resolves with stdout, rejects with HelmError. Without `kubeconfig` helm has no
   * cluster (template, lint); with it, the test control plane's.
   */
  run(args: readonly string[], opts: { timeoutMs?: number; kubeconfig?: string } = {}): Promise<{ stdout: string; stderr: string }> {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: this.home,
      HELM_CACHE_HOME: join(this.home, 'cache'),
      HELM_CONFIG_HOME: join(this.home, 'config'),
      HELM_DATA_HOME: join(this.home, 'data'),
      KUBECONFIG: opts.kubeconfig ?? join(this.home, 'no-kubeconfig'),
    };
    return new Promise((res, rej) => {
      execFile(this.binary, args, { env, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
        if (err) rej(new HelmError(args, typeof err.code === 'number' ? err.code : null, `${stderr}${err.killed ? ' (killed: timeout)' : ''}`));
        else res({ stdout, stderr });
      });
    });
  }

  /** Writes `values` (JSON is YAML) to a file of this helm's home and returns its path. */
  valuesFile(values: object): string {
    const file = join(this.home, `values-${++this.files}.yaml`);
    writeFileSync(file, JSON.stringify(values));
    return file;
  }

  /** `helm template <release> <chart> --namespace <ns> -f <values>`, parsed. */
  async template(release: string, namespace: string, values: object = {}, extra: readonly string[] = []): Promise<Rendered> {
    const { stdout } = await this.run(['template', release, CHART_DIR, '--namespace', namespace, '-f', this.valuesFile(values), ...extra]);
    const objects = (loadAll(stdout) as unknown[]).filter((o): o is Record<string, any> => o !== null && typeof o === 'object');
    return { text: stdout, objects };
  }

  close(): void {
    rmSync(this.home, { recursive: true, force: true });
  }
}
