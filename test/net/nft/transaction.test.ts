// The nft Transaction builder: exact text (Istio's golden reproduced), input
// validation, and its scripts applied by the real nft and read back.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { nft } from '../../../lib/net/nft/tool.js';
import { Transaction, type ChainOptions, type TableRef } from '../../../lib/net/nft/transaction.js';
import { freshNetns } from '../../helpers/netns.js';
import { privileged } from '../../helpers/privileged.js';

const GOLDEN = readFileSync(new URL('../../fixtures/istio-nft-default.golden', import.meta.url), 'utf8');

const MARK = 'mark and 0xfff';

/** Istio's default in-pod nft ruleset, built call by call as the renderer would. */
function istioDefault(): Transaction {
  const tx = new Transaction();
  const table = (name: string, hooks: Array<[string, ChainOptions]>, rules: Array<[string, string]>) => {
    const t: TableRef = { family: 'inet', name };
    tx.addTable(t).flushTable(t);
    for (const [chain, spec] of hooks) tx.addChain(t, chain, spec);
    tx.addChain(t, 'istio-prerouting').addChain(t, 'istio-output');
    for (const [chain, rule] of rules) tx.addRule(t, chain, rule);
  };
  table('istio-ambient-nat', [
    ['prerouting', { type: 'nat', hook: 'prerouting', priority: -100 }],
    ['output', { type: 'nat', hook: 'output', priority: -100 }],
  ], [
    ['output', 'jump istio-output'],
    ['prerouting', 'jump istio-prerouting'],
    ['istio-prerouting', 'meta l4proto tcp ip saddr 169.254.7.127 counter accept'],
    ['istio-output', 'meta l4proto tcp ip daddr 169.254.7.127 counter accept'],
    // Upstream's double spaces are part of the compatibility target: bodies are kept verbatim.
    ['istio-prerouting', `ip daddr != 127.0.0.1/32 tcp dport != 15008 ${MARK}  != 0x539 counter redirect to :15006`],
    ['istio-output', `oifname != lo ${MARK} != 0x539 udp dport 53 counter redirect to :15053`],
    ['istio-output', `ip daddr != 127.0.0.1/32 tcp dport 53 ${MARK} != 0x539 counter redirect to :15053`],
    ['istio-output', `meta l4proto tcp ${MARK} == 0x111 counter accept`],
    ['istio-output', 'oifname lo ip daddr != 127.0.0.1/32 counter accept'],
    ['istio-output', `meta l4proto tcp ip daddr != 127.0.0.1/32 ${MARK} != 0x539 counter redirect to :15001`],
  ]);
  table('istio-ambient-mangle', [
    ['prerouting', { type: 'filter', hook: 'prerouting', priority: -150 }],
    ['output', { type: 'route', hook: 'output', priority: -150 }],
  ], [
    ['prerouting', 'jump istio-prerouting'],
    ['output', 'jump istio-output'],
    ['istio-prerouting', 'meta mark & 0xfff == 0x539 counter ct mark set ct mark & 0xfffff000 |  0x111'],
    ['istio-output', 'ct mark and 0xfff == 0x111 counter meta mark set ct mark'],
  ]);
  table('istio-ambient-raw', [
    ['prerouting', { type: 'filter', hook: 'prerouting', priority: -300 }],
    ['output', { type: 'filter', hook: 'output', priority: -300 }],
  ], [
    ['prerouting', 'jump istio-prerouting'],
    ['output', 'jump istio-output'],
    ['istio-output', 'udp dport 53 meta mark and 0xfff == 0x539 counter ct zone set 1'],
    ['istio-prerouting', 'udp sport 53 meta mark and 0xfff != 0x539 counter ct zone set 1'],
  ]);
  return tx;
}

const T: TableRef = { family: 'inet', name: 'pw' };

describe('Transaction text', () => {
  it('reproduces Istio\'s default nft golden byte for byte', () => {
    const tx = istioDefault();
    expect(tx.toString()).toBe(GOLDEN);
    expect(tx.length).toBe(GOLDEN.trimEnd().split('\n').length);
  });

  it('renders every object kind in knftables\' shape', () => {
    const tx = new Transaction()
      .createTable(T, { comment: 'podwire', flags: ['dormant'] })
      .addChain(T, 'in', { type: 'filter', hook: 'input', priority: 'filter - 5', policy: 'drop', comment: 'base' })
      .addChain({ family: 'netdev', name: 'nd' }, 'ing', { type: 'filter', hook: 'ingress', device: 'eth0', priority: -500 })
      .addChain(T, 'plain', { comment: 'regular' })
      .addRule(T, 'in', 'tcp dport 22 accept', { comment: 'ssh' })
      .addRule(T, 'in', 'udp dport 53 accept', { handle: 4 })
      .insertRule(T, 'in', 'ct state established accept', { index: 0 })
      .replaceRule(T, 'in', 7, 'drop')
      .deleteRule(T, 'in', 8)
      .addSet(T, 'probes', { type: 'ipv4_addr', flags: ['interval', 'timeout'], timeout: 30, size: 1024, comment: 'pods',
        elements: ['10.0.0.0/8', { key: '192.168.1.1', comment: 'uid-1', timeout: '1h30m' }] })
      .addSet(T, 'svc', { type: 'ipv4_addr . inet_service' })
      .addElement(T, 'svc', [['10.0.0.1', '80'], { key: ['10.0.0.2', '443'], comment: 'b' }])
      .deleteElement(T, 'probes', '10.0.0.0/8')
      .flushSet(T, 'probes').deleteSet(T, 'svc').flushChain(T, 'in').deleteChain(T, 'plain')
      .deleteTable(T).deleteTable(T, { missingOk: true });
    expect(tx.commands).toEqual([
      'create table inet pw { flags dormant ; comment "podwire" ; }',
      'add chain inet pw in { type filter hook input priority filter - 5 ; policy drop ; comment "base" ; }',
      'add chain netdev nd ing { type filter hook ingress device "eth0" priority -500 ; }',
      'add chain inet pw plain { comment "regular" ; }',
      'add rule inet pw in tcp dport 22 accept comment "ssh"',
      'add rule inet pw in handle 4 udp dport 53 accept',
      'insert rule inet pw in index 0 ct state established accept',
      'replace rule inet pw in handle 7 drop',
      'delete rule inet pw in handle 8',
      'add set inet pw probes { type ipv4_addr ; flags interval,timeout ; timeout 30s ; size 1024 ; comment "pods" ; }',
      'add element inet pw probes { 10.0.0.0/8, 192.168.1.1 timeout 1h30m comment "uid-1" }',
      'add set inet pw svc { type ipv4_addr . inet_service ; }',
      'add element inet pw svc { 10.0.0.1 . 80, 10.0.0.2 . 443 comment "b" }',
      'delete element inet pw probes { 10.0.0.0/8 }',
      'flush set inet pw probes',
      'delete set inet pw svc',
      'flush chain inet pw in',
      'delete chain inet pw plain',
      'delete table inet pw',
      'add table inet pw',
      'delete table inet pw',
    ]);
    expect(tx.toString()).toBe(`${tx.commands.join('\n')}\n`);
    expect(new Transaction().toString()).toBe('');
  });

  it('rejects bad names and values with TypeError/RangeError and records nothing', () => {
    const tx = new Transaction().addTable(T);
    const typeErrors: Array<() => unknown> = [
      () => tx.addTable({ family: 'inet', name: '' }),
      () => tx.addTable({ family: 'inet', name: 'two words' }),
      () => tx.addTable({ family: 'inet', name: '9lives' }),
      () => tx.addTable({ family: 'inet', name: 'semi;colon' }),
      () => tx.addTable({ family: 'inet', name: 'x'.repeat(256) }),
      () => tx.addTable({ family: 'inet6' as 'inet', name: 'ok' }),
      () => tx.addTable(null as unknown as TableRef),
      () => tx.addTable(T, { flags: ['sleepy'] }),
      () => tx.addChain(T, 'a"b'),
      () => tx.addChain(T, 'c', { type: 'nat', hook: 'prerouting' }),
      () => tx.addChain(T, 'c', { type: 'nat', hook: 'sideways' as 'input', priority: 0 }),
      () => tx.addChain(T, 'c', { type: 'mangle' as 'filter', hook: 'input', priority: 0 }),
      () => tx.addChain(T, 'c', { type: 'filter', hook: 'input', priority: 'dstnat+5' }),
      () => tx.addChain(T, 'c', { type: 'filter', hook: 'input', priority: 1.5 }),
      () => tx.addChain(T, 'c', { policy: 'drop' }),
      () => tx.addChain(T, 'c', { type: 'filter', hook: 'input', priority: 0, policy: 'reject' as 'drop' }),
      () => tx.addChain(T, 'c', { type: 'filter', hook: 'ingress', priority: 0, device: 'eth0"' }),
      () => tx.addRule(T, 'c', ''),
      () => tx.addRule(T, 'c', 'accept; delete table inet pw'),
      () => tx.addRule(T, 'c', 'accept # sneaky'),
      () => tx.addRule(T, 'c', 'accept\ndelete table inet pw'),
      () => tx.addRule(T, 'c', 'meta comment "open'),
      () => tx.addRule(T, 'c', 'ip saddr { 10.0.0.1 accept'),
      () => tx.addRule(T, 'c', 'ip saddr } { accept'),
      () => tx.addRule(T, 'c', 'accept', { comment: 'say "hi"' }),
      () => tx.addRule(T, 'c', 'accept', { handle: 1, index: 1 }),
      () => tx.addRule(T, 'c', 'accept', { handle: 1.5 }),
      () => tx.addSet(T, 's', { type: 'IPv4' }),
      () => tx.addSet(T, 's', { type: 'ipv4_addr', flags: ['fast' as 'interval'] }),
      () => tx.addSet(T, 's', { type: 'ipv4_addr', timeout: '5 minutes' }),
      () => tx.addSet(T, 's', { type: 'ipv4_addr', elements: ['10.0.0.1, 10.0.0.2'] }),
      () => tx.addElement(T, 's', []),
      () => tx.addElement(T, 's', '10.0.0.1 }'),
      () => tx.addElement(T, 's', { key: '10.0.0.1', comment: 'a\nb' }),
    ];
    for (const f of typeErrors) expect(f, f.toString()).toThrow(TypeError);
    const rangeErrors: Array<() => unknown> = [
      () => tx.addRule(T, 'c', 'accept', { comment: 'x'.repeat(129) }),
      () => tx.addChain(T, 'c', { type: 'filter', hook: 'input', priority: 2 ** 31 }),
      () => tx.addRule(T, 'c', 'accept', { index: -1 }),
      () => tx.addSet(T, 's', { type: 'ipv4_addr', size: 0 }),
    ];
    for (const f of rangeErrors) expect(f, f.toString()).toThrow(RangeError);
    expect(tx.commands).toEqual(['add table inet pw']);
  });
});

describe.skipIf(!privileged('nft'))('Transaction applied by nft', () => {
  it('builds Istio\'s ruleset, which nft accepts and lists back', async () => {
    const ns = await freshNetns();
    await nft.apply(ns, istioDefault());
    const rs = await nft.list(ns);
    expect(rs.tables.map((t) => t.name)).toEqual(['istio-ambient-nat', 'istio-ambient-mangle', 'istio-ambient-raw']);
    expect(rs.tables.flatMap((t) => t.chains).reduce((n, c) => n + c.rules.length, 0)).toBe(18);
  });

  it('round-trips tables, base chains, rules with comments, sets with flags and elements', async () => {
    const ns = await freshNetns();
    const tx = new Transaction()
      .addTable(T, { comment: 'podwire test' })
      .flushTable(T)
      .addChain(T, 'in', { type: 'filter', hook: 'input', priority: 10, policy: 'drop' })
      .addChain(T, 'nat-out', { type: 'nat', hook: 'output', priority: -100 })
      .addChain(T, 'work')
      .addSet(T, 'probes', { type: 'ipv4_addr', flags: ['interval'], comment: 'UUID of the pods',
        elements: [{ key: '10.1.0.0/16', comment: 'pod-a' }, '10.2.0.7'] })
      .addSet(T, 'probes6', { type: 'ipv6_addr', flags: ['timeout'], timeout: 3600 })
      .addElement(T, 'probes6', { key: 'fd00::1', comment: 'pod-b', timeout: 600 })
      .addSet(T, 'svc', { type: 'ipv4_addr . inet_service' })
      .addElement(T, 'svc', [['10.0.0.1', '80']])
      .addRule(T, 'in', 'ip saddr @probes counter accept', { comment: 'from pods' })
      .addRule(T, 'in', 'jump work')
      .insertRule(T, 'in', 'iifname "lo" accept')
      .addRule(T, 'nat-out', 'ip daddr . tcp dport @svc counter redirect to :15001');
    await nft.apply(ns, tx);

    const [t, ...others] = (await nft.list(ns)).tables;
    expect(others).toEqual([]);
    expect(t).toMatchObject({ family: 'inet', name: 'pw' });
    // nft 1.0.6 leaves table comments out of its JSON; its text has them.
    expect(await nft.listText(ns, { table: T })).toMatch(/^\tcomment "podwire test"$/m);
    expect(t!.chains.map((c) => [c.name, c.type, c.hook, c.priority, c.policy])).toEqual([
      ['in', 'filter', 'input', 10, 'drop'],
      ['nat-out', 'nat', 'output', -100, 'accept'],
      ['work', undefined, undefined, undefined, undefined],
    ]);
    const input = t!.chains[0]!.rules;
    expect(input.map((r) => r.comment)).toEqual([undefined, 'from pods', undefined]);
    expect(input[0]!.expr[0]).toEqual({ match: { op: '==', left: { meta: { key: 'iifname' } }, right: 'lo' } });
    expect(input[2]!.expr).toEqual([{ jump: { target: 'work' } }]);

    const sets = Object.fromEntries(t!.sets.map((s) => [s.name, s]));
    expect(sets.probes).toMatchObject({ type: 'ipv4_addr', flags: ['interval'], comment: 'UUID of the pods' });
    expect(sets.probes!.elements).toEqual([{ key: '10.1.0.0/16', comment: 'pod-a' }, { key: '10.2.0.7' }]);
    expect(sets.probes6).toMatchObject({ type: 'ipv6_addr', flags: ['timeout'], timeout: 3600 });
    expect(sets.probes6!.elements).toHaveLength(1);
    expect(sets.probes6!.elements[0]).toMatchObject({ key: 'fd00::1', comment: 'pod-b', timeout: 600 });
    expect(sets.probes6!.elements[0]!.expires).toBeGreaterThan(500);
    expect(sets.svc).toMatchObject({ type: 'ipv4_addr . inet_service', elements: [{ key: '10.0.0.1 . 80' }] });

    // Deleting through the builder, and a missing-ok delete of what is already gone.
    await nft.apply(ns, new Transaction().deleteElement(T, 'probes', '10.2.0.7').deleteTable({ family: 'ip', name: 'gone' }, { missingOk: true }));
    expect((await nft.list(ns, { table: T })).tables[0]!.sets.find((s) => s.name === 'probes')!.elements).toEqual([{ key: '10.1.0.0/16', comment: 'pod-a' }]);
    await nft.apply(ns, new Transaction().deleteTable(T));
    expect((await nft.list(ns)).tables).toEqual([]);
  });
});
