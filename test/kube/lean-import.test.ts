// The agent's and the kube layer's entries, and a client with its informers, do not load
// @kubernetes/client-node at run time (its import alone costs about 70 MB of RSS and most of a
// second of start-up: docs/benchmarks.md, "Agent memory"); asking for the typed API does.
// Runs the built package (dist/, as the image does) in a child with a resolve hook that
// records every module from node_modules.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HOOK = `export async function resolve(s, c, next) { const r = await next(s, c); if (r.url.includes('/node_modules/')) process.stderr.write('LOADED ' + r.url.split('/node_modules/').pop() + '\\n'); return r; }`;

function loaded(script: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-lean-import-'));
  try {
    writeFileSync(join(dir, 'hook.mjs'), HOOK);
    writeFileSync(join(dir, 'register.mjs'), `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(join(dir, 'hook.mjs')).href)});`);
    const r = spawnSync(process.execPath, ['--import', pathToFileURL(join(dir, 'register.mjs')).href, '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    return r.stderr.split('\n').filter((l) => l.startsWith('LOADED ')).map((l) => l.slice(7));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const CLIENT = `
  const { KubeClient } = await import('./dist/kube/client.js');
  const { KubeCredentials } = await import('./dist/kube/config.js');
  const { podInformer, namespaceInformer } = await import('./dist/kube/resources.js');
  const c = new KubeClient(new KubeCredentials('https://127.0.0.1:1', 'test', { token: 't', insecure: false }));
  podInformer(c, { nodeName: 'n1' }); namespaceInformer(c);
`;

describe('client-node stays out of the agent process', () => {
  it.skipIf(!existsSync(`${ROOT}/dist/agent/index.js`) && process.env.CI !== 'true')('the agent and kube entries and a client with informers load no client-node module', () => {
    const mods = loaded(`await import('./dist/agent/index.js'); await import('./dist/kube/index.js'); ${CLIENT}`);
    expect(mods.length).toBeGreaterThan(0);
    expect(mods.filter((m) => m.startsWith('@kubernetes/client-node'))).toEqual([]);
  });

  it('the typed API (client.core) loads it on first use', () => {
    const mods = loaded(`${CLIENT} if (typeof c.core.readNamespacedPod !== 'function') process.exit(3);`);
    // require() of an ES module does not pass the ESM resolve hook: the module's own imports do.
    expect(mods.some((m) => m.startsWith('@kubernetes/client-node') || m.startsWith('node-fetch') || m.startsWith('js-yaml'))).toBe(true);
  });
});
