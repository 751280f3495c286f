// The way a cluster runs podwire, end to end: a real control plane with controller-manager and
// scheduler, two real kubelet nodes (containerd 1.6 + runc, bridge + host-local), the chart
// installed with Helm, the DaemonSet running podwire's image, and pods started by the kubelet
// through the CNI chain — never a test playing the kubelet. One cluster for the whole file; the
// tests run in order, each leaving the cluster as the next expects (see each test's comment).
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startE2eCluster, type E2eCluster } from '../helpers/cluster.js';
import { CHART_DIR, Helm } from '../helpers/helm.js';
import { privileged } from '../helpers/privileged.js';
import { until } from '../helpers/kube.js';
import { NODE_TOOLS } from '../../scripts/kube/node.mjs';
import { Netns } from '../../lib/net/netns/netns.js';
import { connectTcp } from '../../lib/net/sock/connect.js';
import { APP_PORT, TEST_NET, deployment, list, namespace, pod, sidecarPod } from './manifests.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const TAINT = 'cni.podwire.io/not-ready';
const REDIRECTION = 'ambient.istio.io/redirection';
import { sleep } from '../../lib/util/sleep.js';

interface PodInfo { name: string; uid: string; ip: string; node: string; ready: boolean; phase: string; annotations: Record<string, string> }

describe.skipIf(!privileged(...NODE_TOOLS, 'busybox'))('a real node: kubelet, scheduler and controller-manager run the chart\'s DaemonSet from podwire\'s image', () => {
  let c: E2eCluster;
  let helm: Helm;

  const kubectl = (args: string[], input?: string) => c.kubectl(args, input === undefined ? {} : { input });
  const apply = (yaml: string) => kubectl(['apply', '-f', '-'], yaml);
  const pods = (ns: string, selector?: string): PodInfo[] => (c.getJson(['get', 'pods', '-n', ns, ...(selector ? ['-l', selector] : [])]).items as any[]).map((p) => ({
    name: p.metadata.name, uid: p.metadata.uid, ip: p.status.podIP ?? '', node: p.spec.nodeName ?? '', phase: p.status.phase,
    ready: (p.status.conditions ?? []).some((x: any) => x.type === 'Ready' && x.status === 'True'), annotations: p.metadata.annotations ?? {},
  }));
  const agentPods = () => pods('istio-system', 'k8s-app=istio-cni-node');
  const allReady = (ns: string, n: number, selector?: string) => () => {
    const p = pods(ns, selector);
    return p.length === n && p.every((x) => x.ready) ? p : undefined;
  };
  /** The pod's first connection (to TEST_NET:80) was accepted by ztunnel's 15001 in its own netns. */
  const capturedAtStart = (p: PodInfo) => c.ztunnels.get(p.node)!.captures.some((x) => x.uid === p.uid && x.port === 15001 && x.origDst.address === TEST_NET && x.origDst.port === 80);
  const enrolledInZtunnel = (p: PodInfo) => c.ztunnels.get(p.node)!.active.has(p.uid);
  const conflist = (node: string) => JSON.parse(readFileSync(`${c.nodeOf(node).dir}/cni-net/10-pwt-bridge.conflist`, 'utf8')) as { plugins: Array<{ type: string }> };
  /** argv run in pod `uid`'s netns (from the node's namespaces, so the node's tools and paths). */
  const podExec = (p: PodInfo, argv: string[]) => {
    const pid = c.podPids(p.uid)[0];
    if (!pid) throw new Error(`pod ${p.name}: no process`);
    return c.nodeOf(p.node).exec(['nsenter', `--net=/proc/${nsPid(pid)}/ns/net`, '--', ...argv]);
  };
  /** The pid of host pid `pid` in the node's pid namespace: NSpid's second level (host, node, the pod's own…). */
  const nsPid = (pid: number) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('NSpid:'))!.split(/\s+/)[2]);
  const httpFrom = async (p: PodInfo, ip: string) => {
    const ns = Netns.open(c.podNetnsPath(p.uid));
    try {
      const sock = await connectTcp(ns, ip, APP_PORT, { timeoutMs: 3000 });
      return await new Promise<string>((resolve, reject) => {
        let body = '';
        sock.setEncoding('utf8');
        sock.on('data', (d) => { body += d; });
        sock.on('end', () => resolve(body));
        sock.on('error', reject);
        sock.write(`GET / HTTP/1.0\r\nHost: ${ip}\r\n\r\n`);
      });
    } finally {
      ns.close();
    }
  };

  beforeAll(async () => {
    c = await startE2eCluster({ nodes: 2 });
    helm = await Helm.open();
  }, 300_000);

  // A failed step prints what a person would look at: pods, events, the agents' and kubelets' logs.
  afterEach((ctx) => {
    if (ctx.task.result?.state === 'fail' && c) process.stderr.write(`${c.diagnostics()}\n`);
  });

  afterAll(async () => {
    helm?.close();
    await c?.stop();
  }, 120_000);

  const values = (tag = VERSION) => helm.valuesFile({ hub: 'localhost', tag, pullPolicy: 'IfNotPresent', nodeReadinessTaint: { enabled: true } });
  const helmRun = (args: string[]) => helm.run(args, { kubeconfig: c.cp.adminKubeconfig, timeoutMs: 240_000 });

  it('1. helm install: the DaemonSet is Ready on both nodes, the installer chains podwire into each node\'s conflist, and the readiness taint comes and goes', async () => {
    // Every change of every Node's taints, as the apiserver's watch delivers them.
    const seen = new Map<string, boolean[]>();
    const watch: ChildProcess = spawn(c.bins.kubectl, ['--kubeconfig', c.cp.adminKubeconfig, '--cache-dir', `${c.dir}/kubectl-cache`, 'get', 'nodes', '--watch', '-o',
      'jsonpath={.metadata.name} {.spec.taints[*].key}{"\\n"}'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let buf = '';
    watch.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const [name, ...keys] = buf.slice(0, i).trim().split(/\s+/);
        buf = buf.slice(i + 1);
        const tainted = keys.includes(TAINT);
        const s = seen.get(name!) ?? [];
        if (s.at(-1) !== tainted) s.push(tainted);
        seen.set(name!, s);
      }
    });
    try {
      await until('the node watch', () => seen.size === 2, 20_000);
      await helmRun(['install', 'podwire', CHART_DIR, '-n', 'istio-system', '--create-namespace', '-f', values(), '--wait', '--timeout', '180s']);
      const agents = await until('both agents Ready', allReady('istio-system', 2, 'k8s-app=istio-cni-node'), 60_000);
      expect(new Set(agents.map((a) => a.node))).toEqual(new Set(c.nodes.map((n) => n.name)));
      for (const n of c.nodes) {
        const types = conflist(n.name).plugins.map((p) => p.type);
        expect(types).toEqual(['bridge', 'portmap', 'istio-cni']);
        expect(readdirSync(`${n.dir}/cni-bin`)).toContain('istio-cni');
      }
      await until('every node untainted', () => [...seen.values()].every((s) => s.at(-1) === false), 30_000);
      for (const n of c.nodes) expect(seen.get(n.name)).toEqual([false, true, false]);
    } finally {
      watch.kill('SIGKILL');
    }
  }, 300_000);

  it('2. a Deployment of 20 in an ambient namespace: every pod Ready through probes that cross the probe SNAT, redirected before its container started, pod → pod traffic captured on 15001, annotated, with Events', async () => {
    apply(list(namespace('e2e-ambient', { 'istio.io/dataplane-mode': 'ambient' }), deployment('e2e-ambient', 'web', 20)));
    const ready = await until('20 Ready pods', allReady('e2e-ambient', 20), 240_000, 1000);
    expect(new Set(ready.map((p) => p.node)).size).toBe(2); // the scheduler spread them
    for (const p of ready) {
      expect(enrolledInZtunnel(p), `${p.name} in its node's ztunnel`).toBe(true);
      expect(capturedAtStart(p), `${p.name}'s first connection was redirected`).toBe(true);
      expect(p.annotations[REDIRECTION]).toBe('enabled');
    }
    // Pod → pod by IP, across nodes: captured on 15001 in the source pod, original destination kept.
    const a = ready.find((p) => p.node === c.nodes[0]!.name)!;
    const b = ready.find((p) => p.node === c.nodes[1]!.name)!;
    const z = c.ztunnels.get(a.node)!;
    const before = z.captures.length;
    await httpFrom(a, b.ip).catch(() => undefined); // the stand-in accepts and closes
    await until('the capture', () => z.captures.slice(before).some((x) => x.uid === a.uid && x.port === 15001 && x.origDst.address === b.ip && x.origDst.port === APP_PORT), 5000);
    const events = kubectl(['get', 'events', '-n', 'e2e-ambient', '-o', 'jsonpath={range .items[*]}{.reason}{"\\n"}{end}']).stdout.split('\n');
    expect(events).toContain('Scheduled');
    expect(events).toContain('Started');
    expect(events).not.toContain('FailedCreatePodSandBox');
  }, 300_000);

  it('3. a plain pod starts untouched and reaches a pod on the other node; a sidecar-mode pod gets the sidecar rules from the plugin', async () => {
    const [n1, n2] = [c.nodes[0]!.name, c.nodes[1]!.name];
    apply(list(namespace('e2e-plain'),
      pod('e2e-plain', 'plain-1', { nodeName: n1 }), pod('e2e-plain', 'plain-2', { nodeName: n2 }),
      sidecarPod('e2e-plain', 'sidecar-1', n1)));
    const ps = await until('3 Ready pods', allReady('e2e-plain', 3), 120_000, 500);
    const byName = Object.fromEntries(ps.map((p) => [p.name, p]));
    for (const name of ['plain-1', 'plain-2', 'sidecar-1']) {
      const p = byName[name]!;
      expect(enrolledInZtunnel(p)).toBe(false);
      expect(capturedAtStart(p)).toBe(false);
      expect(p.annotations[REDIRECTION]).toBeUndefined();
    }
    for (const name of ['plain-1', 'plain-2']) {
      const rules = podExec(byName[name]!, ['iptables-save']).stdout + podExec(byName[name]!, ['nft', 'list', 'ruleset']).stdout;
      expect(rules, `${name} has no mesh rules`).not.toMatch(/ISTIO|istio|ztunnel/);
    }
    expect(await httpFrom(byName['plain-1']!, byName['plain-2']!.ip)).toContain('podwire-test');
    const sidecarRules = podExec(byName['sidecar-1']!, ['iptables-save']).stdout;
    expect(sidecarRules).toContain('-A ISTIO_OUTPUT');
    expect(sidecarRules).toContain('-A ISTIO_INBOUND');
  }, 180_000);

  /** The node's probe-set members (pod IPs the host probe rule SNATs for), from ipset or nft. */
  const probeSet = (node: string): string[] => {
    const n = c.nodeOf(node);
    const ipset = n.exec(['ipset', 'list', '-o', 'save']).stdout;
    const fromIpset = [...ipset.matchAll(/^add \S+ (\S+)/gm)].map((m) => m[1]!);
    const nft = n.exec(['nft', '-j', 'list', 'sets']).stdout;
    const fromNft: string[] = [];
    try {
      for (const item of (JSON.parse(nft) as { nftables: any[] }).nftables) {
        for (const e of item.set?.elem ?? []) if (typeof e === 'string') fromNft.push(e);
      }
    } catch {
      // no nft sets
    }
    return [...fromIpset, ...fromNft].sort();
  };
  const ambientIpsOn = (node: string) => pods('e2e-ambient').filter((p) => p.node === node && p.ip).map((p) => p.ip).sort();
  const agentOn = (node: string) => agentPods().find((a) => a.node === node);
  /** Host pid of the agent's node process (the container's `podwire agent`). */
  const agentPid = (node: string) => {
    const a = agentOn(node);
    if (!a) throw new Error(`no agent on ${node}`);
    return c.podPids(a.uid).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('agent'));
  };
  /** Every ambient pod of the deployment is Ready, enrolled once, and its node's probe set is exactly their IPs. */
  const everythingEnrolled = async (what: string, timeoutMs: number) => {
    await until(what, () => {
      const ps = pods('e2e-ambient', 'app=web');
      if (ps.length !== 20 || !ps.every((p) => p.ready && enrolledInZtunnel(p))) return false;
      for (const n of c.nodes) {
        const want = new Set(ps.filter((p) => p.node === n.name).map((p) => p.uid));
        const have = [...c.ztunnels.get(n.name)!.active.keys()].filter((uid) => pods('e2e-ambient').some((p) => p.uid === uid));
        if (have.length !== want.size) return false;
        if (JSON.stringify(probeSet(n.name)) !== JSON.stringify(ambientIpsOn(n.name))) return false;
      }
      return true;
    }, timeoutMs, 1000);
  };

  it('4. agent down (its pod replaced by one that cannot start): a plain pod starts at once, an ambient pod fails closed and is enrolled once an agent is back; kill -9 of an agent loses nothing', async () => {
    const n1 = c.nodes[0]!;
    // The image is kept under another name and its tag removed from the node: the DaemonSet's next
    // pod there cannot start (ErrImagePull: nothing is pulled here), so the agent stays down for
    // as long as this test needs — the way a failed image pull during an upgrade leaves a node.
    // A namespace without any meshed pod (e2e-plain holds a sidecar pod: docs/cni.md counts it as
    // one where new pods might need the plugin), known to the agent before it goes.
    apply(list(namespace('e2e-quiet')));
    await sleep(1500); // the agent's decision file is rewritten within 200 ms of a change
    const image = `localhost/podwire:${VERSION}`;
    n1.tagImage(image, `localhost/podwire-keep:${VERSION}`);
    expect(n1.exec(['ctr', '-a', n1.socket, '-n', 'k8s.io', 'images', 'rm', image]).code).toBe(0);
    kubectl(['-n', 'istio-system', 'delete', 'pod', agentOn(n1.name)!.name, '--wait=true']);
    await until('the replacement agent stuck', () => {
      const a = agentOn(n1.name);
      return a && a.phase === 'Pending' && !a.ready;
    }, 60_000);
    apply(list(pod('e2e-quiet', 'plain-gap', { nodeName: n1.name }), pod('e2e-ambient', 'ambient-gap', { nodeName: n1.name })));
    const plain = await until('plain-gap Ready', () => pods('e2e-quiet').find((p) => p.name === 'plain-gap' && p.ready), 30_000);
    expect(enrolledInZtunnel(plain)).toBe(false);
    await until('ambient-gap failing closed', () => kubectl(['get', 'events', '-n', 'e2e-ambient', '--field-selector', 'involvedObject.name=ambient-gap,reason=FailedCreatePodSandBox', '-o', 'name']).stdout.trim(), 60_000, 1000);
    const gap = (c.getJson(['get', 'pod', '-n', 'e2e-ambient', 'ambient-gap']) as any);
    expect(gap.status.phase).toBe('Pending');
    expect((gap.status.containerStatuses ?? []).filter((x: any) => x.state?.running)).toEqual([]);
    // An agent again: the kubelet's retry of the sandbox enrolls the waiting pod.
    n1.tagImage(`localhost/podwire-keep:${VERSION}`, image);
    kubectl(['-n', 'istio-system', 'delete', 'pod', agentOn(n1.name)!.name, '--wait=true']);
    await until('both agents Ready', allReady('istio-system', 2, 'k8s-app=istio-cni-node'), 90_000);
    const enrolled = await until('ambient-gap Ready', () => pods('e2e-ambient').find((p) => p.name === 'ambient-gap' && p.ready), 180_000, 1000);
    expect(capturedAtStart(enrolled)).toBe(true);
    kubectl(['delete', 'pod', '-n', 'e2e-ambient', 'ambient-gap', '--wait=true']);
    expect(kubectl(['get', 'events', '-n', 'e2e-quiet', '--field-selector', 'reason=FailedCreatePodSandBox', '-o', 'name']).stdout.trim()).toBe('');
    kubectl(['delete', 'namespace', 'e2e-quiet', '--wait=false']);
    await everythingEnrolled('everything enrolled after the gap', 60_000);

    // kill -9: the kubelet restarts the container; the new process adopts the node's state.
    const pid = agentPid(n1.name);
    expect(pid).toBeGreaterThan(0);
    process.kill(pid!, 'SIGKILL');
    await until('the agent restarted', () => agentPid(n1.name) !== undefined && agentPid(n1.name) !== pid && agentOn(n1.name)?.ready, 90_000, 500);
    await everythingEnrolled('everything enrolled after kill -9', 60_000);
  }, 420_000);

  it('5. kubelet restart, then a node restart: every pod redirected again, no stale probe-set entries', async () => {
    const [first, second] = c.nodes;
    const before = pods('e2e-ambient', 'app=web');
    await first!.restartKubelet({ downMs: 2000 });
    await until(`${first!.name} Ready again`, () => (c.getJson(['get', 'node', first!.name]).status.conditions as any[]).some((x) => x.type === 'Ready' && x.status === 'True'), 60_000);
    await everythingEnrolled('everything enrolled after the kubelet restart', 60_000);
    expect(pods('e2e-ambient', 'app=web').map((p) => p.uid).sort()).toEqual(before.map((p) => p.uid).sort()); // nothing was recreated

    // The reboot: every process of the second node dies, its /run is empty again.
    const z = c.ztunnels.get(second!.name)!;
    const capturesBefore = z.captures.length;
    await second!.restart({ downMs: 1000 });
    await everythingEnrolled('everything enrolled after the node restart', 240_000);
    for (const p of pods('e2e-ambient', 'app=web').filter((x) => x.node === second!.name)) {
      // the recreated sandbox's first connection was redirected too
      expect(z.captures.slice(capturesBefore).some((x) => x.uid === p.uid && x.origDst.address === TEST_NET), p.name).toBe(true);
    }
  }, 420_000);

  /** The pod's rules with their handles (a rewrite changes them), counters blanked (traffic moves them). */
  const podRules = (p: PodInfo) => (podExec(p, ['nft', '-a', 'list', 'ruleset']).stdout + podExec(p, ['iptables-save']).stdout)
    .replace(/^#.*$/gm, '').replace(/counter packets \d+ bytes \d+/g, 'counter').replace(/\[\d+:\d+\]/g, '[-]');

  it('6. helm upgrade to a new image tag while a Deployment scales between 5 and 30: no failed sandbox, nothing unredirected, the old agent\'s pods not rewritten', async () => {
    const tag = `${VERSION}-e2e`;
    for (const n of c.nodes) n.tagImage(`localhost/podwire:${VERSION}`, `localhost/podwire:${tag}`);
    apply(list(namespace('e2e-churn', { 'istio.io/dataplane-mode': 'ambient' }), deployment('e2e-churn', 'churn', 5)));
    await until('5 churn pods Ready', allReady('e2e-churn', 5), 120_000, 500);
    const web = pods('e2e-ambient', 'app=web')[0]!;
    const rulesBefore = podRules(web);
    let churning = true;
    const churn = (async () => {
      for (let i = 0; churning; i++) {
        kubectl(['-n', 'e2e-churn', 'scale', 'deployment', 'churn', `--replicas=${i % 2 ? 5 : 30}`]);
        await sleep(4000);
      }
    })();
    try {
      await sleep(3000);
      await helmRun(['upgrade', 'podwire', CHART_DIR, '-n', 'istio-system', '-f', values(tag), '--wait', '--timeout', '180s']);
      await until('both agents on the new tag', () => {
        const ds = c.getJson(['get', 'pods', '-n', 'istio-system', '-l', 'k8s-app=istio-cni-node']).items as any[];
        return ds.length === 2 && ds.every((p) => p.spec.containers[0].image.endsWith(`:${tag}`) && p.status.conditions?.some((x: any) => x.type === 'Ready' && x.status === 'True'));
      }, 120_000, 1000);
      await sleep(6000);
    } finally {
      churning = false;
      await churn;
    }
    kubectl(['-n', 'e2e-churn', 'scale', 'deployment', 'churn', '--replicas=30']);
    const churned = await until('30 churn pods Ready', allReady('e2e-churn', 30), 240_000, 1000);
    for (const p of churned) {
      expect(enrolledInZtunnel(p), p.name).toBe(true);
      expect(capturedAtStart(p), p.name).toBe(true);
    }
    const failed = kubectl(['get', 'events', '-n', 'e2e-churn', '--field-selector', 'reason=FailedCreatePodSandBox', '-o', 'name']).stdout.trim();
    expect(failed).toBe('');
    const rulesAfter = podRules(web);
    expect(rulesAfter).toBe(rulesBefore);
    kubectl(['delete', 'namespace', 'e2e-churn', '--wait=false']);
  }, 600_000);

  it('7. helm uninstall: the chain entry, the host probe rule and its set go; running pods keep working', async () => {
    await helmRun(['uninstall', 'podwire', '-n', 'istio-system', '--wait', '--timeout', '120s']);
    await until('no agent pods', () => agentPods().length === 0, 90_000);
    for (const n of c.nodes) {
      expect(conflist(n.name).plugins.map((p) => p.type)).toEqual(['bridge', 'portmap']);
      const host = n.exec(['iptables-save']).stdout + n.exec(['nft', 'list', 'ruleset']).stdout + n.exec(['ipset', 'list', '-n']).stdout;
      expect(host).not.toMatch(/ISTIO|istio|ztunnel/);
    }
    await sleep(8000); // several probe periods
    const web = pods('e2e-ambient', 'app=web');
    expect(web.filter((p) => p.ready)).toHaveLength(20);
    const a = web.find((p) => p.node === c.nodes[0]!.name)!;
    const b = web.find((p) => p.node === c.nodes[1]!.name)!;
    expect(await httpFrom(a, b.ip)).toContain('podwire-test');
  }, 240_000);
});
