// What `podwire demo` proves with real traffic, one check per claim. Each
// check runs for every pod and counts successes; a failure keeps its reason.
import type { Netns } from '../net/netns/netns.js';
import { DEFAULT_HOST_PROBE_SNAT_IP, DEFAULT_HOST_PROBE_SNAT_IPV6, INPOD_MARK } from '../redirect/model.js';
import { mapLimit } from '../util/limit.js';
import { APP_PORT } from './app.js';
import type { DemoPod } from './topology.js';
import { hostPort, tcpProbe, udpProbe, type Reply } from './traffic.js';

export interface CheckResult {
  name: string;
  /** What passing means, for the summary. */
  claim: string;
  passed: number;
  failed: number;
  /** First few failure reasons. */
  failures: string[];
}

export interface CheckContext {
  node: Netns;
  external: { ns: Netns; pod: DemoPod };
  pods: Array<{ pod: DemoPod; ns: Netns }>;
  ipv6: boolean;
  concurrency?: number;
}

type Probe = (i: number) => Promise<string | undefined>;  // undefined = pass, string = why it failed

async function run(name: string, claim: string, n: number, probe: Probe, concurrency: number): Promise<CheckResult> {
  const r: CheckResult = { name, claim, passed: 0, failed: 0, failures: [] };
  await mapLimit(Array.from({ length: n }, (_, i) => i), concurrency, async (i) => {
    let why: string | undefined;
    try {
      why = await probe(i);
    } catch (err) {
      why = `${(err as { code?: string }).code ?? 'error'}: ${(err as Error).message}`;
    }
    if (why === undefined) r.passed++;
    else {
      r.failed++;
      if (r.failures.length < 5) r.failures.push(why);
    }
  });
  return r;
}

const expectZtunnel = (r: Reply, uid: string, port: number, origDst: string, redirected: boolean): string | undefined => {
  if (r.by !== 'ztunnel') return `expected ztunnel ${uid} on ${port}, got: ${r.line || '(nothing)'}`;
  if (r.uid !== uid || r.port !== port || r.origDst !== origDst || r.redirected !== redirected)
    return `expected ${uid}:${port} orig_dst=${origDst} redirected=${redirected}, got ${r.uid}:${r.port} orig_dst=${r.origDst} redirected=${r.redirected}`;
  return undefined;
};

export async function runChecks(ctx: CheckContext): Promise<CheckResult[]> {
  const c = ctx.concurrency ?? 16;
  const { pods } = ctx;
  const n = pods.length;
  const next = (i: number) => pods[(i + 1) % n]!;
  const out: CheckResult[] = [];
  out.push(await run('outbound-v4', 'pod → pod TCP lands on ztunnel 15001 in the source pod, original destination kept', n, async (i) => {
    const src = pods[i]!;
    const dst = next(i).pod;
    return expectZtunnel(await tcpProbe(src.ns, dst.ip4, APP_PORT), src.pod.uid, 15001, hostPort(dst.ip4, APP_PORT), true);
  }, c));
  if (ctx.ipv6) {
    out.push(await run('outbound-v6', 'the same over IPv6', n, async (i) => {
      const src = pods[i]!;
      const dst = next(i).pod;
      return expectZtunnel(await tcpProbe(src.ns, dst.ip6, APP_PORT), src.pod.uid, 15001, hostPort(dst.ip6, APP_PORT), true);
    }, c));
  }
  out.push(await run('inbound', 'TCP into a pod from outside the mesh lands on ztunnel 15006 in that pod', n, async (i) => {
    const dst = pods[i]!.pod;
    return expectZtunnel(await tcpProbe(ctx.external.ns, dst.ip4, APP_PORT), dst.uid, 15006, hostPort(dst.ip4, APP_PORT), true);
  }, c));
  out.push(await run('dns-udp', 'UDP DNS to any resolver lands on ztunnel 15053 and the reply comes back from the resolver address', n, async (i) => {
    const r = await udpProbe(pods[i]!.ns, '10.96.0.10', 53);
    return r.from === '10.96.0.10:53' ? undefined : `reply came from ${r.from}`;
  }, c));
  out.push(await run('dns-tcp', 'TCP DNS lands on ztunnel 15053', n, async (i) => {
    const src = pods[i]!;
    return expectZtunnel(await tcpProbe(src.ns, '10.96.0.10', 53), src.pod.uid, 15053, hostPort('10.96.0.10', 53), true);
  }, c));
  out.push(await run('probe-v4', `node-originated probes reach the app untouched, SNATed to ${DEFAULT_HOST_PROBE_SNAT_IP}`, n, async (i) => {
    const dst = pods[i]!.pod;
    const r = await tcpProbe(ctx.node, dst.ip4, APP_PORT);
    if (r.by !== 'app' || r.pod !== dst.name) return `expected the app of ${dst.name}, got: ${r.line || '(nothing)'}`;
    return r.peer === DEFAULT_HOST_PROBE_SNAT_IP ? undefined : `app saw peer ${r.peer}, not the SNAT address`;
  }, c));
  if (ctx.ipv6) {
    out.push(await run('probe-v6', `the same over IPv6, SNATed to ${DEFAULT_HOST_PROBE_SNAT_IPV6}`, n, async (i) => {
      const dst = pods[i]!.pod;
      const r = await tcpProbe(ctx.node, dst.ip6, APP_PORT);
      if (r.by !== 'app' || r.pod !== dst.name) return `expected the app of ${dst.name}, got: ${r.line || '(nothing)'}`;
      return r.peer === DEFAULT_HOST_PROBE_SNAT_IPV6 ? undefined : `app saw peer ${r.peer}, not the SNAT address`;
    }, c));
  }
  out.push(await run('ztunnel-mark', `ztunnel's own traffic (SO_MARK 0x${INPOD_MARK.toString(16)}) is not looped: it reaches the peer's 15008 directly`, n, async (i) => {
    const src = pods[i]!;
    const dst = next(i).pod;
    return expectZtunnel(await tcpProbe(src.ns, dst.ip4, 15008, { mark: INPOD_MARK }), dst.uid, 15008, hostPort(dst.ip4, 15008), false);
  }, c));
  return out;
}
