// `podwire agent` as a node runs it: the CLI (bin/podwire.js; here bench/lib/podwire-bin.ts, the same
// entry on the bench's build), a process of its own, with its CNI
// installer writing into a node directory of this bench and readiness on its /readyz, measured the
// way bench/lib/istio-agent.ts measures upstream's agent (spawn → /readyz 200, VmRSS and VmHWM
// from /proc, no forced GC). The bench's agent children (bench/lib/agent-child.ts) are driven over
// IPC instead; this is the comparison of a process start with Go's.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processMem } from './istio-agent.js';

const BIN = fileURLToPath(new URL('./podwire-bin.js', import.meta.url));
/** The image's entrypoint, bundled from this bench build (dist-bench/bundle/, two levels below the package root as the bundler needs). */
const BUNDLE = fileURLToPath(new URL('../../bundle/podwire.mjs', import.meta.url));
// The built plugin of this checkout (the installer's default is found relative to dist/, not dist-bench/).
const PLUGIN = fileURLToPath(new URL('../../../build/Release/podwire-cni', import.meta.url));

export interface PodwireCli {
  pid: number;
  spawnToReadyMs: number;
  mem(): { rssMb: number; peakRssMb: number; threads: number };
  /** SIGKILL, as upstream's is stopped in this bench: nothing is cleaned up. */
  kill(): Promise<void>;
}

/** Bundles the CLI the way deploy/image/build.mjs does (scripts/lib/bundle.mjs), from this bench build; resolves to its path. */
export async function cliBundle(): Promise<string> {
  // The script is not compiled into dist-bench: import it from the checkout (dist-bench/bench/lib → ../../../).
  const { bundleCli } = await import(new URL('../../../scripts/lib/bundle.mjs', import.meta.url).href) as typeof import('../../scripts/lib/bundle.mjs');
  await bundleCli({ entry: BIN, outfile: BUNDLE });
  return BUNDLE;
}

function readyz(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const r = request({ host: '127.0.0.1', port, path: '/readyz', timeout: 500 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    r.on('error', () => resolve(false));
    r.on('timeout', () => { r.destroy(); resolve(false); });
    r.end();
  });
}

/**
 * Starts `node [nodeFlags] <entry> agent` (default podwire-bin.js, the modules as dist/ has them; or cliBundle()'s) with the node's agent environment (`env`, as the
 * bench's children get it), its installer pointed at `<dir>/cli-host` (a primary conflist to chain
 * to, a bin dir), repair off as upstream's is here, and waits for /readyz (at most `timeoutMs`).
 */
export async function startPodwireCli(dir: string, env: Record<string, string>, kubeconfig: string, nodeFlags: string[], opts: { entry?: string; timeoutMs?: number } = {}): Promise<PodwireCli> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const host = join(dir, 'cli-host');
  mkdirSync(join(host, 'net.d'), { recursive: true });
  mkdirSync(join(host, 'bin'), { recursive: true });
  const primary = join(host, 'net.d', '10-pwt-bench.conflist');
  if (!existsSync(primary)) writeFileSync(primary, `${JSON.stringify({ cniVersion: '1.0.0', name: 'pwt-bench', plugins: [{ type: 'ptp', ipam: { type: 'host-local', subnet: '10.99.0.0/16' } }] })}\n`);
  const port = Number(env.HEALTH_PORT);
  if (!Number.isInteger(port) || port <= 0) throw new Error('the agent environment has no HEALTH_PORT');
  if (await readyz(port)) throw new Error(`something already answers on :${port}/readyz`);
  const fullEnv = {
    ...process.env, ...env, KUBECONFIG: kubeconfig, REPAIR_ENABLED: 'false', LOG_LEVEL: 'warn',
    MOUNTED_CNI_NET_DIR: join(host, 'net.d'), CNI_BIN_TARGET_DIRS: join(host, 'bin'), CNI_PLUGIN_BINARY: PLUGIN,
  };
  const t0 = performance.now();
  const proc = spawn(process.execPath, [...nodeFlags, opts.entry ?? BIN, 'agent'], { env: fullEnv, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => { if (stderr.length < 64 * 1024) stderr += d.toString(); });
  let exited: number | null | undefined;
  const exit = new Promise<void>((resolve) => proc.once('exit', (code) => { exited = code; resolve(); }));
  const tail = () => stderr.trim().split('\n').slice(-5).join(' | ');
  for (const end = Date.now() + timeoutMs; ; await new Promise((r) => setTimeout(r, 10))) {
    if (exited !== undefined) throw new Error(`podwire agent exited (${exited}) before ready: ${tail()}`);
    if (await readyz(port)) break;
    if (Date.now() > end) {
      proc.kill('SIGKILL');
      await exit;
      throw new Error(`podwire agent not ready within ${timeoutMs} ms: ${tail()}`);
    }
  }
  const spawnToReadyMs = performance.now() - t0;
  const pid = proc.pid!;
  return {
    pid, spawnToReadyMs,
    mem: () => processMem(pid),
    kill: async () => {
      if (exited === undefined) proc.kill('SIGKILL');
      await exit;
    },
  };
}
