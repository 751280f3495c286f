// The installer (spec §3.1, §3.5, §3.6): install, then watch and reinstall until stopped.
//
//   const installer = new Installer(cfg, { log, onReady, onInstall, onRevertLoop });
//   await installer.start();   // the first installation (chained: may wait for a primary config)
//   installer.done;            // rejects when the loop fails (upstream: the process exits)
//   await installer.stop();    // ends the loop; readiness false; nothing removed
//   await installer.cleanup(); // §3.6 (stops first)
//
// Readiness (upstream's installReady) is true only while a round has checked the config valid
// and is watching for changes; `onReady` reports each change (the agent's readiness condition
// `installed` and the gauge istio_cni_install_ready). `onInstall` counts
// istio_cni_installs_total{result}: SUCCESS each time a round becomes ready, a failure result
// when an installation fails.
import { readFile, stat, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { InstallResult } from './results.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { copyBinaries } from './binaries.js';
import type { InstallConfig } from './config.js';
import { exists, type ConfigState } from './config-path.js';
import { removeEntry } from './conflist.js';
import { failureResult, InstallError, ioError } from './errors.js';
import { KUBECONFIG_NAME, writeKubeconfig } from './kubeconfig.js';
import { SILENT_LOG, type InstallLog } from './log.js';
import { renderPluginEntry } from './plugin-entry.js';
import { InstallThrottle, REVERT_WARN_HITS, type ThrottleOptions } from './throttle.js';
import { checkCniConfig } from './validity.js';
import { ChangeWatcher, stopped } from './watch.js';
import { writeCniConfig } from './write-config.js';

export interface RevertLoopInfo {
  /** Throttled reinstalls in a row. */
  hits: number;
  /** The CNI config being fought over. */
  path: string;
  /** The hint given: Cilium (its path names it) must run with cni.exclusive=false. */
  hint: string | undefined;
}

export interface InstallerOptions {
  log?: InstallLog;
  /** installReady changed (only changes are reported; it starts false). */
  onReady?: (ready: boolean) => void;
  /** One count of istio_cni_installs_total{result}. */
  onInstall?: (result: InstallResult) => void;
  /** More than 5 throttled reinstalls in a row: something keeps reverting the installation. */
  onRevertLoop?: (info: RevertLoopInfo) => void;
  /** The reinstall throttle (default: 0.2/s, burst 1, sleeps of at most 1 s). */
  throttle?: ThrottleOptions;
}

export class Installer {
  readonly config: InstallConfig;
  /** The plugin entry this installer writes (standalone text). */
  readonly entry: string;
  readonly #log: InstallLog;
  readonly #opts: InstallerOptions;
  readonly #state: ConfigState;
  readonly #abort = new AbortController();
  #ready = false;
  #run: Promise<void> | undefined;

  constructor(config: InstallConfig, opts: InstallerOptions = {}) {
    this.config = config;
    this.entry = renderPluginEntry(config.entry);
    this.#opts = opts;
    this.#log = opts.log ?? SILENT_LOG;
    this.#state = { writtenPath: '', primaryName: config.chainedCniPlugin ? config.cniConfName : '' };
  }

  /** installReady: the config was found valid and is being watched. */
  get ready(): boolean {
    return this.#ready;
  }

  /** The CNI config file last written ('' before the first write). */
  get configPath(): string {
    return this.#state.writtenPath;
  }

  /** The kubeconfig path (written only with the writeKubeconfig option). */
  get kubeconfigPath(): string {
    return join(this.config.cniAgentRunDir, KUBECONFIG_NAME);
  }

  /**
   * Starts installing: resolves after the first installation, rejects with its InstallError
   * (the loop does not run then); ERR_STOPPED when stop() came first. The watch loop goes on.
   */
  start(): Promise<void> {
    if (this.#run) throw new Error('Installer.start() was already called');
    let first!: { resolve: () => void; reject: (e: unknown) => void };
    const installed = new Promise<void>((resolve, reject) => (first = { resolve, reject }));
    this.#run = this.#loop(() => first.resolve());
    this.#run.then(() => first.reject(stopped('watch')), (err: unknown) => first.reject(err));
    // Both are the caller's to await; neither may become an unhandled rejection meanwhile.
    this.#run.catch(() => {});
    installed.catch(() => {});
    return installed;
  }

  /**
   * The run: resolves when stop() ended it, rejects with the InstallError that ended it (a
   * failed reinstallation or watch; upstream's process exits then). Undefined before start().
   */
  get done(): Promise<void> | undefined {
    return this.#run;
  }

  /** Ends the loop (a wait is cut short, a write in progress finishes); removes nothing. */
  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#run?.catch(() => {});
    this.#setReady(false);
  }

  /**
   * Removes the installation (§3.6), after stop(): from the config written, our plugin (chained:
   * the file is rewritten with its mode kept) or the file itself (standalone, Istio-owned); the
   * kubeconfig; the binary in every target directory. Every step is tried (upstream stops at
   * the first failure; intended: remove all that can be), then the first failure is thrown
   * (InstallError, stage `cleanup`).
   */
  async cleanup(): Promise<void> {
    await this.stop();
    const cfg = this.config;
    const path = this.#state.writtenPath;
    const errors: InstallError[] = [];
    const step = async (fn: () => Promise<void>) => {
      try {
        await fn();
      } catch (err) {
        if (err instanceof InstallError && err.stage === 'cleanup') errors.push(err);
        else if (err instanceof InstallError) errors.push(new InstallError(err.code, 'cleanup', err.message, { ...(err.path !== undefined && { path: err.path }), cause: err }));
        else errors.push(ioError('cleanup', 'cleanup failed for', path, err));
      }
    };
    this.#log.info('cleaning up CNI installation');
    if (path !== '' && (await exists(path))) {
      if (cfg.chainedCniPlugin && !cfg.istioOwned) {
        await step(async () => {
          this.#log.info(`removing Istio CNI config from CNI config file: ${path}`);
          const [text, mode] = await Promise.all([readFile(path, 'utf8'), stat(path).then((s) => s.mode & 0o7777)]);
          let cleaned: string;
          try {
            cleaned = removeEntry(text, cfg.cniPluginName, path);
          } catch (err) {
            throw new InstallError('ERR_CNI_CONFIG_INVALID', 'cleanup', (err as Error).message, { path, cause: err });
          }
          await writeFileAtomic(path, cleaned, { mode, mkdir: false, tmp: 'suffix' }).catch((err: unknown) => {
            throw ioError('cleanup', 'cannot write', path, err);
          });
        });
      } else {
        await step(async () => {
          this.#log.info(`removing Istio CNI config file: ${path}`);
          await removeIfThere(path);
        });
      }
    }
    await step(async () => {
      if (await removeIfThere(this.kubeconfigPath)) this.#log.info(`removing Istio CNI kubeconfig file: ${this.kubeconfigPath}`);
    });
    for (const dir of cfg.cniBinTargetDirs) {
      await step(async () => {
        const bin = join(dir, cfg.cniPluginName);
        if (await removeIfThere(bin)) this.#log.info(`removing binary: ${bin}`);
      });
    }
    if (errors.length > 0) throw errors[0];
  }

  /** One installation (§3.1); returns the binaries installed. */
  async installAll(): Promise<string[]> {
    const cfg = this.config;
    const signal = this.#abort.signal;
    const counted = async <T>(fn: () => Promise<T>): Promise<T> => {
      try {
        return await fn();
      } catch (err) {
        if (err instanceof InstallError && err.code !== 'ERR_STOPPED') {
          const result = failureResult(err.stage);
          if (result) this.#opts.onInstall?.(result);
        }
        throw err;
      }
    };
    const bins = await counted(() => copyBinaries({ source: cfg.cniPluginBinary, name: cfg.cniPluginName, targetDirs: cfg.cniBinTargetDirs }, this.#log));
    if (cfg.writeKubeconfig) {
      await counted(() => writeKubeconfig(cfg.cniAgentRunDir, {
        serviceProtocol: cfg.kubernetesServiceProtocol, serviceHost: cfg.kubernetesServiceHost, servicePort: cfg.kubernetesServicePort,
        caFile: cfg.kubeCaFile, skipTlsVerify: cfg.skipTlsVerify, serviceAccountDir: cfg.serviceAccountDir,
      }, cfg.kubeconfigMode, this.#log));
    }
    await counted(async () => {
      const v = await checkCniConfig(cfg, this.#state, this.entry, this.#log);
      if (v.valid) {
        this.#log.info(`valid Istio config present in node-level CNI file ${this.#state.writtenPath}, not modifying`);
        return;
      }
      this.#log.info(`configuration requires updates, (re)writing CNI config file: ${v.message}`, { reason: v.reason });
      const written = await writeCniConfig(cfg, this.#state, this.entry, this.#log, signal);
      this.#state.writtenPath = written.path;
      if (cfg.chainedCniPlugin && this.#state.primaryName === '') this.#state.primaryName = basename(written.primary);
    });
    return bins;
  }

  async #loop(installed: () => void): Promise<void> {
    const signal = this.#abort.signal;
    try {
      if (signal.aborted) throw stopped('watch');
      const bins = await this.installAll();
      installed();
      this.#log.info('initial installation complete, start watching for re-installation');
      const throttle = new InstallThrottle(this.#opts.throttle);
      for (;;) {
        const t = await throttle.throttle(signal);
        if (t.hits > REVERT_WARN_HITS) this.#revertLoop(t.hits);
        await this.#sleepWatchInstall(bins, signal);
        this.#log.info('detected changes to the node-level CNI setup, checking to see if configs or binaries need redeploying');
        // The binaries watched stay those of the first installation (as upstream).
        await this.installAll();
        this.#log.info('Istio CNI configuration and binaries validated/reinstalled');
      }
    } catch (err) {
      if (err instanceof InstallError && err.code === 'ERR_STOPPED') return;
      this.#log.error(`CNI installation failed: ${(err as Error).message}`, { code: (err as InstallError).code });
      throw err;
    } finally {
      this.#setReady(false);
    }
  }

  // One round: a fresh watch, armed before the validity re-check (a change made before the
  // watch existed is caught by the check); ready while nothing has changed.
  async #sleepWatchInstall(bins: string[], signal: AbortSignal): Promise<void> {
    const cfg = this.config;
    const targets = [
      ...cfg.cniBinTargetDirs.flatMap((dir) => bins.map((b) => join(dir, b))),
      cfg.mountedCniNetDir,
      // Upstream always watches the service account (token rotation → a new kubeconfig); the
      // kubeconfig being optional here, so is that watch.
      ...(cfg.writeKubeconfig ? [cfg.serviceAccountDir] : []),
    ];
    const watcher = new ChangeWatcher(targets);
    try {
      const v = await checkCniConfig(cfg, this.#state, this.entry, this.#log);
      if (!v.valid) {
        this.#log.info(`CNI config changed before the watch was armed: ${v.message}`, { reason: v.reason });
        return;
      }
      if (signal.aborted) throw stopped('watch');
      if (watcher.pending) return;
      this.#setReady(true);
      this.#opts.onInstall?.('SUCCESS');
      const e = await watcher.next(signal);
      this.#log.debug('CNI installation changed', { path: e.path, event: e.type, ...(e.filename ? { file: e.filename } : {}) });
    } finally {
      this.#setReady(false);
      watcher.close();
    }
  }

  #revertLoop(hits: number): void {
    const path = this.#state.writtenPath;
    const hint = path.toLowerCase().includes('cilium') ? 'Cilium is configured to own the CNI config: set cni.exclusive=false in its configuration' : undefined;
    this.#log.warn(`the CNI config was reinstalled ${hits} times in a row within seconds: another component keeps reverting the Istio CNI configuration${hint ? `; hint: ${hint}` : ''}`, { path });
    this.#opts.onRevertLoop?.({ hits, path, hint });
  }

  #setReady(ready: boolean): void {
    if (this.#ready === ready) return;
    this.#ready = ready;
    this.#opts.onReady?.(ready);
  }
}

async function removeIfThere(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return false;
    throw ioError('cleanup', 'cannot remove', path, err);
  }
}
