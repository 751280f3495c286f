// Pods wired by Debian's real CNI plugins instead of our own rtnetlink calls:
// the bridge plugin (with host-local IPAM, state in a private directory) run
// inside the node netns, as a container runtime would run it on a node.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Netns } from '../net/netns/netns.js';
import { BRIDGE, NODE_V4, NODE_V6, type DemoPod } from './topology.js';

export const CNI_BIN_DIR = '/usr/lib/cni';

export function cniAvailable(): boolean {
  return existsSync(join(CNI_BIN_DIR, 'bridge')) && existsSync(join(CNI_BIN_DIR, 'host-local'));
}

export function netconf(dataDir: string): Record<string, unknown> {
  return {
    cniVersion: '1.0.0',
    name: 'pwdemo',
    type: 'bridge',
    bridge: BRIDGE,
    isGateway: true,
    ipMasq: false,
    ipam: {
      type: 'host-local',
      dataDir,
      ranges: [[{ subnet: '10.244.0.0/16', gateway: NODE_V4, rangeStart: '10.244.0.2' }], [{ subnet: 'fd00:244::/64', gateway: NODE_V6, rangeStart: 'fd00:244::2' }]],
      routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }],
    },
  };
}

interface CniResult {
  ips?: Array<{ address: string }>;
}

/** Runs one CNI command of the bridge plugin for a pod, inside the node netns. */
export async function cniExec(node: Netns, command: 'ADD' | 'DEL', pod: DemoPod, dataDir: string): Promise<CniResult> {
  mkdirSync(dataDir, { recursive: true });
  const r = await node.spawn([join(CNI_BIN_DIR, 'bridge')], {
    stdin: JSON.stringify(netconf(dataDir)),
    env: {
      CNI_COMMAND: command, CNI_CONTAINERID: pod.uid, CNI_NETNS: pod.netnsPath, CNI_IFNAME: 'eth0',
      CNI_PATH: CNI_BIN_DIR, PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    },
    timeoutMs: 30_000,
  });
  if (r.code !== 0) {
    let msg = r.stdout.trim() || r.stderr.trim();
    try {
      const e = JSON.parse(r.stdout) as { msg?: string; details?: string };
      msg = [e.msg, e.details].filter(Boolean).join(': ');
    } catch {
      // not JSON: keep the raw text
    }
    throw Object.assign(new Error(`CNI ${command} for ${pod.name} failed (exit ${r.code}): ${msg}`), { code: 'ERR_CNI' });
  }
  return command === 'ADD' ? (JSON.parse(r.stdout) as CniResult) : {};
}

/** ADD: wires the pod and records the addresses host-local gave it. */
export async function createPodWithCni(node: Netns, ns: Netns, pod: DemoPod, dataDir: string): Promise<void> {
  // No duplicate address detection in the pod: its IPv6 address is usable at once.
  await ns.sysctl.set('net.ipv6.conf.default.accept_dad', 0);
  await ns.sysctl.set('net.ipv6.conf.all.accept_dad', 0);
  await (await ns.netlink()).links.set('lo', { up: true });
  const result = await cniExec(node, 'ADD', pod, dataDir);
  for (const ip of result.ips ?? []) {
    const addr = ip.address.split('/')[0]!;
    if (addr.includes(':')) pod.ip6 = addr;
    else pod.ip4 = addr;
  }
}
