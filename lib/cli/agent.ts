// `podwire agent`: the node agent (ambient mode) until SIGTERM/SIGINT. The
// settings are Istio's env names and flags (lib/agent/config.ts); `--help`
// lists every one with its default, generated from the same table.
import { UsageError } from './args.js';
import type { Command } from './main.js';
import { ConfigError, describeSettings, parseAgentConfig, SETTINGS } from '../agent/config.js';
import { describeInstallSettings, INSTALL_SETTINGS, parseInstallConfig } from '../install/config.js';
import { describeRepairSettings, parseRepairConfig, REPAIR_SETTINGS } from '../repair/config.js';

function usage(): string {
  const seen = new Set<string>();
  const rows = [...describeSettings(), ...describeInstallSettings(), ...describeRepairSettings()].filter((s) => !seen.has(s.flag) && seen.add(s.flag)).map((s) => {
    const names = s.env ? `${s.env} / ${s.flag}` : s.flag;
    const def = s.default === '' ? '(empty)' : s.default;
    const up = s.upstreamDefault !== undefined ? `; Istio's binary: ${s.upstreamDefault === '' ? '(empty)' : s.upstreamDefault}` : '';
    return `  ${names}\n      ${s.description}\n      default: ${def}${up}`;
  });
  return [
    'Usage: podwire agent [--flag=value]...',
    '       podwire agent --version   (prints the version and exits)',
    '',
    'Runs the ambient node agent: informers for this node\'s pods and all namespaces, enrollment',
    '(in-pod redirection, ZDS hand-over to ztunnel, host probe set), the CNI plugin endpoint,',
    'the startup snapshot, a periodic drift check, /healthz + /readyz and /metrics; once it is',
    'ready, the CNI installer (podwire-cni into the CNI bin dir, its entry into the node\'s conflist).',
    'Kubernetes credentials: $KUBECONFIG (first entry), else the in-cluster service account.',
    'Each setting is read from its flag, else its environment variable, else the default.',
    'SIGTERM/SIGINT stop it: on upgrade or reboot (its DaemonSet still targets the node) nothing',
    'on the node is removed; on uninstall the host probe rule and sets are.',
    '',
    'Settings:',
    ...rows,
  ].join('\n');
}

export const command: Command = {
  summary: 'Run the ambient node agent (Istio CNI compatible) until SIGTERM.',
  get usage() {
    return usage();
  },
  async run(argv) {
    let config;
    let install;
    let repair;
    try {
      config = parseAgentConfig(process.env, argv, { foreign: [...INSTALL_SETTINGS, ...REPAIR_SETTINGS] });
      install = parseInstallConfig(process.env, argv, { foreign: [...SETTINGS, ...REPAIR_SETTINGS] });
      repair = parseRepairConfig(process.env, argv);
      if (!config.ambientEnabled) {
        const fromFlag = argv.some((a) => a.startsWith('--ambient-enabled'));
        throw new ConfigError(fromFlag ? '--ambient-enabled' : 'AMBIENT_ENABLED', 'false', 'podwire agent runs ambient mode (with sidecar pods handled by its plugin); a sidecar-only agent is not supported: set it to true');
      }
    } catch (err) {
      if (err instanceof ConfigError) throw new UsageError(err.message, { showUsage: false });
      throw err;
    }
    const { Agent } = await import('../agent/agent.js');
    const agent = new Agent({ config, install, repair });
    let signals = 0;
    const stopped = new Promise<void>((resolve) => {
      const onSignal = (sig: NodeJS.Signals) => {
        if (++signals > 1) {
          agent.log.error(`${sig} again: exiting without finishing the shutdown`);
          process.exit(1);
        }
        agent.log.info(`${sig}: shutting down`);
        resolve();
      };
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    });
    try {
      await Promise.race([agent.start(), stopped]);
      // Runs until a signal, or until the installer's loop fails (upstream exits then; the DaemonSet restarts us).
      await Promise.race([stopped, agent.fatal]);
    } catch (err) {
      agent.log.fatal((err as Error).message);
      await agent.stop({ cleanup: false });
      return 1;
    }
    const r = await agent.stop();
    agent.log.info(`stopped (${r.cleanedUp ? 'host rules removed' : 'host rules kept'}: ${r.reason})`);
    return 0;
  },
};
