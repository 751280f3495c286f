// Shared by the installer tests: Istio's golden files (test/fixtures/istio/install), temp dirs
// (pwt- prefix, removed after each test), configurations and a log recorder.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { parseInstallConfig, type InstallConfig } from '../../lib/install/config.js';
import type { InstallLog } from '../../lib/install/log.js';
import type { PluginEntrySettings } from '../../lib/install/plugin-entry.js';

export const FIXTURES = new URL('../fixtures/istio/install/', import.meta.url);
export const fixture = (name: string) => readFileSync(new URL(name, FIXTURES), 'utf8');

/** The entry of upstream's cni/pkg/install tests (bridge/list goldens, istio-cni.conf). */
export const UNIT_ENTRY: PluginEntrySettings = {
  type: 'istio-cni', pluginLogLevel: 'debug', cniAgentRunDir: '/path/to/kubeconfig', ambientEnabled: false,
  enablementSelectors: [], excludeNamespaces: [], podNamespace: 'my-namespace', nativeNftables: false, enableAmbientDetectionRetry: false,
};
/** The entry of upstream's cni/test install tests (expected/*). */
export const E2E_ENTRY: PluginEntrySettings = { ...UNIT_ENTRY, cniAgentRunDir: '/tmp', excludeNamespaces: ['istio-system'], podNamespace: '' };

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh temp dir (pwt-install-*), removed after the test. */
export function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-install-'));
  dirs.push(d);
  return d;
}

export interface Node {
  root: string;
  netDir: string;
  binDir: string;
  runDir: string;
  saDir: string;
  /** The "plugin binary" (any small file). */
  source: string;
}

/** A node's directories under a temp dir, and a small executable as the plugin binary. */
export function fakeNode(): Node {
  const root = tempDir();
  const n: Node = {
    root, netDir: join(root, 'net.d'), binDir: join(root, 'bin'), runDir: join(root, 'run'), saDir: join(root, 'sa'),
    source: join(root, 'podwire-cni'),
  };
  for (const d of [n.netDir, n.binDir, n.runDir, n.saDir]) mkdirSync(d);
  writeFileSync(n.source, '#!/bin/sh\necho podwire-cni\n', { mode: 0o755 });
  return n;
}

/** An InstallConfig for `node`, read through parseInstallConfig from env-style settings. */
export function installConfig(node: Node, env: Record<string, string> = {}, entry: Partial<PluginEntrySettings> = {}): InstallConfig {
  const cfg = parseInstallConfig({
    MOUNTED_CNI_NET_DIR: node.netDir, CNI_BIN_TARGET_DIRS: node.binDir, CNI_AGENT_RUN_DIR: node.runDir,
    CNI_PLUGIN_BINARY: node.source, SERVICE_ACCOUNT_DIR: node.saDir, ...env,
  }, []);
  cfg.entry = { ...E2E_ENTRY, ...entry, cniAgentRunDir: entry.cniAgentRunDir ?? E2E_ENTRY.cniAgentRunDir };
  return cfg;
}

export interface Recorded {
  log: InstallLog;
  lines: { level: string; msg: string; fields?: Record<string, unknown> }[];
  warnings(): string[];
}

export function recorder(): Recorded {
  const lines: Recorded['lines'] = [];
  const at = (level: string) => (msg: string, fields?: Record<string, unknown>) => {
    lines.push({ level, msg, ...(fields ? { fields } : {}) });
  };
  return {
    log: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
    lines,
    warnings: () => lines.filter((l) => l.level === 'warn').map((l) => l.msg),
  };
}

/** Polls `fn` every 10 ms until it returns true (or throws after `ms`). */
export async function until(fn: () => boolean | Promise<boolean>, ms = 3000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
