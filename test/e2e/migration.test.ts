// Moving a node from upstream's agent to podwire's and back without restarting a pod, end to end
// (docs/migration.md): the real cluster of test/e2e/node.test.ts (two kubelet nodes), Istio's own
// `istio-cni` chart from the istio.io/istio module running upstream's agent built from the same
// module (bench/lib/istio-image.ts), then `helm install podwire --take-ownership --force`, which
// replaces the DaemonSet `istio-cni-node` in place: the DaemonSet controller rolls its pod, the
// old agent sees its DaemonSet still there and keeps the node's state (upstream:
// ShouldStopCleanup; podwire: docs/agent.md "On SIGTERM"), and the new one adopts it. Then the
// same back to upstream. Throughout each switch every ambient pod connects to TEST_NET:80 in
// turn, one attempt every 100 ms: only a pod whose in-pod redirection is in place (to the ztunnel
// stand-in's 15001 in its netns) gets such a connection accepted, so a failed attempt is a pod
// that was unredirected at that moment. The tests run in order on one cluster.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startE2eCluster, type E2eCluster } from '../helpers/cluster.js';
import { CHART_DIR, Helm } from '../helpers/helm.js';
import { privileged } from '../helpers/privileged.js';
import { until } from '../helpers/kube.js';
import { NODE_TOOLS } from '../../scripts/kube/node.mjs';
import { PODWIRE_IMAGE, VERSION } from '../../scripts/kube/images.mjs';
import { BUSYBOX_BINARY } from '../../scripts/lib/oci-image.mjs';
import { ensureIstioModule } from '../../bench/lib/istio-cni.js';
import { UPSTREAM_IMAGE, UPSTREAM_TAG, upstreamAgentImage } from '../../bench/lib/istio-image.js';
import { TEST_NET, deployment, list, namespace, pod } from './manifests.js';

const NS = 'e2e-migrate';
/** The host's static busybox (the test apps' image is made of it): its sh, nc and sleep. */
const BUSYBOX = BUSYBOX_BINARY;
const REPLICAS = 6;
/** Two nodes: the DaemonSet rolls them one after the other, so each switch passes through a cluster running both agents. */
const NODES = 2;

interface PodState {
  name: string; uid: string; ip: string; node: string; ready: boolean;
  /** When Ready last changed: the same value after a switch means the pod never went unready. */
  readySince: string;
  restarts: number;
  annotations: Record<string, string>;
}

/** One switch's probe traffic: attempts (in all, per pod), the failed ones (unredirected), and when they were. */
interface ProbeRun { attempts: number; unredirected: number; perPod: Record<string, number>; failures: Array<{ atMs: number; pod: string; error: string }> }

describe.skipIf(!privileged(...NODE_TOOLS, 'busybox', 'go'))('moving a node from upstream\'s agent to podwire\'s and back: no pod restarted, no in-pod rule rewritten, nothing unredirected', () => {
  let c: E2eCluster;
  let helm: Helm;
  let upstreamChart: string;
  const results: Record<string, { probes: ProbeRun; helmMs: number; agentReadyMs: number }> = {};

  const kubectl = (args: string[], input?: string) => c.kubectl(args, input === undefined ? {} : { input });
  const z = (nodeName: string) => c.ztunnels.get(nodeName)!;
  const pods = (ns = NS): PodState[] => (c.getJson(['get', 'pods', '-n', ns]).items as any[]).map((p) => {
    const ready = (p.status.conditions ?? []).find((x: any) => x.type === 'Ready');
    return {
      name: p.metadata.name, uid: p.metadata.uid, ip: p.status.podIP ?? '', node: p.spec.nodeName ?? '', ready: ready?.status === 'True', readySince: ready?.lastTransitionTime ?? '',
      restarts: (p.status.containerStatuses ?? []).reduce((n: number, s: any) => n + s.restartCount, 0), annotations: p.metadata.annotations ?? {},
    };
  });
  const agents = () => (c.getJson(['get', 'pods', '-n', 'istio-system', '-l', 'k8s-app=istio-cni-node']).items as any[]);
  /** Every node's agent pod, once each runs `image` and is Ready (and no other agent pod is left). */
  const agentReady = (image: string) => () => {
    const a = agents();
    return a.length === NODES && a.every((x) => x.spec.containers[0].image === image && x.metadata.deletionTimestamp === undefined &&
      (x.status.conditions ?? []).some((y: any) => y.type === 'Ready' && y.status === 'True')) ? a : undefined;
  };
  const capturedAtStart = (p: { uid: string; node: string }) => z(p.node).captures.some((x) => x.uid === p.uid && x.port === 15001 && x.origDst.address === TEST_NET && x.origDst.port === 80);

  /** The pid of host pid `pid` in the node's pid namespace (NSpid's second level). */
  const nsPid = (pid: number) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('NSpid:'))!.split(/\s+/)[2]);
  /** argv in the pod's netns, run from the node's namespaces (so the node's paths and the host's tools). */
  const podExec = (p: { uid: string; node: string }, argv: string[]) => {
    const pid = c.podPids(p.uid)[0];
    if (!pid) throw new Error(`pod ${p.uid}: no process`);
    const r = c.nodeOf(p.node).exec(['nsenter', `--net=/proc/${nsPid(pid)}/ns/net`, '--', ...argv]);
    if (r.code !== 0) throw new Error(`${argv.join(' ')} in pod ${p.uid}: exit ${r.code}: ${r.stderr.trim()}`);
    return r.stdout;
  };
  /**
   * Every netfilter rule of the pod as the tools print it: nft with rule handles (a rule deleted
   * and added again gets a new handle), and both iptables variants of both families without
   * their `#` comment lines (which carry the time).
   */
  const podRules = (p: { uid: string; node: string }) => [
    podExec(p, ['nft', '-a', 'list', 'ruleset']),
    ...['iptables-legacy-save', 'ip6tables-legacy-save', 'iptables-nft-save', 'ip6tables-nft-save'].map((t) => `${t}:\n${podExec(p, [t]).replace(/^#.*\n/gm, '')}`),
  ].join('\n').replace(COUNTERS, '$1');
  /** Packet counters (nft's `counter packets N bytes M`, iptables-save's `[N:M]`): traffic moves them, a rewrite does not show in them. */
  const COUNTERS = /(counter) packets \d+ bytes \d+|\[\d+:\d+\]/g;
  /** The nodes' host-side state the agents share: the probe sets' members (`<node> <set> <ip>`) and the host rules. */
  const probeSet = () => c.nodes.flatMap((n) => [...n.exec(['ipset', 'list', '-o', 'save']).stdout.matchAll(/^add (\S+) (\S+)/gm)].map((m) => `${n.name} ${m[1]} ${m[2]}`)).sort();
  const hostRules = () => c.nodes.map((n) => ['iptables-legacy-save', 'ip6tables-legacy-save', 'iptables-nft-save', 'ip6tables-nft-save']
    .map((t) => `${n.name} ${t}:\n${n.exec([t]).stdout.replace(/^#.*\n/gm, '')}`).join('\n')).join('\n').replace(COUNTERS, '$1');
  /** Every ztunnel's pods of the test namespace, as `<node> <uid>`. */
  const ztunnelMembers = (ps: PodState[]) => c.nodes.flatMap((n) => [...z(n.name).active.keys()].filter((uid) => ps.some((p) => p.uid === uid)).map((uid) => `${n.name} ${uid}`)).sort();

  /** Everything that must not change across a switch. */
  const snapshot = () => {
    const ps = pods().sort((a, b) => a.name.localeCompare(b.name));
    return {
      pods: ps.map((p) => ({ name: p.name, uid: p.uid, ip: p.ip, node: p.node, ready: p.ready, readySince: p.readySince, restarts: p.restarts, redirection: p.annotations['ambient.istio.io/redirection'] })),
      // The sandbox's first process and its netns: a recreated sandbox has others.
      sandboxes: ps.map((p) => {
        const pid = c.podPids(p.uid)[0]!;
        return `${p.name} ${pid} ${readFileSync(`/proc/${pid}/stat`, 'utf8').split(' ')[21]}`;
      }),
      rules: Object.fromEntries(ps.map((p) => [p.name, podRules(p)])),
      ztunnel: ztunnelMembers(ps),
      probeSet: probeSet(),
    };
  };

  /**
   * Probe traffic from every pod, each in a loop of its own: connect to TEST_NET:80 (1 s allowed),
   * then 100 ms pause, until stop(). The loops are busybox shells in the pods' netns (children of
   * this process, nothing else of the host), so the test's own synchronous kubectl calls never
   * pause them; each attempt prints `ok` or `fail`, stamped here as it arrives.
   */
  const probeTraffic = (targets: Array<{ name: string; uid: string }> = pods()) => {
    const run: ProbeRun = { attempts: 0, unredirected: 0, perPod: {}, failures: [] };
    const t0 = performance.now();
    const script = `while :; do if ${BUSYBOX} nc -w 1 ${TEST_NET} 80 </dev/null >/dev/null 2>&1; then echo ok; else echo fail; fi; ${BUSYBOX} sleep 0.1; done`;
    const loops = targets.map((p) => {
      // A process group of its own: stop() kills the shell and its nc at once.
      const child = spawn('nsenter', [`--net=${c.podNetnsPath(p.uid)}`, '--', BUSYBOX, 'sh', '-c', script], { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
      let buf = '';
      child.stdout!.setEncoding('utf8').on('data', (d: string) => {
        buf += d;
        for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          run.attempts++;
          run.perPod[p.name] = (run.perPod[p.name] ?? 0) + 1;
          if (line !== 'ok') {
            run.unredirected++;
            run.failures.push({ atMs: Math.round(performance.now() - t0), pod: p.name, error: line });
          }
        }
      });
      return child;
    });
    return {
      attempts: () => run.attempts,
      perPod: () => run.perPod,
      async stop(): Promise<ProbeRun> {
        await Promise.all(loops.map((l) => {
          if (l.exitCode !== null || l.signalCode !== null) return undefined;
          const exited = new Promise((r) => l.once('exit', r));
          process.kill(-l.pid!, 'SIGKILL');
          return exited;
        }));
        return run;
      },
    };
  };

  // The same values for both charts (podwire's takes an istio-cni values file as it is); only the
  // tag differs: upstream's image is <hub>/install-cni:<tag>, podwire's <hub>/podwire:<tag>.
  const values = () => helm.valuesFile({ ambient: { enabled: true }, global: { hub: 'localhost', imagePullPolicy: 'IfNotPresent' } });
  const helmRun = (args: string[]) => helm.run(args, { kubeconfig: c.cp.adminKubeconfig, timeoutMs: 300_000 });

  /**
   * The whole switch from release `from` to `to`, as docs/migration.md gives it: install `to`
   * over the live objects (--take-ownership adopts them, --force replaces them whole so nothing
   * of the other chart's pod template survives a merge), wait for its agent, then drop `from`'s
   * release record (a `helm uninstall` would delete the DaemonSet) and what only `from` had.
   */
  const switchRelease = async (from: string, to: { release: string; chart: string; tag: string; image: string; set?: string[] }) => {
    const fromObjects = (await helmRun(['get', 'manifest', from, '-n', 'istio-system'])).stdout.split(/^---$/m)
      .map((d) => ({ kind: /^kind: (\S+)/m.exec(d)?.[1], name: /^ {2}name: (\S+)/m.exec(d)?.[1]?.replace(/^"|"$/g, '') }))
      .filter((o): o is { kind: string; name: string } => !!o.kind && !!o.name);
    const connects = new Map(c.nodes.map((n) => [n.name, z(n.name).counters.connects]));
    const traffic = probeTraffic();
    const t0 = performance.now();
    await helmRun(['install', to.release, to.chart, '-n', 'istio-system', '-f', values(), '--set', `global.tag=${to.tag}`, ...(to.set ?? []).flatMap((x) => ['--set', x]), '--take-ownership', '--force', '--wait', '--timeout', '240s']);
    const helmMs = performance.now() - t0;
    await until(`the ${to.release} agent Ready`, agentReady(to.image), 180_000, 250);
    // Its ZDS connection's snapshot: the stand-in has the new agent's complete pod list.
    await until('the new agents\' snapshots at ztunnel', () => c.nodes.every((n) => z(n.name).counters.connects > connects.get(n.name)! && z(n.name).snapshotReceived), 60_000, 100);
    const agentReadyMs = performance.now() - t0;
    kubectl(['-n', 'istio-system', 'delete', 'secret', '-l', `owner=helm,name=${from}`]);
    for (const o of fromObjects) {
      const live = kubectl(['get', o.kind, o.name, '-n', 'istio-system', '-o', 'jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-name}', '--ignore-not-found']).stdout;
      if (live !== to.release) kubectl(['delete', o.kind, o.name, '-n', 'istio-system', '--ignore-not-found', '--wait=true']);
    }
    // Probe traffic past the cleanup too: ten more attempts from every pod.
    const after = { ...traffic.perPod() };
    await until('ten more probes from every pod', () => Object.keys(after).every((name) => traffic.perPod()[name]! >= after[name]! + 10), 60_000, 100);
    const probes = await traffic.stop();
    const sec = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    results[`${from} → ${to.release}`] = { probes, helmMs, agentReadyMs };
    process.stderr.write(`migration ${from} → ${to.release}: ${probes.attempts} probes (${Math.min(...Object.values(probes.perPod))}-${Math.max(...Object.values(probes.perPod))} per pod), ${probes.unredirected} unredirected; helm install ${sec(helmMs)}, new agent ready + ztunnel snapshot ${sec(agentReadyMs)}${probes.failures.length ? `; failures ${JSON.stringify(probes.failures.slice(0, 20))}` : ''}\n`);
    return probes;
  };

  beforeAll(async () => {
    const image = upstreamAgentImage();
    upstreamChart = join(ensureIstioModule(), 'manifests', 'charts', 'istio-cni');
    c = await startE2eCluster({ nodes: NODES });
    for (const n of c.nodes) n.importImage(image.tarball);
    helm = await Helm.open();
  }, 2_700_000); // a first run builds upstream's plugin and agent (two Go builds of up to 18 min each)

  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail' && c) process.stderr.write(`${c.diagnostics()}\n`);
  });

  afterAll(async () => {
    if (Object.keys(results).length) process.stderr.write(`migration results: ${JSON.stringify(results)}\n`);
    helm?.close();
    await c?.stop();
  }, 120_000);

  it('1. Istio\'s chart with upstream\'s agent: the ambient pods are redirected before their containers start, in ztunnel, in the probe set', async () => {
    await helmRun(['install', 'istio-cni', upstreamChart, '-n', 'istio-system', '--create-namespace', '-f', values(), '--set', `global.tag=${UPSTREAM_TAG}`, '--wait', '--timeout', '240s']);
    await until('upstream\'s agent Ready', agentReady(UPSTREAM_IMAGE), 120_000, 500);
    kubectl(['apply', '-f', '-'], list(namespace(NS, { 'istio.io/dataplane-mode': 'ambient' }), deployment(NS, 'web', REPLICAS),
      namespace('e2e-plain'), pod('e2e-plain', 'control')));
    const ready = await until(`${REPLICAS} Ready pods`, () => {
      const ps = pods();
      return ps.length === REPLICAS && ps.every((p) => p.ready) ? ps : undefined;
    }, 240_000, 1000);
    expect(new Set(ready.map((p) => p.node)).size).toBe(NODES); // the scheduler spread them
    for (const p of ready) {
      expect(capturedAtStart(p), `${p.name}'s first connection was redirected`).toBe(true);
      expect(z(p.node).active.has(p.uid), `${p.name} in its node's ztunnel`).toBe(true);
      expect(p.annotations['ambient.istio.io/redirection']).toBe('enabled');
    }
    expect(probeSet().map((e) => `${e.split(' ')[0]} ${e.split(' ')[2]}`).sort()).toEqual(ready.map((p) => `${p.node} ${p.ip}`).sort());
    for (const n of c.nodes) {
      const conflist = JSON.parse(readFileSync(`${n.dir}/cni-net/10-pwt-bridge.conflist`, 'utf8')) as { plugins: Array<{ type: string }> };
      expect(conflist.plugins.map((p) => p.type)).toEqual(['bridge', 'portmap', 'istio-cni']);
      // Upstream's rules are in nft, and its detection's usability probe (a rule added and deleted
      // with iptables-legacy) left a legacy nat table: what makes a fresh detection here say legacy.
      expect(n.exec(['iptables-nft-save', '-t', 'nat']).stdout).toMatch(/^:ISTIO_POSTRT /m);
      expect(n.exec(['iptables-legacy-save']).stdout).toMatch(/^\*nat$/m);
      expect(n.exec(['iptables-legacy-save']).stdout).not.toMatch(/ISTIO/);
    }

    // The probe loop's control: from a pod outside the mesh every attempt fails.
    const control = await until('the control pod Ready', () => pods('e2e-plain').find((p) => p.ready), 120_000, 500);
    const traffic = probeTraffic([control]);
    await until('control probes', () => traffic.attempts() >= 3, 30_000, 200);
    const run = await traffic.stop();
    expect(run.unredirected).toBe(run.attempts);
  }, 600_000);

  /** A switch keeps every pod as it was, then the new agent enrolls a new pod as its own. */
  const expectCarriedOver = async (before: ReturnType<typeof snapshot>, probes: ProbeRun) => {
    const after = snapshot();
    expect(after.pods).toEqual(before.pods);
    expect(after.sandboxes).toEqual(before.sandboxes);
    for (const name of Object.keys(before.rules)) expect(after.rules[name], `${name}'s rules`).toBe(before.rules[name]);
    expect(after.ztunnel).toEqual(before.ztunnel);
    expect(after.probeSet).toEqual(before.probeSet);
    // Every pod probed throughout (a loop is ~10 attempts a second while redirected).
    for (const p of before.pods) expect(probes.perPod[p.name] ?? 0, `${p.name}'s probes`).toBeGreaterThan(30);
    expect(probes.failures).toEqual([]);
    // The new agent enrolls a pod of its own (through its plugin, before the container starts).
    const known = new Set(after.pods.map((p) => p.uid));
    kubectl(['-n', NS, 'scale', 'deployment', 'web', `--replicas=${after.pods.length + 1}`]);
    const added = await until('the added pod Ready', () => pods().find((p) => !known.has(p.uid) && p.ready), 120_000, 500);
    expect(capturedAtStart(added), 'the added pod was redirected from its start').toBe(true);
    await until('the added pod in its node\'s probe set', () => probeSet().some((e) => e.startsWith(`${added.node} `) && e.endsWith(` ${added.ip}`)), 30_000, 200);
  };

  it('2. upstream → podwire: helm install podwire --take-ownership --force; podwire\'s agent adopts every pod without restarting or rewriting it', async () => {
    const before = snapshot();
    const hostBefore = hostRules();
    const probes = await switchRelease('istio-cni', { release: 'podwire', chart: CHART_DIR, tag: VERSION, image: PODWIRE_IMAGE });
    const hostAfter = hostRules();
    if (hostAfter !== hostBefore) process.stderr.write(`migration: host rules differ after upstream → podwire:\n--- before\n${hostBefore}\n--- after\n${hostAfter}\n`);
    await expectCarriedOver(before, probes);
    for (const n of c.nodes) {
      const conflist = JSON.parse(readFileSync(`${n.dir}/cni-net/10-pwt-bridge.conflist`, 'utf8')) as { plugins: Array<{ type: string }> };
      expect(conflist.plugins.map((p) => p.type)).toEqual(['bridge', 'portmap', 'istio-cni']);
    }
    // Upstream's RBAC went with its release record; its ServiceAccount too.
    const left = kubectl(['get', 'clusterrole,clusterrolebinding,serviceaccount', '-A', '-o', 'name']).stdout.split('\n');
    expect(left.filter((n) => /\/istio-cni(-repair-role|-ambient|-repair-rolebinding)?$/.test(n))).toEqual([]);
  }, 900_000);

  it('3. podwire → upstream: helm install istio-cni --take-ownership --force; upstream\'s agent adopts every pod, podwire\'s own included, without restarting or rewriting it', async () => {
    const before = snapshot();
    const hostBefore = hostRules();
    // Step 0 of the way back (docs/migration.md): upstream's agent re-detects the iptables
    // variant at every start and, on a node an agent ran on, gets legacy (its own first
    // detection left a legacy nat table); pinned to the variant podwire kept, it finds every
    // pod's rules where they are. Without it (measured): a second, legacy set in every pod.
    const modes = c.nodes.map((n) => (JSON.parse(readFileSync(join(n.dir, 'istio-cni', 'iptables-backend.json'), 'utf8')) as { mode: string }).mode);
    expect(modes).toEqual(c.nodes.map(() => 'nft')); // what upstream's first start chose, and podwire adopted
    const kept = { mode: modes[0]! };
    const probes = await switchRelease('podwire', { release: 'istio-cni', chart: upstreamChart, tag: UPSTREAM_TAG, image: UPSTREAM_IMAGE, set: [`env.FORCE_IPTABLES_BINARY=${kept.mode}`] });
    const hostAfter = hostRules();
    if (hostAfter !== hostBefore) process.stderr.write(`migration: host rules differ after podwire → upstream:\n--- before\n${hostBefore}\n--- after\n${hostAfter}\n`);
    await expectCarriedOver(before, probes);
    expect(kubectl(['get', 'serviceaccount', '-n', 'istio-system', '-o', 'name']).stdout).not.toContain('serviceaccount/podwire');
  }, 900_000);
});
