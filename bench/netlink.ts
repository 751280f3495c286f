// Issue #2 benchmark: the library's rtnetlink and netns costs against the
// command-line tools doing the same work, in one run on one machine.
//   route add+del: podwire (one request each, awaited) vs `ip -batch` vs one `ip route` process per op
//   setns enter+return (native loop on a dedicated thread), netns open+close,
//   ns.spawn('/bin/true') vs `ip netns exec NS /bin/true`
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Netns } from '../lib/net/netns/netns.js';
import { nowUs, timeEach, writeResults, type Series } from './lib/report.js';

const N_ROUTES = Number(process.env.N_ROUTES ?? 10000);
const N_EXEC = Number(process.env.N_EXEC ?? 300);
const name = `pwt-bench-${process.pid}`;

const routeOf = (i: number) => `10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;

async function main(): Promise<void> {
  const ns = await Netns.create(name);
  const series: Series[] = [];
  try {
    const nl = await ns.netlink();
    await nl.links.set('lo', { up: true });
    const lo = (await nl.links.get('lo')).index;

    // podwire: add then delete N host routes, each request awaited on its own.
    for (let i = 0; i < 500; i++) await nl.routes.add({ dst: `${routeOf(i)}/32`, dev: lo, table: 100 });  // warm-up
    for (let i = 0; i < 500; i++) await nl.routes.del({ dst: `${routeOf(i)}/32`, dev: lo, table: 100 });
    const add = await timeEach(N_ROUTES, (i) => nl.routes.add({ dst: `${routeOf(i)}/32`, dev: lo, table: 100 }));
    const del = await timeEach(N_ROUTES, (i) => nl.routes.del({ dst: `${routeOf(i)}/32`, dev: lo, table: 100 }));
    series.push({ label: 'podwire route add', samples: add, notes: { n: N_ROUTES } });
    series.push({ label: 'podwire route del', samples: del, notes: { n: N_ROUTES } });

    // ip -batch: the same N adds then N dels in one process; per-op = total / (2N).
    const batchFile = join('/tmp', `${name}.batch`);
    writeFileSync(batchFile, [
      ...Array.from({ length: N_ROUTES }, (_, i) => `route add ${routeOf(i)}/32 dev lo table 100`),
      ...Array.from({ length: N_ROUTES }, (_, i) => `route del ${routeOf(i)}/32 dev lo table 100`),
    ].join('\n'));
    const t0 = nowUs();
    execFileSync('ip', ['-n', name, '-batch', batchFile]);
    const perOp = (nowUs() - t0) / (2 * N_ROUTES);
    series.push({ label: 'ip -batch route add/del', samples: [perOp], notes: { n: 2 * N_ROUTES, perOpFromTotal: true } });

    // One `ip route` process per op (what a shell script does).
    const execAdd = await timeEach(N_EXEC, (i) => execFileSync('ip', ['-n', name, 'route', 'add', `${routeOf(i)}/32`, 'dev', 'lo', 'table', '100']));
    await timeEach(N_EXEC, (i) => execFileSync('ip', ['-n', name, 'route', 'del', `${routeOf(i)}/32`, 'dev', 'lo', 'table', '100']));
    series.push({ label: 'ip route add (process per op)', samples: execAdd, notes: { n: N_EXEC } });

    // setns enter+return, measured by the native helper built with the ctest tree.
    const setnsBench = join(process.cwd(), 'build-native', 'setns_bench');
    if (existsSync(setnsBench)) {
      const out = spawnSync(setnsBench, [ns.path, '200000'], { encoding: 'utf8' });
      const us = Number(/median_us=([\d.]+)/.exec(out.stdout)?.[1]);
      if (Number.isFinite(us)) series.push({ label: 'setns enter+return (native thread)', samples: [us], notes: { n: 200000, source: 'build-native/setns_bench' } });
    } else {
      console.warn('setns_bench not built: run `npm run test:native` first to include it');
    }

    // netns open+close through the library (sync: open, fstatfs, ioctl, fstat, close).
    const openClose = await timeEach(20000, () => Netns.open(ns.path).close(), 1000);
    series.push({ label: 'podwire Netns.open+close', samples: openClose, notes: { n: 20000 } });

    // Spawning a program inside the netns.
    const spawnTrue = await timeEach(N_EXEC, () => ns.spawn(['/bin/true']), 20);
    series.push({ label: 'podwire ns.spawn /bin/true', samples: spawnTrue, notes: { n: N_EXEC } });
    const ipExec = await timeEach(N_EXEC, () => execFileSync('ip', ['netns', 'exec', name, '/bin/true']), 20);
    series.push({ label: 'ip netns exec /bin/true', samples: ipExec, notes: { n: N_EXEC } });
  } finally {
    ns.close();
    await Netns.remove(name);
  }
  writeResults('netlink', 'podwire netns + rtnetlink vs iproute2 (per op)', series, {
    'ip route add process / podwire route add': ['ip route add (process per op)', 'podwire route add'],
    'podwire route add / ip -batch': ['podwire route add', 'ip -batch route add/del'],
    'ip netns exec / podwire spawn': ['ip netns exec /bin/true', 'podwire ns.spawn /bin/true'],
  });
}

await main();
