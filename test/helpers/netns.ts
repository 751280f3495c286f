// Fresh network namespaces per test, named pwt-<pid>-<n>, always removed in
// afterEach, even when the test fails. Nothing here touches the host netns.
import { execFileSync } from 'node:child_process';
import { afterEach } from 'vitest';
import { Netns } from '../../lib/net/netns/netns.js';

let counter = 0;
const live: Array<{ name: string; ns: Netns }> = [];

afterEach(async () => {
  while (live.length) {
    const { name, ns } = live.pop()!;
    ns.close();
    try {
      await Netns.remove(name);
    } catch {
      // removed by the test itself
    }
  }
});

/** A unique test netns name (not created). */
export function nsName(): string {
  return `pwt-${process.pid}-${++counter}`;
}

/** Creates a netns with lo up; removed after the current test. */
export async function freshNetns(opts: { loUp?: boolean } = {}): Promise<Netns & { name: string }> {
  const name = nsName();
  const ns = await Netns.create(name);
  live.push({ name, ns });
  if (opts.loUp !== false) await (await ns.netlink()).links.set('lo', { up: true });
  return Object.assign(ns, { name });
}

/** Runs `ip -j ARGS` inside the netns and parses its JSON. */
export function ipJson<T = unknown>(name: string, ...args: string[]): T {
  const out = execFileSync('ip', ['-n', name, '-j', ...args], { encoding: 'utf8' });
  return JSON.parse(out || '[]') as T;
}

/** Runs `ip ARGS` inside the netns. */
export function ip(name: string, ...args: string[]): string {
  return execFileSync('ip', ['-n', name, ...args], { encoding: 'utf8' });
}
