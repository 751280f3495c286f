// The native nftables path: scripts compiled into one nfnetlink batch, sent
// into fresh netns, compared with what `nft -f` of the same text leaves
// (`nft -j list ruleset`, handles and metainfo dropped), plus atomicity,
// error mapping, verify/drift and the exec fallback.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { NetError } from '../../../lib/net/errors.js';
import type { Netns } from '../../../lib/net/netns/netns.js';
import { compile, NftBatchError, send, verify, type Fallback } from '../../../lib/net/nft/batch.js';
import { Transaction } from '../../../lib/net/nft/transaction.js';
import { hostProbeRules, inpodRules, sidecarRules, toNft } from '../../../lib/redirect/index.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

const GOLDEN_DIR = new URL('../../fixtures/istio/nftables/', import.meta.url);
const goldens = readdirSync(GOLDEN_DIR).filter((f) => f.endsWith('.golden')).sort();
const golden = (name: string) => readFileSync(new URL(name, GOLDEN_DIR), 'utf8');

// The host-probe goldens use sets that the host rules' owner creates first.
const PROBE_SETS = [
  'add table inet istio-ambient-nat',
  'add set inet istio-ambient-nat istio-inpod-probes-v4 { type ipv4_addr ; }',
  'add set inet istio-ambient-nat istio-inpod-probes-v6 { type ipv6_addr ; }',
  '',
].join('\n');

async function nftRun(ns: Netns, args: string[], stdin?: string): Promise<string> {
  const r = await ns.spawn(['nft', ...args], stdin === undefined ? {} : { stdin });
  if (r.code !== 0) throw new Error(`nft ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** `nft -j list ruleset` without handles and metainfo. */
async function ruleset(ns: Netns): Promise<unknown[]> {
  const doc = JSON.parse(await nftRun(ns, ['-j', 'list', 'ruleset'])) as { nftables: Array<Record<string, unknown>> };
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object') {
      return Object.fromEntries(Object.entries(v).filter(([k]) => k !== 'handle').map(([k, x]) => [k, strip(x)]));
    }
    return v;
  };
  return doc.nftables.filter((o) => !('metainfo' in o)).map(strip);
}

/** Sends `script` natively into one fresh netns and with `nft -f` into another; returns both rulesets. */
async function bothWays(script: string, setup = ''): Promise<{ native: unknown[]; exec: unknown[] }> {
  const compiled = compile(script);
  expect(compiled.fallback).toBeUndefined();
  const a = await freshNetns();
  const b = await freshNetns();
  if (setup) { await nftRun(a, ['-f', '-'], setup); await nftRun(b, ['-f', '-'], setup); }
  expect(await send(a, compiled)).toEqual({ path: 'netlink' });
  await nftRun(b, ['-f', '-'], script);
  return { native: await ruleset(a), exec: await ruleset(b) };
}

describe('nft compile (no kernel)', () => {
  it('compiles every golden without falling back', () => {
    for (const g of goldens) {
      const c = compile(golden(g));
      expect(c.fallback, g).toBeUndefined();
      expect(c.path).toBe('netlink');
      expect(c.size).toBeGreaterThan(200);
    }
  });

  it('lowers statements the way nft --debug=netlink shows them', () => {
    const c = compile([
      'add table inet t',
      'add chain inet t c',
      'add rule inet t c ip daddr != 127.0.0.1/32 tcp dport != 15008 mark and 0xfff  != 0x539 counter redirect to :15006',
      'add rule inet t c meta mark & 0xfff == 0x539 counter ct mark set ct mark & 0xfffff000 |  0x111',
      'add rule inet t c ct mark and 0xfff == 0x111 counter meta mark set ct mark',
      'add rule inet t c udp dport 53 meta mark and 0xfff == 0x539 counter ct zone set 1',
      'add rule inet t c oifname lo ip6 daddr != ::1/128 counter accept',
      'add rule inet t c ip daddr 10.0.0.0/8 tcp dport { 80, 443 } counter jump c',
      '',
    ].join('\n'));
    expect(c.fallback).toBeUndefined();
    const rules = c.expected().filter((o) => o.kind === 'rule').map((o) => o.exprs);
    expect(rules[0]).toEqual([
      'meta load nfproto => r1', 'cmp eq r1 0x02',
      'payload load 4b @ nh + 16 => r1', 'cmp neq r1 0x7f000001',
      'meta load l4proto => r1', 'cmp eq r1 0x06',
      'payload load 2b @ th + 2 => r1', 'cmp neq r1 0x3aa0',
      'meta load mark => r1', 'bitwise r1 = (r1 & 0xff0f0000) ^ 0x00000000', 'cmp neq r1 0x39050000',
      'counter', 'immediate r1 0x3a9e', 'redir proto r1 flags 2',
    ]);
    expect(rules[1]).toEqual([
      'meta load mark => r1', 'bitwise r1 = (r1 & 0xff0f0000) ^ 0x00000000', 'cmp eq r1 0x39050000', 'counter',
      'ct load mark => r1', 'bitwise r1 = (r1 & 0x00f0ffff) ^ 0x11010000', 'ct set mark <= r1',
    ]);
    expect(rules[2]!.slice(-2)).toEqual(['ct load mark => r1', 'meta set mark <= r1']);
    expect(rules[3]!.slice(-2)).toEqual(['immediate r1 0x0100', 'ct set zone <= r1']);
    expect(rules[4]!.slice(0, 2)).toEqual(['meta load oifname => r1', `cmp eq r1 0x6c6f${'00'.repeat(14)}`]);
    expect(rules[5]).toEqual([
      'meta load nfproto => r1', 'cmp eq r1 0x02', 'payload load 1b @ nh + 16 => r1', 'cmp eq r1 0x0a',
      'meta load l4proto => r1', 'cmp eq r1 0x06', 'payload load 2b @ th + 2 => r1', 'lookup r1 @__set',
      'counter', 'immediate verdict jump c',
    ]);
    // the anonymous set travels in the same batch, before its rule
    const kinds = c.expected().map((o) => o.kind);
    expect(kinds.slice(-3)).toEqual(['set', 'elem', 'rule']);
  });

  it('falls back to nft -f with a reason and line for what it does not compile', () => {
    const seen: Fallback[] = [];
    const c = compile('add table inet t\nadd chain inet t c\nadd rule inet t c log prefix "x" accept\n', { onFallback: (f) => seen.push(f) });
    expect(c.path).toBe('exec');
    expect(c.fallback?.line).toBe(3);
    expect(c.fallback?.reason).toMatch(/statement/);
    expect(seen).toEqual([c.fallback]);
    for (const s of ['add table bridge t\n', 'add chain inet t c { type filter hook ingress device "lo" priority 0 ; }\n',
      'add rule inet t c iifname "eth*" accept\n', 'flush ruleset\n', 'add rule inet t c index 3 accept\n'])
      expect(compile(s).path, s).toBe('exec');
  });

  it('falls back when the encoder refuses a limit the parser cannot see (an element list over 64 KiB)', () => {
    const elems = Array.from({ length: 6000 }, (_, i) => `10.${i >> 8}.${i & 255}.1`).join(', ');
    const c = compile(`add table inet t\nadd set inet t s { type ipv4_addr ; }\nadd element inet t s { ${elems} }\n`);
    expect(c.path).toBe('exec');
    expect(c.fallback?.reason).toMatch(/65535/);
  });

  it('accepts a Transaction', () => {
    const t = new Transaction().addTable({ family: 'inet', name: 't' }).addChain({ family: 'inet', name: 't' }, 'c')
      .addRule({ family: 'inet', name: 't' }, 'c', 'meta l4proto tcp counter accept', { comment: 'hi' });
    const c = compile(t);
    expect(c.path).toBe('netlink');
    expect(c.expected().find((o) => o.kind === 'rule')?.comment).toBe('hi');
  });
});

describe.skipIf(!privileged('nft'))('nft send (real kernel)', () => {
  for (const g of goldens) {
    it(`${g}: the kernel holds what nft -f leaves`, async () => {
      const { native, exec } = await bothWays(golden(g), g.startsWith('hostprobe') ? PROBE_SETS : '');
      expect(native.length).toBeGreaterThan(3);
      expect(native).toEqual(exec);
    });
  }

  it('rendered configurations match nft -f too', async () => {
    const configs = [
      { ipv6: true, dnsCapture: false },
      { ipv6: true, ingressBypass: true, dnsCapture: false },
      { virtualInterfaces: ['veth9', 'eth1'], snatIp: '10.9.8.7' },
      { ipv6: true, snatIpv6: 'fd00::7', virtualInterfaces: ['eth1'] },
    ];
    for (const cfg of configs) {
      const script = toNft(inpodRules(cfg));
      const { native, exec } = await bothWays(script);
      expect(native, JSON.stringify(cfg)).toEqual(exec);
    }
    const sidecars = [
      {},
      { mode: 'TPROXY' as const },
      { includeOutboundCidrs: '10.0.0.0/8,172.16.0.0/12', excludeOutboundCidrs: '10.1.0.0/16', excludeInboundPorts: '22,9090' },
      { includeInboundPorts: '8080,9090', includeOutboundPorts: '443', excludeOutboundPorts: '25', dnsCapture: true },
      { excludeInterfaces: 'eth9', rerouteVirtualInterfaces: 'veth5', invalidDrop: true, ownerGroupsInclude: '1001,1002' },
    ];
    let compiledSidecars = 0;
    for (const cfg of sidecars) {
      let script: string;
      try { script = toNft(sidecarRules(cfg)); } catch (err) { throw new Error(`sidecar ${JSON.stringify(cfg)}: ${String(err)}`); }
      const c = compile(script);
      if (c.path === 'exec') { console.warn(`sidecar ${JSON.stringify(cfg)} falls back: ${c.fallback!.reason}`); continue; }
      compiledSidecars++;
      const { native, exec } = await bothWays(script);
      expect(native, JSON.stringify(cfg)).toEqual(exec);
    }
    expect(compiledSidecars).toBeGreaterThanOrEqual(3);
    const host = toNft(hostProbeRules({ ipv6: true, kubeletUid: 1000 }));
    const { native, exec } = await bothWays(host, PROBE_SETS);
    expect(native).toEqual(exec);
  });

  it('extra statements (sets, elements, tproxy, snat, ct state, index, comments) match nft -f', async () => {
    const script = [
      'add table inet t { comment "mine" ; }',
      'flush table inet t',
      'add set inet t s4 { type ipv4_addr ; comment "pods" ; }',
      'add set inet t ports { type inet_service ; flags timeout ; timeout 1h ; }',
      'add element inet t s4 { 10.0.0.1 comment "abc", 10.0.0.2 }',
      'add chain inet t post { type nat hook postrouting priority srcnat ; }',
      'add chain inet t pre { type filter hook prerouting priority mangle ; policy accept ; }',
      'add chain inet t c { comment "regular" ; }',
      'add rule inet t post meta l4proto tcp skuid 1000 ip daddr @s4 counter snat to 169.254.7.127',
      'add rule inet t post skgid != 1337 counter return',
      'add rule inet t post tcp dport != { 80, 443 } counter return',
      'add rule inet t post ip daddr 10.0.0.0/8 ip saddr 10.1.0.0/12 counter return comment "hello"',
      'add rule inet t pre ct state related,established counter accept',
      'add rule inet t pre meta mark set 0x111 counter',
      'add rule inet t pre ct mark set mark',
      'add rule inet t pre ip daddr 10.1.0.0/16 tcp dport 80 tproxy ip to :15008 meta mark set 0x111 and 0xfff accept',
      'add rule inet t pre udp dport 1000-2000 counter drop',
      'add rule inet t c udp sport 53 counter drop',
      'add rule inet t c iifname "fake1s0f0" counter goto c2',
      'add chain inet t c2',
      'insert rule inet t c index 0 counter drop',
      'add rule inet t c index 1 tcp dport 22 accept',
      '',
    ].join('\n');
    // c2 must exist before the jump in nft's order too: move its declaration first
    const fixed = script.replace('add chain inet t c2\n', '').replace('add chain inet t c {', 'add chain inet t c2\nadd chain inet t c {');
    const { native, exec } = await bothWays(fixed);
    expect(native).toEqual(exec);
  });

  it('is atomic: a batch that fails leaves the previous rules, and the error names the command and line', async () => {
    const ns = await freshNetns();
    const good = compile(golden('default.golden'));
    await send(ns, good);
    const before = await ruleset(ns);
    // Line 6 jumps to a chain that does not exist: the kernel rejects that rule.
    const bad = compile([
      'add table inet istio-ambient-nat',
      'flush table inet istio-ambient-nat',
      'add chain inet istio-ambient-nat output { type nat hook output priority -100 ; }',
      'add chain inet istio-ambient-nat istio-output',
      'add rule inet istio-ambient-nat output jump istio-output',
      'add rule inet istio-ambient-nat output jump no-such-chain',
      'add rule inet istio-ambient-nat istio-output counter accept',
      '',
    ].join('\n'));
    expect(bad.path).toBe('netlink');
    const err = await send(ns, bad).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NftBatchError);
    expect(err).toBeInstanceOf(NetError);
    const e = err as NftBatchError;
    expect(e.code).toBe('ENOENT');
    expect(e.op).toBe('NFT_MSG_NEWRULE');
    expect(e.line).toBe(6);
    expect(e.lineText).toContain('no-such-chain');
    expect(e.command).toBe(5);
    expect(await ruleset(ns)).toEqual(before);
    expect((await verify(ns, good)).ok).toBe(true);
  });

  it('a batch the kernel rejects as a whole fails at once instead of waiting for ACKs', async () => {
    const ns = await freshNetns();
    const c = compile(golden('default.golden'));
    const bad = Buffer.from(c.batch!);
    bad.writeUInt16BE(0xff, 16 + 2);  // BATCH_BEGIN's res_id: no such nfnetlink subsystem
    const nf = (await ns.netlink()).nfnetlink;
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error('hung')), 5000));
    const err = await Promise.race([nf.request(bad, 'NFNL_MSG_BATCH', true), timeout]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NetError);
    expect((err as NetError).code).toBe('EINVAL');
    expect((err as NetError).index).toBe(0);
    expect(await ruleset(ns)).toEqual([]);
  });

  it('re-sending is idempotent (add + flush table)', async () => {
    const ns = await freshNetns();
    const c = compile(golden('default_ipv6.golden'));
    await send(ns, c);
    const once = await ruleset(ns);
    await send(ns, c);
    expect(await ruleset(ns)).toEqual(once);
  });

  it('verify finds drift: a foreign rule, a deleted rule, a changed chain, a missing table', async () => {
    const ns = await freshNetns();
    const c = compile(golden('default.golden'));
    await send(ns, c);
    expect(await verify(ns, c)).toEqual({ ok: true, drift: [] });

    await nftRun(ns, ['add', 'rule', 'inet', 'istio-ambient-nat', 'istio-output', 'counter', 'accept']);
    let v = await verify(ns, c);
    expect(v.ok).toBe(false);
    expect(v.drift).toEqual([expect.objectContaining({ kind: 'extra-rule', chain: 'istio-output', table: 'istio-ambient-nat' })]);

    await send(ns, c);
    expect((await verify(ns, c)).ok).toBe(true);
    // delete the 2nd rule of istio-prerouting in the mangle table... (the only one) by handle
    const listing = JSON.parse(await nftRun(ns, ['-j', '-a', 'list', 'chain', 'inet', 'istio-ambient-mangle', 'istio-prerouting'])) as
      { nftables: Array<{ rule?: { handle: number } }> };
    const handle = listing.nftables.find((o) => o.rule)!.rule!.handle;
    await nftRun(ns, ['delete', 'rule', 'inet', 'istio-ambient-mangle', 'istio-prerouting', 'handle', String(handle)]);
    v = await verify(ns, c);
    expect(v.drift).toEqual([expect.objectContaining({ kind: 'missing-rule', chain: 'istio-prerouting', table: 'istio-ambient-mangle' })]);

    await send(ns, c);
    await nftRun(ns, ['-f', '-'], 'delete chain inet istio-ambient-raw prerouting\nadd chain inet istio-ambient-raw prerouting { type filter hook prerouting priority -200 ; }\nadd rule inet istio-ambient-raw prerouting jump istio-prerouting\n');
    v = await verify(ns, c);
    expect(v.drift).toEqual([expect.objectContaining({ kind: 'chain-differs', chain: 'prerouting', table: 'istio-ambient-raw' })]);

    await nftRun(ns, ['delete', 'table', 'inet', 'istio-ambient-raw']);
    v = await verify(ns, c);
    expect(v.drift).toEqual([{ kind: 'missing-table', family: 1, table: 'istio-ambient-raw' }]);
  });

  it('verify reads a family once for the model\'s tables, and other tables of it change nothing', async () => {
    const ns = await freshNetns();
    const c = compile(golden('default.golden'));  // three inet tables: one chain, rule and set dump for all
    await send(ns, c);
    // Someone else's inet table with chains named like ours, rules and a set: not ours to compare.
    await nftRun(ns, ['-f', '-'], 'add table inet other\nadd chain inet other istio-output\nadd rule inet other istio-output counter drop\n'
      + 'add chain inet other output { type filter hook output priority 0 ; }\nadd set inet other s { type ipv4_addr ; }\n');
    expect(await verify(ns, c)).toEqual({ ok: true, drift: [] });
    // Drift in one of ours is still found, with its table, among everything the family dump returns.
    await nftRun(ns, ['add', 'rule', 'inet', 'istio-ambient-raw', 'istio-output', 'counter', 'accept']);
    expect((await verify(ns, c)).drift).toEqual([expect.objectContaining({ kind: 'extra-rule', table: 'istio-ambient-raw', chain: 'istio-output', actual: 'counter; immediate verdict accept' })]);
  });

  it('verify dumps sets only where the model declares some, and finds a missing one there', async () => {
    const ns = await freshNetns();
    const nf = (await ns.netlink()).nfnetlink;
    const requests = vi.spyOn(nf, 'request');
    const ops = () => requests.mock.calls.map((c) => c[1]);
    const plain = compile(golden('default.golden'));  // the in-pod tables: chains and rules, no named set
    await send(ns, plain);
    requests.mockClear();
    const all = [{ family: 1, name: 'istio-ambient-nat' }, { family: 1, name: 'istio-ambient-mangle' }, { family: 1, name: 'istio-ambient-raw' }];
    expect(await verify(ns, plain, { tables: all })).toEqual({ ok: true, drift: [] });
    expect(ops().sort()).toEqual(['NFT_MSG_GETCHAIN', 'NFT_MSG_GETRULE']);
    const withSet = compile('add table inet pwset\nadd chain inet pwset c\nadd set inet pwset s { type ipv4_addr ; }\nadd rule inet pwset c counter\n');
    await send(ns, withSet);
    requests.mockClear();
    expect(await verify(ns, withSet)).toEqual({ ok: true, drift: [] });
    expect(ops()).toContain('NFT_MSG_GETSET');
    await nftRun(ns, ['delete', 'set', 'inet', 'pwset', 's']);
    expect((await verify(ns, withSet)).drift).toEqual([{ kind: 'missing-set', family: 1, table: 'pwset', set: 's' }]);
    requests.mockRestore();
  });

  it('verify takes the table list the caller just read (no table dump), and a table missing from it is drift', async () => {
    const ns = await freshNetns();
    const c = compile(golden('default.golden'));
    await send(ns, c);
    const all = [{ family: 1, name: 'istio-ambient-nat' }, { family: 1, name: 'istio-ambient-mangle' }, { family: 1, name: 'istio-ambient-raw' }];
    expect(await verify(ns, c, { tables: all })).toEqual({ ok: true, drift: [] });
    expect((await verify(ns, c, { tables: all.slice(1) })).drift).toEqual([{ kind: 'missing-table', family: 1, table: 'istio-ambient-nat' }]);
    await expect(verify(ns, c, { tables: 'nat' as never })).rejects.toThrow(TypeError);
  });

  it('falls back to nft -f inside the netns, reporting it', async () => {
    const ns = await freshNetns();
    const script = 'add table inet fb\nadd chain inet fb c\nadd rule inet fb c log prefix "pw" accept\n';
    const c = compile(script);
    const seen: Fallback[] = [];
    expect(await send(ns, c, { onFallback: (f) => seen.push(f) })).toEqual({ path: 'exec', reason: c.fallback!.reason });
    expect(seen).toHaveLength(1);
    expect(JSON.stringify(await ruleset(ns))).toContain('"prefix":"pw"');
  });
});
