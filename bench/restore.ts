// Programming Istio's in-pod ruleset into fresh netns by spawning the rule
// tools: podwire's ns.spawn (child born in the netns) against `ip netns exec`
// (the shell-level anchor), for iptables-restore (nft and legacy backends) and
// nft -f. Each netns gets one ruleset of each kind; every op hits a fresh one.
//   npm run bench -- restore [N=200]
// Netns are named pwt-bench-<pid>-<i>; the test suite's sweep leaves names
// of live processes alone. BENCH_NETNS_PREFIX overrides the prefix.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { iptables } from '../lib/net/xtables/iptables.js';
import { Netns } from '../lib/net/netns/netns.js';
import { nft } from '../lib/net/nft/tool.js';
import { nowUs, writeResults, type Series } from './lib/report.js';

const N = Number(process.argv[2] ?? 200);
if (!Number.isInteger(N) || N < 1) throw new RangeError(`N must be a positive integer, not ${process.argv[2]}`);

const fixture = (name: string) => readFileSync(new URL(`../../bench/fixtures/${name}`, import.meta.url), 'utf8');
const V4 = `${fixture('istio-inpod-v4.restore').trimEnd()}\n`;
const NFT = fixture('istio-inpod.nft');

/** `ip netns exec NAME argv...` with `input` on stdin; rejects on a non-zero exit. */
function ipNetnsExec(name: string, argv: string[], input?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', name, ...argv], { stdio: [input === undefined ? 'ignore' : 'pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`ip netns exec ${argv.join(' ')} → ${code}: ${stderr}`))));
    if (child.stdin) {
      child.stdin.on('error', () => { /* EPIPE when the tool exits first; its exit code tells */ });
      child.stdin.end(input);
    }
  });
}

async function timed(samples: number[], fn: () => Promise<unknown>): Promise<void> {
  const t0 = nowUs();
  await fn();
  samples.push(nowUs() - t0);
}

const L = {
  trueSpawn: 'podwire ns.spawn /bin/true',
  trueExec: 'ip netns exec /bin/true',
  iptNftSpawn: 'podwire iptables.restore (nft backend)',
  iptNftExec: 'ip netns exec iptables-nft-restore',
  iptLegSpawn: 'podwire iptables.restore (legacy backend)',
  iptLegExec: 'ip netns exec iptables-legacy-restore',
  nftSpawn: 'podwire nft.apply (nft -f -)',
  nftExec: 'ip netns exec nft -f -',
};
const samples: Record<string, number[]> = Object.fromEntries(Object.values(L).map((l) => [l, []]));

const prefix = `${process.env.BENCH_NETNS_PREFIX ?? 'pwt-bench'}-${process.pid}`;
if (!/^[a-z][a-z0-9-]*$/.test(prefix)) throw new TypeError(`bad BENCH_NETNS_PREFIX ${prefix}`);
const made: Array<{ name: string; ns: Netns }> = [];
try {
  // Two netns per i: one for podwire's path, one for ip netns exec's.
  for (let i = 0; i < 2 * N; i++) {
    const name = `${prefix}-${i}`;
    const ns = await Netns.create(name);
    made.push({ name, ns });
    await (await ns.netlink()).links.set('lo', { up: true });
  }
  console.log(`${2 * N} netns created (${Netns.list().length} mounted under /run/netns); running ${N} rounds`);

  for (let i = 0; i < N; i++) {
    const mine = made[2 * i]!;
    const theirs = made[2 * i + 1]!;
    // Alternate which path goes first so drift and caches hit both alike.
    const ours = async () => {
      await timed(samples[L.trueSpawn]!, () => mine.ns.spawn(['/bin/true']));
      await timed(samples[L.iptNftSpawn]!, () => iptables.restore(mine.ns, V4, { mode: 'nft' }));
      await timed(samples[L.iptLegSpawn]!, () => iptables.restore(mine.ns, V4, { mode: 'legacy' }));
      await timed(samples[L.nftSpawn]!, () => nft.apply(mine.ns, NFT));
    };
    const exec = async () => {
      await timed(samples[L.trueExec]!, () => ipNetnsExec(theirs.name, ['/bin/true']));
      await timed(samples[L.iptNftExec]!, () => ipNetnsExec(theirs.name, ['iptables-nft-restore', '--noflush'], V4));
      await timed(samples[L.iptLegExec]!, () => ipNetnsExec(theirs.name, ['iptables-legacy-restore', '--noflush'], V4));
      await timed(samples[L.nftExec]!, () => ipNetnsExec(theirs.name, ['nft', '-f', '-'], NFT));
    };
    if (i % 2 === 0) { await ours(); await exec(); } else { await exec(); await ours(); }
  }

  // Both paths must have produced the same rules.
  const a = made[0]!.ns;
  const b = Netns.resolve(made[1]!.name);
  try {
    for (const mode of ['nft', 'legacy'] as const) {
      if (JSON.stringify(await iptables.save(a, { mode })) !== JSON.stringify(await iptables.save(b, { mode })))
        throw new Error(`iptables-${mode} rules differ between the two paths`);
    }
    const strip = (s: string) => s.replace(/"handle": \d+/g, '');
    if (strip(JSON.stringify(await nft.list(a), null, 1)) !== strip(JSON.stringify(await nft.list(b), null, 1)))
      throw new Error('nft rulesets differ between the two paths');
  } finally {
    b.close();
  }
} finally {
  for (const { name, ns } of made) {
    ns.close();
    try {
      await Netns.remove(name);
    } catch {
      // already gone
    }
  }
}

const notes = { N, freshNetnsPerOp: true, mountedNetns: 2 * N };
const series: Series[] = Object.values(L).map((label) => ({ label, samples: samples[label]!, notes }));
writeResults('restore', `Istio in-pod ruleset into a fresh netns (N=${N}): ns.spawn vs ip netns exec`, series, {
  'ip netns exec / podwire: /bin/true': [L.trueExec, L.trueSpawn],
  'ip netns exec / podwire: iptables-nft-restore': [L.iptNftExec, L.iptNftSpawn],
  'ip netns exec / podwire: iptables-legacy-restore': [L.iptLegExec, L.iptLegSpawn],
  'ip netns exec / podwire: nft -f': [L.nftExec, L.nftSpawn],
});
