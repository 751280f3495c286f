// The addon keeps no static mutable state: it must load and work in several
// Workers at once, and survive a Worker terminated with jobs in flight.
import { Worker } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { privileged } from '../../helpers/privileged.js';
import { freshNetns } from '../../helpers/netns.js';

const dist = fileURLToPath(new URL('../../../dist/index.js', import.meta.url));

function runWorker(code: string, data: unknown): { worker: Worker; done: Promise<unknown> } {
  const worker = new Worker(`import(${JSON.stringify(dist)}).then(async (pw) => { const { parentPort, workerData } = await import('node:worker_threads'); ${code} });`, { eval: true, workerData: data });
  const done = new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', (c) => (c === 0 ? resolve(undefined) : reject(new Error(`worker exited with ${c}`))));
  });
  return { worker, done };
}

describe.skipIf(!privileged())('addon in worker threads', () => {
  it('works in several Workers at once', async () => {
    const ns = await freshNetns();
    const code = `
      const ns = pw.Netns.open(workerData.path);
      const nl = await ns.netlink();
      const names = (await nl.links.list()).map((l) => l.name);
      const r = await ns.spawn(['readlink', '/proc/self/ns/net']);
      ns.close();
      parentPort.postMessage({ names, link: r.stdout.trim() });`;
    const results = await Promise.all([1, 2, 3].map(() => runWorker(code, { path: ns.path }).done));
    for (const r of results) expect(r).toEqual({ names: ['lo'], link: `net:[${ns.id.ino}]` });
  });

  it('survives terminate() while jobs are running', async () => {
    const ns = await freshNetns();
    const { worker } = runWorker(`
      const ns = pw.Netns.open(workerData.path);
      for (let i = 0; i < 20; i++) ns.spawn(['sleep', '5'], { timeoutMs: 10000 });
      for (let i = 0; i < 50; i++) ns.sysctl.get('net.ipv4.ip_forward');
      parentPort.postMessage('started');`, { path: ns.path });
    await new Promise((resolve) => worker.once('message', resolve));
    const t0 = Date.now();
    await worker.terminate();
    expect(Date.now() - t0).toBeLessThan(4000);  // children were killed, threads joined
    expect(await ns.sysctl.get('net.ipv4.ip_forward')).toBe('0');  // this env still works
  });
});
