// CNI configuration for tests that run a real runtime (test/helpers/containerd.ts):
// a bin dir of symlinks to Debian's plugins (containerd 1.6 takes one bin dir), a
// bridge + host-local conflist with its IPAM state in a temp dir, and `pwt-spy`, a
// chained test plugin that records every call and can refuse chosen pods.
import { readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';

export const DEBIAN_CNI_DIR = '/usr/lib/cni';

/** Whether Debian's bridge and host-local plugins are installed. */
export function debianCniAvailable(): boolean {
  return existsSync(join(DEBIAN_CNI_DIR, 'bridge')) && existsSync(join(DEBIAN_CNI_DIR, 'host-local'));
}

/** Fills `binDir` with symlinks to every plugin in /usr/lib/cni, plus `extra` (name → executable path). */
export function makeCniBinDir(binDir: string, extra: Record<string, string> = {}): string {
  mkdirSync(binDir, { recursive: true });
  for (const p of readdirSync(DEBIAN_CNI_DIR)) if (!(p in extra)) symlinkSync(join(DEBIAN_CNI_DIR, p), join(binDir, p));
  for (const [name, path] of Object.entries(extra)) symlinkSync(path, join(binDir, name));
  return binDir;
}

export interface BridgeNetworkOptions {
  /** Network name. Default `pwt-net`. */
  name?: string;
  /** Bridge device in the node netns. */
  bridge: string;
  /** e.g. `10.88.7.0/24`; the gateway is .1 and addresses start at .2. */
  subnet4: string;
  /** e.g. `fd00:88:7::/64` (optional: dual stack). */
  subnet6?: string;
  /** host-local's dataDir (leases: `<ipamDir>/<name>/<ip>`). */
  ipamDir: string;
  /** Plugins chained after bridge (e.g. `spyPlugin(...)`, or the project's plugin). */
  chain?: Array<Record<string, unknown>>;
  cniVersion?: string;
}

/** The subnet's first address (`10.88.7.0/24` → `10.88.7.1`, `fd00:88:7::/64` → `fd00:88:7::1`). */
export function firstAddress(subnet: string): string {
  const addr = subnet.split('/')[0]!;
  if (addr.includes(':')) {
    if (!addr.endsWith('::')) throw new RangeError(`IPv6 subnet ${subnet} must be written with a trailing ::`);
    return `${addr}1`;
  }
  const o = addr.split('.').map(Number);
  o[3] = o[3]! + 1;
  return o.join('.');
}

/** A conflist: bridge (isGateway, no masquerade) with host-local IPAM, then `chain`. */
export function bridgeConflist(o: BridgeNetworkOptions): Record<string, unknown> {
  const ranges: Array<Array<Record<string, string>>> = [[{ subnet: o.subnet4, gateway: firstAddress(o.subnet4) }]];
  const routes: Array<Record<string, string>> = [{ dst: '0.0.0.0/0' }];
  if (o.subnet6) {
    ranges.push([{ subnet: o.subnet6, gateway: firstAddress(o.subnet6) }]);
    routes.push({ dst: '::/0' });
  }
  return {
    cniVersion: o.cniVersion ?? '1.0.0',
    name: o.name ?? 'pwt-net',
    plugins: [
      {
        type: 'bridge', bridge: o.bridge, isGateway: true, ipMasq: false, hairpinMode: false,
        ipam: { type: 'host-local', dataDir: o.ipamDir, ranges, routes },
      },
      ...(o.chain ?? []),
    ],
  };
}

/** Writes a conflist into `confDir` atomically (containerd reloads on change). */
export function writeConflist(confDir: string, conflist: Record<string, unknown>, file = '10-pwt.conflist'): string {
  const path = join(confDir, file);
  const tmp = join(confDir, `.${file}.tmp`); // an extension containerd does not read
  writeFileSync(tmp, `${JSON.stringify(conflist, null, 2)}\n`);
  renameSync(tmp, path);
  return path;
}

/** The `pwt-spy` plugin's implementation (CommonJS, run by this Node). */
const SPY_SOURCE = String.raw`'use strict';
// pwt-spy: a chained CNI plugin for tests. Appends one JSON line per call to conf.log
// ({command, env: CNI_*, args: CNI_ARGS as an object, conf}); on ADD passes prevResult
// through, unless K8S_POD_NAME matches conf.failPods: then it fails with conf.failCode
// (default 11) and conf.failMsg. DEL, CHECK, STATUS and GC succeed.
const fs = require('fs');
const out = (o) => fs.writeSync(1, JSON.stringify(o));
let conf = {};
try { const input = fs.readFileSync(0, 'utf8'); if (input.trim()) conf = JSON.parse(input); } catch (e) {
  out({ cniVersion: '1.0.0', code: 6, msg: 'pwt-spy: cannot parse the netconf', details: String(e) }); process.exit(1);
}
const command = process.env.CNI_COMMAND || '';
const env = {};
for (const k of Object.keys(process.env)) if (k.startsWith('CNI_')) env[k] = process.env[k];
const args = {};
for (const kv of (process.env.CNI_ARGS || '').split(';')) { const i = kv.indexOf('='); if (i > 0) args[kv.slice(0, i)] = kv.slice(i + 1); }
if (conf.log) fs.appendFileSync(conf.log, JSON.stringify({ time: Date.now(), pid: process.pid, command, env, args, conf }) + '\n');
const version = conf.cniVersion || '1.0.0';
if (command === 'VERSION') { out({ cniVersion: version, supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] }); process.exit(0); }
if (command === 'ADD') {
  if (conf.failPods && new RegExp(conf.failPods).test(args.K8S_POD_NAME || '')) {
    out({ cniVersion: version, code: conf.failCode ?? 11, msg: conf.failMsg || 'pwt-spy: refusing pod', details: 'pod ' + (args.K8S_POD_NAMESPACE || '') + '/' + (args.K8S_POD_NAME || '') });
    process.exit(1);
  }
  out(Object.assign({ interfaces: [], ips: [] }, conf.prevResult || {}, { cniVersion: version }));
}
process.exit(0);
`;

/** Installs pwt-spy as `<dir>/pwt-spy` (a sh wrapper around `<dir>/pwt-spy.cjs`); returns the executable. */
export function writeSpyPlugin(dir: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'pwt-spy.cjs'), SPY_SOURCE);
  const exe = join(dir, 'pwt-spy');
  writeFileSync(exe, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(dir, 'pwt-spy.cjs'))} "$@"\n`, { mode: 0o755 });
  return exe;
}

export interface SpyOptions {
  /** JSON-lines log the plugin appends to. */
  log: string;
  /** Regex on K8S_POD_NAME: matching pods are refused on ADD. */
  failPods?: string;
  failCode?: number;
  failMsg?: string;
}

/** The conflist entry for pwt-spy. */
export function spyPlugin(o: SpyOptions): Record<string, unknown> {
  return { type: 'pwt-spy', ...o };
}

export interface SpyCall {
  time: number;
  command: string;
  env: Record<string, string>;
  args: Record<string, string>;
  conf: Record<string, unknown> & { prevResult?: { ips?: Array<{ address: string }> } };
}

/** pwt-spy's calls so far. */
export function readSpyLog(log: string): SpyCall[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as SpyCall);
}
