// ZDS benchmark: add+ack round trips over one connection with real netns
// fds, and the time to deliver a 1,000-pod snapshot. The acker runs in a
// child process (this file with --acker PATH), so each round trip crosses
// two event loops as it does with a real ztunnel. The floor is a bare fd
// pass (send + recv + close over a socketpair, no protocol): perf-baseline
// measured ~4.4 µs for it in C.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { native } from '../lib/net/binding.js';
import { Netns } from '../lib/net/netns/netns.js';
import { connect, socketPair } from '../lib/net/sock/seqpacket.js';
import { encodeHello, encodeRequest, encodeResponse } from '../lib/zds/codec.js';
import { ZtunnelPeer } from '../lib/testing/ztunnel-peer.js';
import { ZdsServer, type ZdsPod } from '../lib/zds/server.js';
import { nowUs, timeEach, writeResults, type Series } from './lib/report.js';

const ack = encodeResponse();

async function acker(path: string): Promise<void> {
  const c = await connect(path);
  await c.send(encodeHello());
  for await (const m of c) {
    for (const f of m.fds) f.close();
    await c.send(ack);
  }
}

if (process.argv[2] === '--acker') {
  await acker(process.argv[3]!);
  process.exit(0);
}

const N_RT = Number(process.env.ZDS_BENCH_N ?? 5000);
const N_FLOOR = 20000;
const N_PODS = 1000;
const SNAPSHOT_RUNS = 5;

const dir = mkdtempSync(join(tmpdir(), 'pw-bench-zds-'));
const names = [0, 1, 2, 3].map((i) => `pwb-zds-${process.pid}-${i}`);
const nss: Netns[] = [];
const children: ChildProcess[] = [];
const series: Series[] = [];

function startAcker(path: string): ChildProcess {
  const child = spawn(process.execPath, [process.argv[1]!, '--acker', path], { stdio: 'inherit' });
  children.push(child);
  return child;
}

try {
  for (const n of names) nss.push(await Netns.create(n));
  const nsFd = nss[0]!.fd;

  // 1. Floor: one netns fd over SOCK_SEQPACKET, send + recv + close, synchronous native calls.
  {
    const [a, b] = native().unixPair(5);
    const msg = encodeRequest({ type: 'add', uid: 'uid-floor', workloadInfo: { name: 'p', namespace: 'ns', serviceAccount: 'sa' } });
    const samples = await timeEach(N_FLOOR, () => {
      a.send(msg, [nsFd]);
      const r = b.recv(1024, 1)!;
      native().fdClose(r.fds[0]!);
    }, 1000);
    a.close();
    b.close();
    series.push({ label: 'fd pass floor: sendmsg+recvmsg+close (native, sync)', samples, notes: { n: N_FLOOR } });
  }

  // 2. The same through the promise API on one thread (socketPair).
  {
    const [a, b] = socketPair();
    const msg = encodeRequest({ type: 'add', uid: 'uid-floor', workloadInfo: { name: 'p', namespace: 'ns', serviceAccount: 'sa' } });
    const samples = await timeEach(N_FLOOR / 4, async () => {
      await a.send(msg, [nss[0]!]);
      const m = (await b.recv({ maxFds: 1 }))!;
      m.fds[0]!.close();
    }, 500);
    a.close();
    b.close();
    series.push({ label: 'fd pass via seqpacket.ts promises (one process)', samples, notes: { n: N_FLOOR / 4 } });
  }

  // 3. podAdded round trips: server → acker child → ack, one connection, real netns fds.
  {
    const path = join(dir, 'rt.sock');
    const server = new ZdsServer({ path }).listen();
    const ready = new Promise((r) => server.once('ready', r));
    startAcker(path);
    await ready;
    const samples = await timeEach(N_RT, (i) =>
      server.podAdded({ uid: `uid-${i}`, workloadInfo: { name: `pod-${i}`, namespace: 'bench', serviceAccount: 'default' } }, nss[i % 4]!), 200);
    series.push({ label: 'podwire ZDS podAdded add+fd+ack round trip (acker in child)', samples, notes: { n: N_RT } });
    await server.close();
  }

  // 4. The same against the full ztunnel-like peer (protocol only) in this process.
  {
    const path = join(dir, 'peer.sock');
    const server = new ZdsServer({ path }).listen();
    const peer = new ZtunnelPeer({ path, listeners: false }).start();
    await peer.waitFor((p) => p.ready);
    const samples = await timeEach(N_RT / 5, (i) =>
      server.podAdded({ uid: `uid-${i}`, workloadInfo: { name: `pod-${i}`, namespace: 'bench', serviceAccount: 'default' } }, nss[i % 4]!), 100);
    series.push({ label: 'podwire ZDS podAdded round trip (ztunnel-sim peer, same process)', samples, notes: { n: N_RT / 5, proxies: peer.active.size } });
    await peer.stop();
    await server.close();
  }

  // 5. Snapshot of 1,000 pods, each with its own netns fd (the 4 netns opened 250 times each).
  {
    const opened = Array.from({ length: N_PODS }, (_, i) => Netns.open(`/run/netns/${names[i % 4]}`));
    const pods: ZdsPod[] = opened.map((ns, i) => ({ uid: `snap-${i}`, workloadInfo: { name: `pod-${i}`, namespace: 'bench', serviceAccount: 'default' }, netns: ns }));
    const path = join(dir, 'snap.sock');
    const server = new ZdsServer({ path, acceptsPerSecond: 100, provider: { snapshot: () => pods } }).listen();
    const samples: number[] = [];
    for (let r = 0; r < SNAPSHOT_RUNS; r++) {
      let t0 = 0;
      const started = new Promise<void>((res) => server.once('connect', () => { t0 = nowUs(); res(); }));
      const ready = new Promise<void>((res) => server.once('ready', () => res()));
      const child = startAcker(path);
      await started;
      await ready;
      samples.push(nowUs() - t0);
      child.kill();
      await new Promise((res) => child.once('exit', res));
    }
    await server.close();
    for (const ns of opened) ns.close();
    series.push({ label: `podwire ZDS snapshot of ${N_PODS} pods (connect → snapshot_sent acked)`, samples, notes: { runs: SNAPSHOT_RUNS, perPodUs: Math.round(samples.reduce((a, b) => a + b, 0) / samples.length / N_PODS * 100) / 100 } });
  }

  writeResults('zds', 'ZDS: netns fd hand-off to ztunnel', series, {
    'add+ack round trip vs bare fd pass': ['podwire ZDS podAdded add+fd+ack round trip (acker in child)', 'fd pass floor: sendmsg+recvmsg+close (native, sync)'],
    'promise API vs bare fd pass': ['fd pass via seqpacket.ts promises (one process)', 'fd pass floor: sendmsg+recvmsg+close (native, sync)'],
  });
  const snap = series[series.length - 1]!;
  console.log(`snapshot: ${snap.notes!.perPodUs} µs per pod (mean over ${SNAPSHOT_RUNS} runs)`);
} finally {
  for (const c of children) if (c.exitCode === null) c.kill();
  for (const ns of nss) ns.close();
  for (const n of names) {
    try {
      await Netns.remove(n);
    } catch {
      // not created
    }
  }
  rmSync(dir, { recursive: true, force: true });
}
