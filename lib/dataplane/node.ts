// A node's dataplane assembled from its parts: the host (node) netns handle,
// the probe set and host probe rule in it, the in-pod redirection backend,
// the ZDS server ztunnel connects to, and the enrollment pipeline over them.
// This is what the node agent runs; the demo and the benchmarks use it too.
import type { Netns } from '../net/netns/netns.js';
import { apply, remove, type Backend, type EngineOptions } from '../redirect/apply.js';
import type { IptablesMode } from '../net/xtables/iptables.js';
import { hostProbeRules } from '../redirect/hostprobe.js';
import type { RuleModel } from '../redirect/model.js';
import { Dataplane } from './dataplane.js';
import { IpsetProbeSet } from './probe-set-ipset.js';
import { NftProbeSet } from './probe-set-nft.js';
import { RedirectRules, type NodeRedirectSettings } from './rules-redirect.js';
import type { ProbeSet, ZtunnelSink } from './types.js';
import { ZdsZtunnel } from './ztunnel-zds.js';
import type { ZdsServerOptions } from '../zds/server.js';

export interface NodeDataplaneOptions extends NodeRedirectSettings {
  /** The node's own netns (in production: the host's; in the demo: a simulated node). */
  host: Netns;
  backend: Backend;
  /** iptables binary variant (FORCE_IPTABLES_BINARY); absent → the system's default. */
  iptablesMode?: IptablesMode;
  /** ZDS socket path (default /var/run/ztunnel/ztunnel.sock). */
  zdsPath?: string;
  /** ZDS socket file mode (default 0o600). */
  zdsMode?: number;
  /** Accept only ZDS peers with these uids (SO_PEERCRED); default: anyone, as upstream. */
  zdsAllowedUids?: number[];
  /** Pods reconciled at once (default RECONCILE_CONCURRENCY). */
  concurrency?: number;
  /** The kubelet's UID: nft has no `--socket-exists`, so the nft host rule matches it. */
  kubeletUid?: number;
  /** Start serving ZDS at once (default true); the agent listens only after its startup snapshot. */
  listen?: boolean;
  /** The host's /proc (the agent's hostProcRoot): its `1/ns/net` is never accepted as a pod netns (nor `host`, nor the agent's own). */
  hostProcRoot?: string;
  /** The ZDS server's ack timeout (ms, default 5000). */
  zdsAckTimeoutMs?: number;
  /** Substitute for the ZDS server (tests). */
  ztunnel?: ZtunnelSink;
  warn?: (message: string) => void;
}

/** The ZDS server's options out of the node's (only those given, so the server's defaults apply). */
function zdsOptions(opts: NodeDataplaneOptions): Omit<ZdsServerOptions, 'provider'> {
  const warn = opts.warn;
  return {
    ...(opts.zdsPath ? { path: opts.zdsPath } : {}),
    ...(opts.zdsMode !== undefined ? { mode: opts.zdsMode } : {}),
    ...(opts.zdsAllowedUids !== undefined ? { allowedUids: opts.zdsAllowedUids } : {}),
    ...(opts.zdsAckTimeoutMs !== undefined ? { ackTimeoutMs: opts.zdsAckTimeoutMs } : {}),
    ...(warn ? { warn: (err: Error) => warn(`ztunnel server: ${err.message}`) } : {}),
  };
}

export class NodeDataplane {
  readonly dataplane: Dataplane;
  readonly probes: ProbeSet;
  readonly rules: RedirectRules;
  readonly hostRules: RuleModel;
  readonly zds: ZdsZtunnel | undefined;

  private constructor(private readonly opts: NodeDataplaneOptions, probes: ProbeSet) {
    this.probes = probes;
    this.rules = new RedirectRules(this.engine(), opts);
    this.hostRules = hostProbeRules({
      ipv6: opts.ipv6 ?? true,
      ...(opts.snatIp ? { snatIp: opts.snatIp } : {}),
      ...(opts.snatIpv6 ? { snatIpv6: opts.snatIpv6 } : {}),
      ...(opts.backend === 'nftables' ? { kubeletUid: opts.kubeletUid ?? 0 } : {}),
    });
    let dp: Dataplane | undefined;
    this.zds = opts.ztunnel ? undefined : new ZdsZtunnel(zdsOptions(opts), () => dp?.snapshot() ?? []);
    dp = new Dataplane({
      rules: this.rules, ztunnel: opts.ztunnel ?? this.zds!, probes, hostNetns: opts.host.id,
      ...(opts.hostProcRoot !== undefined ? { hostProcRoot: opts.hostProcRoot } : {}),
      ...(opts.concurrency !== undefined ? { concurrency: opts.concurrency } : {}), ...(opts.warn ? { warn: opts.warn } : {}),
    });
    this.dataplane = dp;
  }

  /**
   * Builds the node side: probe set(s) and the host probe rule in the host
   * netns (idempotent: an agent restart finds them in place), then the ZDS
   * server starts listening.
   */
  static async start(opts: NodeDataplaneOptions): Promise<NodeDataplane> {
    const ipv6 = opts.ipv6 ?? true;
    const probes = opts.backend === 'iptables' ? new IpsetProbeSet(await opts.host.netlink(), ipv6) : new NftProbeSet(opts.host, ipv6);
    const node = new NodeDataplane(opts, probes);
    await node.dataplane.start();
    await apply(opts.host, node.hostRules, node.engine());
    await node.rules.prepare();  // the first pod should not pay for the engine's references
    if (opts.listen ?? true) node.listen();
    return node;
  }

  private engine(): EngineOptions {
    return { backend: this.opts.backend, ...(this.opts.iptablesMode ? { iptablesMode: this.opts.iptablesMode } : {}) };
  }

  /** Starts serving ZDS (idempotent): a ztunnel connecting now gets the whole pod cache. */
  listen(): void {
    this.zds?.listen();
  }

  /** Stops serving ztunnel and releases every cached netns. Host rules and sets stay (safe upgrade). */
  async close(): Promise<void> {
    await this.dataplane.close();
    await this.zds?.close();
  }

  /** Removes the host probe rule (uninstall); the probe sets' table stays for nft, as upstream. */
  async removeHostRules(): Promise<void> {
    await remove(this.opts.host, this.hostRules, this.engine());
  }

  /** Uninstall (§5.13): the host probe rule, then the probe set(s) flushed and removed. */
  async uninstall(): Promise<void> {
    await this.removeHostRules();
    await this.probes.flush().catch(() => undefined);  // a set already gone is no reason to keep the rest
    await this.probes.destroy();
  }
}
