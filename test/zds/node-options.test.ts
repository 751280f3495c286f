// The node's ZDS socket options reach the ZDS server: NodeDataplane's
// zdsMode / zdsAllowedUids (and warn) end up on the real listening socket.
// The node is a fresh pwt- netns; the socket lives in a temp dir.
import { statSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NodeDataplane } from '../../lib/dataplane/node.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { FakeZtunnel, hungUp, tempSocketPath } from './helpers.js';

let sock: ReturnType<typeof tempSocketPath>;
const cleanups: Array<() => unknown> = [];

beforeEach(() => {
  sock = tempSocketPath();
});
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
  sock.remove();
});

async function start(extra: Partial<Parameters<typeof NodeDataplane.start>[0]>): Promise<NodeDataplane> {
  const host = await freshNetns();
  const node = await NodeDataplane.start({ host, backend: 'nftables', zdsPath: sock.path, ipv6: false, ...extra });
  cleanups.push(() => node.close());
  return node;
}

describe.skipIf(!privileged('nft'))('NodeDataplane ZDS options', () => {
  it('passes zdsMode and zdsAllowedUids to the ZDS server socket', async () => {
    const node = await start({ zdsMode: 0o660, zdsAllowedUids: [4242] });
    expect(statSync(sock.path).mode & 0o777).toBe(0o660);
    const rejected = new Promise((r) => node.zds!.server.once('rejected', r));
    const c = await FakeZtunnel.connect(sock.path);
    cleanups.push(() => c.close());
    expect(await rejected).toMatchObject({ uid: process.getuid!() });
    expect(await hungUp(c)).toBe(true);
    expect(node.zds!.server.stats.rejected).toBe(1);
  });

  it('keeps the server defaults when they are not given (0600, anyone)', async () => {
    const node = await start({});
    expect(statSync(sock.path).mode & 0o777).toBe(0o600);
    const c = await FakeZtunnel.connect(sock.path);
    cleanups.push(() => c.close());
    expect((await c.snapshot()).map((r) => r.req.type)).toEqual(['snapshot_sent']);
    expect(node.zds!.server.stats.rejected).toBe(0);
  });
});
