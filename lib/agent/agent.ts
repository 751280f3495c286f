// `podwire agent`: the ambient node agent assembled (§5, architecture "The
// node process"). Start order (§5.2, §5.3):
//   health + metrics servers → host netns → backend → host probe set + rule
//   (retried) → CNI endpoint (answers "not ready" until the snapshot is
//   restored) → informers synced → startup snapshot restored → queued DELs
//   applied → CNI work taken → ZDS served → work queue runs → drift check → ready.
// ZDS is served only after the snapshot, so the first ztunnel to connect
// gets every restored pod. Stop: not ready → stop taking work → decide
// whether this is an upgrade/reboot (keep everything) or an uninstall
// (remove the host rule and sets) → release every netns fd.
import { releaseAllPods } from './release-pods.js';
import { existsSync } from 'node:fs';
import type { V1Pod } from '@kubernetes/client-node';
import { AmbientController, podIps, type DataplaneLike } from '../ambient/controller.js';
import { SHIM_REQUEST_MAX_BYTES, startCniEndpoint, type CniEndpoint } from '../cni/endpoint.js';
import { openPodNetns, scanPodNetns, type ProcScanResult } from '../dataplane/proc-scan.js';
import type { NetnsRef } from '../dataplane/netns-ref.js';
import { NodeDataplane } from '../dataplane/node.js';
import type { Dataplane } from '../dataplane/dataplane.js';
import type { PodInfo } from '../dataplane/types.js';
import { KubeClient } from '../kube/client.js';
import { loadCredentials } from '../kube/config.js';
import { createPodEvent } from '../kube/events.js';
import { trimNativeHeap } from '../net/heap.js';
import { Netns } from '../net/netns/netns.js';
import type { Backend } from '../redirect/apply.js';
import { selectBackend, selectIptablesVariant, type IptablesSelection } from './backend-select.js';
import { resolveKubeletUid, type KubeletUid } from './kubelet-uid.js';
import { cniAddHandler, hostPath, netnsIdentity, ownNetns, sameIdentity, type RefusedNetns } from '../cni/cmdadd.js';
import { selectionPolicy, type AgentConfig } from './config.js';
import { DriftCheck } from './drift-check.js';
import { startHealthServer, startMetricsServer, type HealthServer, type RunningServer } from './health.js';
import { createLogging, podFields, type Logger, type Logging } from '../util/log.js';
import { createAgentMetrics, type AgentMetrics } from './metrics.js';
import { Readiness } from './readiness.js';
import { decideCleanup, type CleanupDecision } from './safe-upgrade.js';
import { activeAmbientPods, restoreSnapshot, type SnapshotRestore } from './snapshot.js';
import { drainDelQueue, type DelRecord } from '../cni/del-queue.js';
import { DecisionFileWriter } from '../cni/decision-file.js';
import { prepareRunDir } from '../cni/run-dir.js';
import { invokeCni } from '../cni/invoke.js';
import { startLogSink, type LogSink } from '../cni/log-sink.js';
import { CniPlugin } from '../cni/plugin.js';
import { Installer } from '../install/installer.js';
import { NodeGate } from './node-gate.js';
import { checkRepairAccess, RepairController } from '../repair/controller.js';
import { ambientRepairHook } from './ambient-repair.js';
import type { RepairConfig } from '../repair/config.js';
import type { InstallConfig } from '../install/config.js';
import { isResourceExhaustion } from '../util/resource-errors.js';
import { sleep } from '../util/sleep.js';
import { enrollFailureStage, PodStatusBook } from './pod-status.js';
import { startStatusServer, type StatusServer } from './status-socket.js';
import { statusSourcesOf } from './status-sources.js';

export interface AgentOptions {
  config: AgentConfig;
  /** Default: from KUBECONFIG, else in-cluster (lib/kube loadCredentials). */
  client?: KubeClient;
  /** Default: from the config's log settings, to stderr. */
  logging?: Logging;
  /** Host probe set + rule attempts (upstream: 10, 2 s apart). */
  hostRuleAttempts?: number;
  hostRuleRetryMs?: number;
  /** Informer watch timeout (seconds); the informers' default otherwise. */
  watchTimeoutSeconds?: number;
  /** Accept only ZDS peers with these uids (SO_PEERCRED); default anyone, as upstream. */
  zdsAllowedUids?: number[];
  /** The kubelet's UID, which the nftables host rule matches (over KUBELET_UID; default: the kubelet process's, lib/agent/kubelet-uid.ts). */
  kubeletUid?: number;
  /**
   * The CNI installer's configuration: it runs once the agent is ready (§1.2:
   * no pod reaches the plugin before the agent can serve it). Absent: no
   * installer (the plugin is installed some other way) and `/readyz` does not wait for one.
   */
  install?: InstallConfig;
  /**
   * The repair controller's configuration (§4): it runs once the agent is
   * ready when `enabled`. Sidecar pods only: a selected ambient pod that is
   * Running is already enrolled by the informer path.
   */
  repair?: RepairConfig;
  /** One CNI invocation's deadline in the agent (default 25 s, lib/cni/invoke.ts). */
  cniDeadlineMs?: number;
  /** For tests: awaited just before the startup snapshot (the CNI plugin answers 503 until it is restored). */
  beforeSnapshot?: () => Promise<void>;
  /** For tests: awaited just before the node readiness taint is taken off (the agent is not ready yet). */
  beforeUntaint?: () => Promise<void>;
  /** For tests: called instead of the native heap trim after a startup snapshot that restored pods (default trimNativeHeap). */
  trimHeap?: () => boolean;
}

export interface StopOptions {
  /** 'auto' (default): §5.13's upgrade-or-uninstall decision; true/false force it. */
  cleanup?: 'auto' | boolean;
}

export interface StopResult {
  cleanedUp: boolean;
  reason: string;
}

export class AgentStartError extends Error {
  readonly code = 'ERR_AGENT_START';
  constructor(readonly stage: string, cause: unknown) {
    super(`agent start failed at ${stage}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'AgentStartError', enumerable: false });
  }
}

/** How long one proc scan answers the informer path's netns lookups. */
const SCAN_REUSE_MS = 1000;
// Uninstall's release of running pods: well inside the chart's 30 s termination grace.
const RELEASE_BUDGET_MS = 15_000;


export class Agent {
  readonly config: AgentConfig;
  readonly readiness = new Readiness();
  readonly metrics: AgentMetrics = createAgentMetrics();
  readonly log: Logger;
  readonly client: KubeClient;
  private readonly logging: Logging;
  backend: Backend | undefined;
  /** With the iptables backend: the variant chosen in the host netns. */
  iptables: IptablesSelection | undefined;
  /** With the nftables backend: the UID its host probe rule matches. */
  kubeletUid: KubeletUid | undefined;
  node: NodeDataplane | undefined;
  controller: AmbientController | undefined;
  cni: CniEndpoint | undefined;
  plugin: CniPlugin | undefined;
  logSink: LogSink | undefined;
  health: HealthServer | undefined;
  metricsServer: RunningServer | undefined;
  drift: DriftCheck | undefined;
  installer: Installer | undefined;
  /** The node readiness taint (NODE_READINESS_TAINT). */
  gate: NodeGate | undefined;
  repair: RepairController | undefined;
  /** `<run dir>/cni-decisions.json`, what podwire-cni reads while the agent is down (docs/cni.md). */
  decisions: DecisionFileWriter | undefined;
  /** Per-pod facts for `podwire status` / `explain`, served on `<run dir>/status.sock`. */
  readonly podStatus = new PodStatusBook();
  statusServer: StatusServer | undefined;
  /** Rejects when something the agent cannot run without fails after start (the installer's loop): exit then. */
  readonly fatal: Promise<never>;
  private failFatal!: (err: unknown) => void;
  /** What the startup snapshot restored. */
  snapshot: SnapshotRestore | undefined;
  private host: Netns | undefined;
  private lastScan: { at: number; scan: ProcScanResult } | undefined;
  private readonly opts: AgentOptions;
  private readonly ownsClient: boolean;
  private synced = false;
  /** The startup snapshot is restored and queued DELs applied: the CNI plugin takes work (DEL finds what it deletes). */
  private restored = false;
  /** Netns the CNI paths refuse as a pod's: the node's and the agent's own. */
  private refusedNetns: RefusedNetns[] = [];
  private starting: Promise<void> | undefined;
  private controllerStopped: Promise<void> | undefined;
  private stopping: Promise<StopResult> | undefined;

  constructor(opts: AgentOptions) {
    this.opts = opts;
    this.config = opts.config;
    this.logging = opts.logging ?? createLogging({ levels: opts.config.logOutputLevel, json: opts.config.logAsJson });
    this.log = this.logging.scope('cni-agent');
    this.ownsClient = !opts.client;
    this.client = opts.client ?? new KubeClient(loadCredentials());
    if (!opts.install) this.readiness.set('installed');  // nothing to install: nothing to wait for
    if (!opts.config.nodeReadinessTaint) this.readiness.set('nodeUntainted');  // no taint to take off
    this.fatal = new Promise<never>((_, reject) => { this.failFatal = reject; });
    this.fatal.catch(() => undefined);  // observed by whoever runs the agent (the CLI)
  }

  /** Runs the start sequence; resolves once the agent is ready. Rejects with AgentStartError (call stop() after). */
  start(): Promise<void> {
    if (this.starting) return Promise.reject(new Error('agent already started'));
    this.starting = this.run();
    return this.starting;
  }

  private async run(): Promise<void> {
    const cfg = this.config;
    const stage = async <T>(name: string, fn: () => Promise<T> | T): Promise<T> => {
      if (this.stopping) throw new AgentStartError(name, new Error('agent is stopping'));
      try {
        return await fn();
      } catch (err) {
        throw err instanceof AgentStartError ? err : new AgentStartError(name, err);
      }
    };
    // The run dir root's alone (0700) before anything is created in it; a link there fails the start.
    const runDir = await stage('cni run dir', () => prepareRunDir(cfg.cniAgentRunDir));
    for (const m of runDir.changes) this.log.info(`cni run dir: ${m}`);
    for (const m of runDir.warnings) this.log.warn(`cni run dir: ${m}`);
    const host = cfg.listenAddress === '' ? {} : { host: cfg.listenAddress };
    this.health = await stage('health server', () => startHealthServer({ port: cfg.healthPort, readiness: this.readiness, ...host }));
    this.metricsServer = await stage('metrics server', () => startMetricsServer({ port: cfg.monitoringPort, registry: this.metrics.registry, ...host }));
    this.log.info(`health on ${this.health.url}, metrics on ${this.metricsServer.url}`);
    if (cfg.nodeReadinessTaint) {
      // Tainted until ready: nothing new is scheduled here while pods could not be meshed.
      const gate = new NodeGate({ client: this.client, nodeName: cfg.nodeName, taintKey: cfg.nodeReadinessTaintKey, log: this.log });
      this.gate = gate;
      await stage('node readiness taint', async () => {
        await gate.check();
        await gate.taint();
      });
      this.log.info(`node ${cfg.nodeName} tainted ${cfg.nodeReadinessTaintKey}:NoSchedule until the agent is ready`);
    }
    // The repair actions' RBAC is checked now, not once the agent is otherwise ready: a missing grant fails the start at once.
    if (this.opts.repair?.enabled) await stage('repair permissions', () => checkRepairAccess(this.client, this.opts.repair!, (l, m) => this.log[l](m)));

    // Host work happens in the node's netns: ours (hostNetwork), or <proc root>/1/ns/net when we are not in it.
    this.host = await stage('host netns', () => cfg.allowSwitchToHostNs ? Netns.open(`${cfg.hostProcRoot}/1/ns/net`) : Netns.current());
    const choice = await stage('backend', () => selectBackend(this.host!, { nativeNftables: cfg.nativeNftables, ipv6: cfg.ipv6, forceIptablesBinary: cfg.forceIptablesBinary }));
    for (const w of choice.warnings) this.log.warn(w);
    this.backend = choice.backend;
    this.log.info(`redirection backend: ${choice.backend} (${choice.reason})`);
    if (choice.backend === 'iptables') {
      const ipt = await stage('iptables backend', () => selectIptablesVariant(this.host!, { forceIptablesBinary: cfg.forceIptablesBinary, ipv6: cfg.ipv6, runDir: cfg.cniAgentRunDir }));
      for (const w of ipt.warnings) this.log.warn(w);
      this.iptables = ipt;
      this.log.info(`iptables variant: ${ipt.mode} (${ipt.reason})`);
    }
    this.metrics.backendInfo.set({ backend: choice.backend, iptables_variant: this.iptables?.mode ?? 'none' }, 1);

    this.node = await stage('host probe rules', () => this.startNode(choice.backend));
    this.bindZdsMetrics(this.node);
    if (this.node.zds) this.podStatus.watchZds(this.node.zds.server);

    this.refusedNetns = this.nodeNetns();
    const policy = selectionPolicy(cfg);
    const controller = new AmbientController({
      client: this.client,
      nodeName: cfg.nodeName,
      policy,
      dataplane: this.dataplaneForController(this.node),
      resolveNetns: (pod) => this.findNetns(pod),
      ...(this.opts.watchTimeoutSeconds !== undefined ? { watchTimeoutSeconds: this.opts.watchTimeoutSeconds } : {}),
      log: (level, message, fields) => this.log[level](message, fields?.pod ? { pod: fields.pod } : {}),
      onEvent: (type) => this.metrics.reconcileEvents.inc({ type }),
    });
    this.controller = controller;
    this.decisions = new DecisionFileWriter({ pods: controller.pods, namespaces: controller.namespaces, policy, nodeName: cfg.nodeName, runDir: cfg.cniAgentRunDir, log: this.log });
    this.metrics.bind({
      podsEnrolled: () => this.enrolledCount(),
      ztunnelConnected: () => this.node?.zds?.server.connectionCount ?? 0,
      informers: () => ({ pods: controller.pods.stats, namespaces: controller.namespaces.stats }),
    });

    const plugin = new CniPlugin({
      controller, client: this.client, policy, dataplane: this.node.dataplane, hostMountsRoot: cfg.hostMountsRoot,
      ready: () => this.restored, refusedNetns: () => this.refusedNetns,
      log: (level, message, fields) => this.log[level](message, fields ?? {}),
    });
    this.plugin = plugin;
    this.cni = await stage('cni endpoint', () => startCniEndpoint({
      runDir: cfg.cniAgentRunDir,
      onCmdAdd: cniAddHandler({
        controller, client: this.client, policy, hostMountsRoot: cfg.hostMountsRoot, ready: () => this.restored, refusedNetns: () => this.refusedNetns,
      }),
      onCni: (body, ctx) => invokeCni(plugin, body, ctx.signal, this.opts.cniDeadlineMs !== undefined ? { deadlineMs: this.opts.cniDeadlineMs } : {}),
      // The shim's largest request (its 1 MiB stdin escaped, plus the env); bodies in flight share 4 MiB.
      maxBodyBytes: SHIM_REQUEST_MAX_BYTES,
      onResponse: ({ status }) => this.metrics.pluginRequests.inc({ response_code: String(status) }),
      onError: (err) => this.log.warn(`cni endpoint: ${err.message}`),
    }));
    this.log.info(`CNI plugin events on ${this.cni.socketPath}`);
    this.logSink = await stage('plugin log socket', () => startLogSink(cfg.cniAgentRunDir, this.logging.scope('cni-plugin')));
    this.statusServer = await stage('status socket', () => startStatusServer({ runDir: cfg.cniAgentRunDir, sources: statusSourcesOf(this) }));

    await stage('informers', () => controller.sync());
    this.synced = true;
    this.decisions?.start();  // from the synced caches; kept current from now on
    this.readiness.set('informersSynced');
    this.log.info(`informers synced: ${controller.pods.size} pods on node ${cfg.nodeName}, ${controller.namespaces.size} namespaces`);

    await stage('startup snapshot', async () => { await this.opts.beforeSnapshot?.(); });
    const pods = activeAmbientPods(controller.pods.list(), cfg.systemNamespace);
    try {
      this.snapshot = await restoreSnapshot({
        pods, dataplane: this.node.dataplane, procRoot: cfg.hostProcRoot, reconcileRules: cfg.reconcilePodRulesOnStartup, ownerExists: this.podExists(),
      });
      this.logSnapshot(this.snapshot);
      const failed = new Set(this.snapshot.report.failed.map((f) => f.uid));
      for (const e of this.node.dataplane.snapshot()) if (e.netns && !failed.has(e.pod.uid)) this.podStatus.verified(e.pod.uid, 'startup-snapshot');
    } catch (err) {
      // As upstream: a failed snapshot is logged, not fatal (the informers re-add pods).
      this.log.error(`startup snapshot failed: ${(err as Error).message}`);
    }
    await this.drainDelQueue();
    if (this.stopping) throw new AgentStartError('startup snapshot', new Error('agent is stopping'));
    // The snapshot proves and verifies every pod in one burst; the allocator keeps the pages that
    // burst freed unless asked (docs/benchmarks.md, "Agent memory and start-up").
    if (pods.length > 0) (this.opts.trimHeap ?? trimNativeHeap)();
    this.restored = true;
    this.readiness.set('snapshotReconciled');

    this.node.listen();
    this.log.info(`ZDS served on ${cfg.ztunnelUdsAddress}`);
    controller.run();
    if (cfg.driftCheckIntervalMs > 0) {
      this.drift = new DriftCheck({
        dataplane: this.recordingDrift(this.node.dataplane),
        mesh: controller,  // a Running ambient pod the dataplane does not hold is drift too
        intervalMs: cfg.driftCheckIntervalMs,
        onDrift: (d) => this.reportDrift(d),
        onRound: (r) => {
          this.podStatus.driftRound(r);
          this.log.debug(`drift check: ${r.checked} pods checked, ${r.drifted.length} drifted, ${r.pruned.length} orphan probe entries pruned, ${r.durationMs.toFixed(1)} ms`);
        },
        onError: (err) => this.log.warn(`drift check: ${(err as Error).message}`),
        // Probe entries of pods that no longer exist (deleted while no agent ran) go, snapshot complete or not.
        pruneOrphans: () => this.node!.dataplane.pruneOrphanProbes(this.podExists()),
      });
      this.drift.start();
    }
    if (this.opts.repair?.enabled) {
      const r = this.opts.repair;
      // The ambient informer already lists and watches exactly this node's pods: share it unless repair selects differently.
      const shared = r.nodeName === cfg.nodeName && r.fieldSelectors.trim() === '' && r.labelSelectors.trim() === '';
      const repair = new RepairController({
        client: this.client, config: r, resolveNetns: (pod) => this.findNetns(pod), accessChecked: true,
        ...(shared ? { sharedPods: controller.pods } : {}),
        ambient: ambientRepairHook(controller, (pod) => this.findNetns(pod)),
        onRepaired: (type, result) => this.metrics.podsRepaired.inc({ type, result }),
        log: (level, message, fields) => this.log[level](message, fields?.pod ? { pod: fields.pod } : {}),
      });
      this.repair = repair;
      await stage('repair controller', () => repair.start());
    }
    if (this.opts.install) await stage('cni installer', () => this.startInstaller(this.opts.install!));
    if (this.gate) {
      await stage('node readiness taint', async () => {
        await this.opts.beforeUntaint?.();
        await this.gate!.untaint();
      });
      // Ready implies untainted: /readyz turns 200 only once the API server holds the Node without our taint.
      this.readiness.set('nodeUntainted');
      this.log.info(`node ${cfg.nodeName} untainted`);
    }
    this.log.info('node agent ready');
  }

  private async startInstaller(cfg: InstallConfig): Promise<void> {
    const installer = new Installer(cfg, {
      log: this.log,
      onReady: (ready) => {
        this.readiness.set('installed', ready);
        this.metrics.installReady.set(ready ? 1 : 0);
      },
      onInstall: (result) => this.metrics.installs.inc({ result }),
      onRevertLoop: () => this.metrics.installRevertLoops.inc(),  // the installer logs the warning
    });
    this.installer = installer;
    await installer.start();
    installer.done?.catch((err: unknown) => {
      if (this.stopping) return;
      this.log.error(`cni installer stopped: ${(err as Error).message}`);
      this.failFatal(err);
    });
  }

  /**
   * Stops the agent (idempotent; safe during start). On upgrade or reboot
   * (the DaemonSet still targets this node) nothing on the node changes; on
   * uninstall the host probe rule and sets are removed. In-pod rules of
   * running pods are never removed here.
   */
  stop(opts: StopOptions = {}): Promise<StopResult> {
    this.stopping ??= this.doStop(opts);
    return this.stopping;
  }

  private stopController(): Promise<void> {
    this.controllerStopped ??= (this.controller?.stop({ timeoutMs: 5000 }) ?? Promise.resolve())
      .catch((err: unknown) => this.log.warn(`stopping informers: ${(err as Error).message}`));
    return this.controllerStopped;
  }

  private async doStop(opts: StopOptions): Promise<StopResult> {
    for (const c of ['installed', 'informersSynced', 'snapshotReconciled'] as const) this.readiness.clear(c);
    if (this.config.nodeReadinessTaint) this.readiness.clear('nodeUntainted');
    this.restored = false;
    if (this.starting) {
      // A start still waiting is released: the informers (sync) or the installer (waiting for a
      // primary CNI config) are stopped, and its next stage gives up.
      if (!this.synced) void this.stopController();
      void this.installer?.stop().catch(() => undefined);
      await this.starting.catch(() => undefined);
    }
    await this.installer?.stop().catch((err: unknown) => this.log.warn(`stopping the installer: ${(err as Error).message}`));
    await this.drift?.stop();
    await this.repair?.stop({ timeoutMs: 5000 }).catch((err: unknown) => this.log.warn(`stopping the repair controller: ${(err as Error).message}`));
    await this.cni?.close();
    await this.logSink?.close();
    await this.statusServer?.close();
    this.decisions?.stop();  // the file stays: the shim reads it while no agent answers
    await this.stopController();
    let decision: CleanupDecision;
    const mode = opts.cleanup ?? 'auto';
    if (mode === true) decision = { skipCleanup: false, reason: 'cleanup requested' };
    else if (mode === false) decision = { skipCleanup: true, reason: 'cleanup disabled' };
    else {
      // istioOwnedConfig: upstream's "when in doubt, keep" (2 retries, then skip cleanup). podwire uses it
      // always: removing the host rule during a rolling restart with the API unreachable would break
      // every enrolled pod's probes until the new agent is up; a table left after an uninstall is harmless.
      decision = await decideCleanup({
        client: this.client, namespace: this.config.podNamespace, nodeName: this.config.nodeName,
        disableSafeUpgrade: this.config.disableSafeUpgrade, istioOwnedConfig: true,
      }).catch((err: unknown) => ({ skipCleanup: true, reason: `decision failed, keeping everything: ${(err as Error).message}` }));
    }
    let cleanedUp = false;
    if (!decision.skipCleanup && this.installer) {
      // Upstream's order: the plugin and its config entry first, so no new pod calls a plugin whose agent is going.
      await this.installer.cleanup().then(
        () => this.log.info('CNI plugin and config entry removed'),
        (err: unknown) => this.log.error(`removing the CNI plugin: ${(err as Error).message}`),
      );
    }
    if (this.gate) {
      // An upgrade or reboot: tainted until the next agent is ready. An uninstall: no agent will come to lift it.
      await (decision.skipCleanup ? this.gate.taint() : this.gate.untaint())
        .catch((err: unknown) => this.log.warn(`node readiness taint at stop: ${(err as Error).message}`));
    }
    if (!decision.skipCleanup && this.node) {
      // Running pods out of the mesh first (rules, ztunnel, probe entries), then the host rule: a
      // difference from upstream, which leaves them redirected and failing their probes.
      const released = await releaseAllPods(this.node.dataplane, { budgetMs: RELEASE_BUDGET_MS });
      this.log.info(`uninstall: ${released.released} pods taken out of the mesh`);
      for (const f of released.failed) this.log.warn(`uninstall: pod ${f.uid} keeps its redirection: ${f.error}`);
      if (released.left.length) this.log.warn(`uninstall: ${released.left.length} pods keep their redirection (no time left): ${released.left.join(', ')}`);
      try {
        await this.node.uninstall();
        cleanedUp = true;
        this.log.info(`host probe rule and sets removed (${decision.reason})`);
      } catch (err) {
        this.log.error(`removing host rules: ${(err as Error).message}`);
      }
    } else {
      this.log.info(`keeping host rules and sets (${decision.reason})`);
    }
    await this.node?.close();
    this.host?.close();
    await this.health?.close();
    await this.metricsServer?.close();
    if (this.ownsClient) this.client.close();
    return { cleanedUp, reason: decision.reason };
  }

  /**
   * DELs the shim queued while no agent answered. The pod is taken out when
   * the record names the netns it is enrolled with, when the startup snapshot
   * found no netns for it (its sandbox is gone: only the placeholder and its
   * probe entries are left), or when neither the netns nor the Pod exists any
   * more; a pod already restored into a newer sandbox stays.
   */
  private async drainDelQueue(): Promise<void> {
    const dp = this.node!.dataplane;
    const handle = async (r: DelRecord) => {
      const uid = r.podUid || this.controller?.pods.get(r.podName, r.podNamespace)?.metadata?.uid;
      const entry = uid ? dp.cache.get(uid) : undefined;
      if (!entry) {
        // Deleted while no agent ran and not restored: only its probe entries may be left.
        if (uid && !this.podExists()(uid)) await dp.releaseProbes(uid);
        return;
      }
      let path = '';
      try {
        if (r.netns) path = hostPath(this.config.hostMountsRoot, r.netns);
      } catch {
        // not a usable path: it proves nothing, like an empty one (and must not keep the record forever)
      }
      const same = path !== '' && !!entry.netns?.isAt(path);
      const gone = (path === '' || !existsSync(path)) && !this.controller?.pods.list().some((p) => p.metadata?.uid === entry.pod.uid);
      if (same || !entry.netns || gone) {
        // Wholly: ztunnel, probe set, in-pod rules, the controller's entry and the annotation.
        await this.controller!.removePodFromMesh(entry.pod.uid, { reason: 'queued-del' });
        this.log.info('queued CNI DEL: pod removed from the mesh', podFields(entry.pod));
      }
    };
    try {
      const r = await drainDelQueue(this.config.cniAgentRunDir, handle);
      this.metrics.queuedDels.inc(r.records);
      if (r.records || r.malformed.length) this.log.info(`queued CNI DELs: ${r.handled}/${r.records} handled, ${r.malformed.length} malformed removed`);
      if (r.skipped.length) this.log.warn(`queued CNI DELs: ${r.skipped.length} entries that are not regular files left in place: ${r.skipped.slice(0, 5).join(', ')}`);
      for (const f of r.failed) this.log.warn(`queued CNI DEL ${f.file} kept for the next start: ${f.error}`);
    } catch (err) {
      this.log.warn(`queued CNI DELs not read: ${(err as Error).message}`);
    }
  }

  /**
   * The netns no CNI invocation may name as a pod's: the node's (the one the
   * agent does host work in, and `<proc root>/1/ns/net`) and the agent's own.
   */
  private nodeNetns(): RefusedNetns[] {
    const out: RefusedNetns[] = [{ ...this.host!.id, what: "the node's netns" }];
    const init = netnsIdentity(`${this.config.hostProcRoot}/1/ns/net`);
    if (init && !sameIdentity(init, this.host!.id)) out.push({ ...init, what: "the node's netns (host pid 1)" });
    for (const own of ownNetns()) if (!out.some((o) => sameIdentity(o, own))) out.push(own);
    return out;
  }

  /** Pods enrolled with a netns (what ztunnel redirects). */
  enrolledCount(): number {
    return this.node?.dataplane.snapshot().filter((e) => e.netns && !e.netns.released).length ?? 0;
  }

  private async startNode(backend: Backend): Promise<NodeDataplane> {
    const cfg = this.config;
    const attempts = this.opts.hostRuleAttempts ?? 10;
    const retryMs = this.opts.hostRuleRetryMs ?? 2000;
    for (let i = 1; ; i++) {
      try {
        return await NodeDataplane.start({
          host: this.host!,
          backend,
          ...(backend === 'iptables' && this.iptables ? { iptablesMode: this.iptables.mode } : {}),
          zdsPath: cfg.ztunnelUdsAddress,
          hostProcRoot: cfg.hostProcRoot,  // the node's netns is refused as a pod's
          listen: false,
          ipv6: cfg.ipv6,
          dnsCapture: cfg.dnsCapture,
          snatIp: cfg.hostProbeSnatIp,
          snatIpv6: cfg.hostProbeSnatIpv6,
          ...(this.opts.zdsAllowedUids ? { zdsAllowedUids: this.opts.zdsAllowedUids } : {}),
          ...(backend === 'nftables' ? { kubeletUid: this.findKubeletUid() } : {}),
          warn: (m) => this.log.warn(m),
        });
      } catch (err) {
        if (i >= attempts || this.stopping) throw err;
        this.log.warn(`host probe rules (attempt ${i}/${attempts}): ${(err as Error).message}; retrying in ${retryMs} ms`);
        await sleep(retryMs);
      }
    }
  }

  /**
   * The nftables host rule's kubelet UID: the option, KUBELET_UID, else the kubelet process under
   * HOST_PROC_ROOT. Looked up on every host-rule attempt, as upstream: a kubelet starting after
   * the agent is found by a retry; none by the last one fails the start (KubeletUidError).
   */
  private findKubeletUid(): number {
    const k = resolveKubeletUid(this.config.hostProcRoot, this.opts.kubeletUid ?? this.config.kubeletUid);
    if (this.kubeletUid?.uid !== k.uid) {
      for (const w of k.warnings) this.log.warn(w);
      const from = k.source === 'setting' ? 'KUBELET_UID' : `${k.processes[0]!.name} pid ${k.processes.map((p) => p.pid).join(', ')}`;
      this.log.info(`kubelet uid ${k.uid} (${from}): the nftables host probe rule matches it`);
    }
    this.kubeletUid = k;
    return k.uid;
  }

  /** The dataplane as the controller drives it: enrollments timed, enrolled pods visible. */
  private dataplaneForController(node: NodeDataplane): DataplaneLike {
    const dp = node.dataplane;
    const backend = this.backend!;
    return {
      enroll: async (pod: PodInfo, o?: { netns?: NetnsRef; netnsPath?: string; signal?: AbortSignal; ifUnheld?: boolean }) => {
        const end = this.metrics.enrollDuration.startTimer({ backend });
        let r: Awaited<ReturnType<typeof dp.enroll>>;
        try {
          r = await dp.enroll(pod, o);
        } catch (err) {
          if (this.podStatus.enrollFailed(pod.uid, err)) this.metrics.enrollFailures.inc({ stage: enrollFailureStage(err) });
          throw err;
        }
        end();
        if (!r.skipped) this.podStatus.verified(pod.uid, 'enrollment');
        return r;
      },
      unenroll: async (pod, o) => {
        const r = await dp.unenroll(pod, o);
        if (!r.skipped) this.podStatus.forget(pod.uid);
        return r;
      },
      enrolled: (uid) => {
        const e = dp.cache.get(uid);
        return e && !e.leaving && e.netns && !e.netns.released ? e.pod : undefined;
      },
      // Any entry, placeholders and half-removed ones included: the controller re-enrolls a pod the dataplane lost.
      held: (uid) => dp.cache.get(uid)?.pod,
    };
  }

  /** The dataplane as the drift check drives it: what each repair found goes into the pod status book. */
  private recordingDrift(dp: Dataplane): Pick<Dataplane, 'snapshot' | 'repair' | 'probeEntries'> {
    return {
      snapshot: () => dp.snapshot(),
      probeEntries: () => dp.probeEntries(),
      repair: async (uid, o) => {
        const r = await dp.repair(uid, o);
        if (r.checked) this.podStatus.checked(uid, r);
        return r;
      },
    };
  }

  /** Whether a pod with a UID exists in the (synced) informer, as of this call. */
  private podExists(): (uid: string) => boolean {
    const uids = new Set((this.controller?.pods.list() ?? []).map((p) => p.metadata?.uid));
    return (uid) => uids.has(uid);
  }

  /**
   * The informer path's netns (§5.10), proved and open: the caller owns the
   * handle (the controller releases it after the enrollment). One proc walk
   * looks for every pod of this node at once and is reused for a second, so
   * a namespace label that enrolls a hundred pods walks /proc once, not a
   * hundred times; each pod's candidates are opened and proved at the call
   * (inode, not the node's, holds a pod IP), so a reused walk can only miss,
   * never mislead, and a miss gets a fresh walk.
   */
  private async findNetns(pod: V1Pod): Promise<NetnsRef | undefined> {
    const uid = pod.metadata?.uid;
    if (!uid) return undefined;
    const procRoot = this.config.hostProcRoot;
    const want = [{ uid, ips: podIps(pod) }];
    const fields = podFields({ namespace: pod.metadata?.namespace, name: pod.metadata?.name, uid });
    try {
      const last = this.lastScan;
      if (last && Date.now() - last.at < SCAN_REUSE_MS && last.scan.candidates.has(uid)) {
        const r = await openPodNetns(want, { procRoot, scan: last.scan });
        const f = r.found.get(uid);
        if (f) return f.ref;
      }
      const uids = new Set([uid, ...(this.controller?.pods.list() ?? []).map((p) => p.metadata?.uid).filter((u): u is string => !!u)]);
      const scan = scanPodNetns(uids, { procRoot });
      this.lastScan = { at: Date.now(), scan };
      const r = await openPodNetns(want, { procRoot, scan });
      for (const x of r.refused) {
        const m = `proc scan: netns of pid ${x.candidate.pid} refused: ${x.reason}${x.error ? ` (${x.error})` : ''}`;
        if (x.reason === 'no-ips' || x.reason === 'gone') this.log.debug(m, fields);
        else this.log.warn(m, fields);
      }
      return r.found.get(uid)?.ref;
    } catch (err) {
      this.log.warn(`proc scan: ${(err as Error).message}`, fields);
      // Out of fds or memory says nothing about the pod: the caller's queue retries (undefined would drop it).
      if (isResourceExhaustion(err)) throw err;
      return undefined;
    }
  }

  private bindZdsMetrics(node: NodeDataplane): void {
    const server = node.zds?.server;
    if (!server) return;
    server.on('ack', (e: { type: 'add' | 'keep' | 'del' | 'snapshot_sent' }) => this.metrics.zdsAcks.inc({ type: e.type }));
    server.on('nack', (e: { type: 'add' | 'keep' | 'del' | 'snapshot_sent'; uid?: string; error: string }) => {
      this.metrics.zdsNacks.inc({ type: e.type });
      this.log.warn(`ztunnel refused ${e.type}: ${e.error}`, e.uid ? { uid: e.uid } : {});
    });
    server.on('ready', () => this.log.info(`new ztunnel connected, total connected: ${server.connectionCount}`));
    server.on('disconnect', () => this.log.info(`ztunnel disconnected, total connected: ${server.connectionCount}`));
  }

  private logSnapshot(s: SnapshotRestore): void {
    const r = s.report;
    this.log.info(`startup snapshot: ${r.pods} pods, ${r.repaired.length} repaired, ${r.failed.length} failed, ${r.probeEntries} probe entries, ${r.pruned.length} pruned${r.complete ? '' : ' (incomplete: nothing pruned)'} in ${s.durationMs.toFixed(1)} ms`);
    for (const uid of s.scan.missing) this.log.warn('startup snapshot: netns not found by the proc scan; the informers will retry', { uid });
    for (const x of s.scan.refused) if (x.reason !== 'no-ips') this.log.warn(`startup snapshot: netns of pid ${x.candidate.pid} refused: ${x.reason}`, { uid: x.uid });
    for (const f of r.failed) this.log.warn(`startup snapshot: ${f.error}`, { uid: f.uid });
    for (const uid of r.repaired) this.log.info('startup snapshot: drifted in-pod rules re-applied', { uid });
  }

  private async reportDrift(d: Parameters<NonNullable<ConstructorParameters<typeof DriftCheck>[0]['onDrift']>>[0]): Promise<void> {
    this.metrics.driftFound.inc();
    const fields = podFields(d.pod);
    const fixed = d.failed.length === 0;
    if (fixed) this.metrics.driftRepaired.inc();
    const what = `${d.drift.join('; ')}`;
    const message = fixed
      ? `redirection drift repaired (${d.repaired.join(', ')}): ${what}`
      : `redirection drift not fully repaired: ${what}; failed: ${d.failed.map((f) => `${f.part}: ${f.error}`).join('; ')}`;
    this.log.warn(message, fields);
    const cached = this.controller?.pods.get(d.pod.name, d.pod.namespace);
    if (!cached || cached.metadata?.uid !== d.pod.uid) return;
    await createPodEvent(this.client, cached, {
      type: 'Warning', reason: fixed ? 'RedirectionDriftRepaired' : 'RedirectionDrift', message, component: 'istio-cni-node', host: this.config.nodeName,
    }).catch((err: unknown) => this.log.warn(`posting the drift event: ${(err as Error).message}`, fields));
  }
}

