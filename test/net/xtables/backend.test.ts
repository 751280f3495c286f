// iptables backend detection (Istio's rules) and its persisted state, in fresh netns.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NetError } from '../../../lib/net/errors.js';
import { detectBackend, iptables } from '../../../lib/net/xtables/iptables.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

const versionOf = (bin: string) => /v(\d+(?:\.\d+)+)/.exec(execFileSync(bin, ['--version'], { encoding: 'utf8' }))![1];

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});
function stateFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-iptstate-'));
  dirs.push(dir);
  return join(dir, 'sub', 'iptables-backend.json');
}

const LEGACY_RULE = '*filter\n-A INPUT -p udp --dport 9 -j DROP\nCOMMIT\n';

describe.skipIf(!privileged('iptables-legacy', 'iptables-nft', 'ip6tables-legacy', 'ip6tables-nft'))('detectBackend', () => {
  it('chooses nft in an empty netns, for both families, without leaving legacy tables behind', async () => {
    const ns = await freshNetns();
    const b = await detectBackend({ netns: ns, env: {} });
    expect(b).toEqual({ mode: 'nft', version: versionOf('iptables-nft'), v6: { mode: 'nft', version: versionOf('ip6tables-nft') }, source: 'detected' });
    // Detection must not create the legacy tables that would flip the next detection.
    expect(await iptables.save(ns, { mode: 'legacy' })).toEqual([]);
    expect(await iptables.save(ns, { mode: 'legacy', family: 6 })).toEqual([]);
    expect((await detectBackend({ netns: ns, env: {} })).mode).toBe('nft');
  });

  it('chooses nft where only nft holds rules (they do not count as legacy rules)', async () => {
    const ns = await freshNetns();
    await iptables.restore(ns, LEGACY_RULE, { mode: 'nft', family: 4 });
    await iptables.restore(ns, LEGACY_RULE, { mode: 'nft', family: 6 });
    expect(await detectBackend({ netns: ns, env: {} })).toMatchObject({ mode: 'nft', v6: { mode: 'nft' }, source: 'detected' });
    expect(await iptables.save(ns, { mode: 'legacy' })).toEqual([]);
  });

  it('chooses legacy per family where legacy already holds rules', async () => {
    const ns = await freshNetns();
    await iptables.restore(ns, LEGACY_RULE, { mode: 'legacy', family: 4 });
    const b = await detectBackend({ netns: ns, env: {} });
    expect(b.mode).toBe('legacy');
    expect(b.version).toBe(versionOf('iptables-legacy'));
    expect(b.v6?.mode).toBe('nft');
    expect(iptables.modeFor(b, 4)).toBe('legacy');
    expect(iptables.modeFor(b, 6)).toBe('nft');

    const ns6 = await freshNetns();
    await iptables.restore(ns6, LEGACY_RULE, { mode: 'legacy', family: 6 });
    const b6 = await detectBackend({ netns: ns6, env: {} });
    expect([b6.mode, b6.v6?.mode]).toEqual(['nft', 'legacy']);
  });

  it('keeps the variant that already holds Istio\'s host chain (a node upstream\'s agent ran), even where legacy holds other tables', async () => {
    // As upstream leaves a node: its host rules in nft, and a legacy table of its own detection's
    // probe, which alone would make a fresh detection choose legacy.
    const HOST_CHAIN = '*nat\n:ISTIO_POSTRT - [0:0]\n-A POSTROUTING -j ISTIO_POSTRT\nCOMMIT\n';
    const ns = await freshNetns();
    for (const family of [4, 6] as const) {
      await iptables.restore(ns, HOST_CHAIN, { mode: 'nft', family });
      await iptables.restore(ns, LEGACY_RULE, { mode: 'legacy', family });
    }
    expect(await detectBackend({ netns: ns, env: {} })).toMatchObject({ mode: 'nft', v6: { mode: 'nft' }, source: 'host-rules' });

    // The other way round: the chain in legacy only is kept in legacy.
    const legacyNode = await freshNetns();
    await iptables.restore(legacyNode, HOST_CHAIN, { mode: 'legacy', family: 4 });
    expect(await detectBackend({ netns: legacyNode, env: {} })).toMatchObject({ mode: 'legacy', v6: { mode: 'nft' }, source: 'host-rules' });

    // In both variants nothing tells which one the pods use: Istio's rules decide (legacy holds rules).
    const both = await freshNetns();
    await iptables.restore(both, HOST_CHAIN, { mode: 'legacy', family: 4 });
    await iptables.restore(both, HOST_CHAIN, { mode: 'nft', family: 4 });
    expect(await detectBackend({ netns: both, env: {} })).toMatchObject({ mode: 'legacy', source: 'detected' });
    // A forced variant still wins over the chain.
    expect((await detectBackend({ netns: ns, env: { FORCE_IPTABLES_BINARY: 'legacy' } })).mode).toBe('legacy');
  });

  it('obeys FORCE_IPTABLES_BINARY and rejects other values', async () => {
    const ns = await freshNetns();
    const b = await detectBackend({ netns: ns, env: { FORCE_IPTABLES_BINARY: 'legacy' } });
    expect(b).toMatchObject({ mode: 'legacy', version: versionOf('iptables-legacy'), v6: { mode: 'legacy' }, source: 'env' });
    await iptables.restore(ns, LEGACY_RULE, { mode: 'legacy' });
    expect((await detectBackend({ netns: ns, env: { FORCE_IPTABLES_BINARY: 'nft' } })).mode).toBe('nft');
    await expect(detectBackend({ netns: ns, env: { FORCE_IPTABLES_BINARY: 'ebtables' } })).rejects.toThrow(RangeError);
  });

  it('persists the answer so a later detection cannot flip it', async () => {
    const ns = await freshNetns();
    const file = stateFile();
    const first = await detectBackend({ netns: ns, stateFile: file, env: {} });
    expect(first.mode).toBe('nft');
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ mode: 'nft', version: first.version, v6: first.v6 });

    // Legacy rules appear (say, another tool on the node): without the file we would flip.
    await iptables.restore(ns, LEGACY_RULE, { mode: 'legacy' });
    expect((await detectBackend({ netns: ns, env: {} })).mode).toBe('legacy');
    const again = await detectBackend({ netns: ns, stateFile: file, env: {} });
    expect(again).toEqual({ ...first, source: 'state' });

    // The operator's override wins and becomes the new state.
    await detectBackend({ netns: ns, stateFile: file, env: { FORCE_IPTABLES_BINARY: 'legacy' } });
    expect(await detectBackend({ netns: ns, stateFile: file, env: {} })).toMatchObject({ mode: 'legacy', source: 'state' });
  });

  it('refuses a state file with invalid content (NetError EINVAL), and never rewrites it', async () => {
    const ns = await freshNetns();
    const bad = ['{', '"nft"', '{"mode":"iptables","version":"1.8.9","v6":null}', '{"mode":"nft","version":"one","v6":null}',
      '{"mode":"nft","version":"1.8.9"}', '{"mode":"nft","version":"1.8.9","v6":{"mode":"nft"}}'];
    for (const content of bad) {
      const file = stateFile();
      await detectBackend({ netns: ns, stateFile: file, env: {} });
      writeFileSync(file, content);
      const err = await detectBackend({ netns: ns, stateFile: file, env: {} }).then(() => undefined, (e: unknown) => e);
      expect(err, content).toBeInstanceOf(NetError);
      expect(err).toMatchObject({ code: 'EINVAL', op: 'iptables-backend-state' });
      expect(readFileSync(file, 'utf8')).toBe(content);
    }
    const file = stateFile();
    writeFileSync(join(file, '..', '..', 'ok.json'), '{"mode":"legacy","version":"1.8.9","v6":null}');
    expect(await detectBackend({ netns: ns, stateFile: join(file, '..', '..', 'ok.json'), env: {} }))
      .toEqual({ mode: 'legacy', version: '1.8.9', v6: null, source: 'state' });
  });
});
