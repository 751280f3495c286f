// The pipeline's logic (error classes, caching, ref-counted netns, per-pod
// serialisation, reconciliation) with real namespaces and in-memory
// subsystems. The real rules/ZDS/ipset path is covered in enroll.test.ts.
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Dataplane } from '../../lib/dataplane/dataplane.js';
import { EnrollError } from '../../lib/dataplane/errors.js';
import { KeyedLock } from '../../lib/util/keyed-lock.js';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { Netns } from '../../lib/net/netns/netns.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { fakeDataplane, FakeProbes, FakeRules, FakeZtunnel } from './fakes.js';

const pod = (i: number, ips = [`10.1.0.${i}`]): PodInfo => ({ uid: `uid-${i}`, name: `p${i}`, namespace: 'default', ips });
const fdCount = () => readdirSync('/proc/self/fd').length;

const setup = fakeDataplane;

describe('KeyedLock', () => {
  /** Steps that log their start (`name+`) and end (`name-`) and take `ms`. */
  const stepLog = () => {
    const log: string[] = [];
    const step = (name: string, ms: number) => async () => {
      log.push(`${name}+`);
      await new Promise((r) => setTimeout(r, ms));
      log.push(`${name}-`);
    };
    return { log, step };
  };

  it('serialises one key and overlaps different keys', async () => {
    const lock = new KeyedLock();
    const { log, step } = stepLog();
    await Promise.all([lock.run('a', step('a1', 20)), lock.run('a', step('a2', 1)), lock.run('b', step('b1', 1))]);
    expect(log.indexOf('a1-')).toBeLessThan(log.indexOf('a2+'));
    expect(log.indexOf('b1+')).toBeLessThan(log.indexOf('a1-'));
    await expect(lock.run('a', async () => { throw new Error('x'); })).rejects.toThrow('x');
    expect(await lock.run('a', async () => 7)).toBe(7);  // a failure does not wedge the key
    await new Promise((r) => setTimeout(r, 0));
    expect(lock.size).toBe(0);
  });

  it('runAll holds every key at once, in call order on each shared key, without deadlock', async () => {
    const lock = new KeyedLock();
    const { log, step } = stepLog();
    // Opposite key orders would deadlock a lock that took keys one by one in the given order.
    await Promise.all([
      lock.runAll(['x', 'y'], step('xy', 15)),
      lock.runAll(['y', 'x'], step('yx', 1)),
      lock.run('x', step('x', 1)),
      lock.runAll(['z'], step('z', 1)),
    ]);
    expect(log.slice(0, 4)).toEqual(['xy+', 'z+', 'z-', 'xy-']);  // z shares no key: it overlaps
    expect(log.slice(4)).toEqual(['yx+', 'yx-', 'x+', 'x-']);
    await new Promise((r) => setTimeout(r, 0));
    expect(lock.size).toBe(0);
  });
});

describe.skipIf(!privileged())('Dataplane pipeline', () => {
  it('enrolls: rules, then ztunnel, then probe set, keeping one netns handle', async () => {
    const ns = await freshNetns();
    const { dp, rules, ztunnel, probes } = setup();
    const r = await dp.enroll(pod(1), { netnsPath: ns.path });
    expect(r.netnsIno).toBe(ns.id.ino);
    expect(rules.applied.get('uid-1')).toBe(ns.id.ino);
    expect(ztunnel.knows('uid-1')).toBe(true);
    expect(probes.entries.get('10.1.0.1')).toBe('uid-1');
    // Same sandbox again (same inode): the cached handle is kept.
    const before = fdCount();
    await dp.enroll(pod(1), { netnsPath: ns.path });
    expect(fdCount()).toBe(before);
    expect((await dp.verify(pod(1), { netnsPath: ns.path })).ok).toBe(true);
    await dp.close();
  });

  it('a netns failure is non-retryable and leaves no trace', async () => {
    const { dp, rules } = setup();
    const err = await dp.enroll(pod(2), { netnsPath: '/run/netns/pwt-missing-netns' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EnrollError);
    expect(err).toMatchObject({ stage: 'netns', retryable: false, code: 'ENOENT' });
    expect(dp.cache.get('uid-2')).toBeUndefined();
    expect(rules.calls).toEqual([]);
    const noPath = await dp.enroll(pod(3)).catch((e: unknown) => e);
    expect(noPath).toMatchObject({ stage: 'netns', retryable: false });
  });

  it('a rule failure is non-retryable, undoes partial rules and forgets the pod', async () => {
    const ns = await freshNetns();
    const { dp, rules, ztunnel, probes } = setup();
    rules.failApply = () => true;
    const before = fdCount();
    const err = await dp.enroll(pod(4), { netnsPath: ns.path }).catch((e: unknown) => e);
    expect(err).toMatchObject({ stage: 'rules', retryable: false, code: 'EINVAL' });
    expect(rules.applied.has('uid-4')).toBe(false);  // remove() ran
    expect(dp.cache.get('uid-4')).toBeUndefined();
    expect(ztunnel.knows('uid-4')).toBe(false);
    expect(probes.entries.size).toBe(0);
    expect(fdCount()).toBe(before);  // the netns fd was released
  });

  it('a ztunnel failure is retryable and keeps the pod cached with its netns', async () => {
    const ns = await freshNetns();
    const { dp, ztunnel, probes } = setup();
    ztunnel.fail = true;
    const err = await dp.enroll(pod(5), { netnsPath: ns.path }).catch((e: unknown) => e);
    expect(err).toMatchObject({ stage: 'ztunnel', retryable: true });
    expect(dp.cache.get('uid-5')?.netns?.ino).toBe(ns.id.ino);
    expect(probes.entries.size).toBe(0);
    expect(dp.snapshot().map((e) => e.pod.uid)).toEqual(['uid-5']);  // the next snapshot delivers it
    ztunnel.fail = false;
    await dp.enroll(pod(5));  // retry without a path uses the cached netns
    expect(ztunnel.knows('uid-5')).toBe(true);
    await dp.close();
  });

  it('unenrolls: probe entries only when owned, rules only if the pod still runs, del to ztunnel, fd released once', async () => {
    const ns = await freshNetns();
    const { dp, rules, ztunnel, probes, warnings } = setup();
    const before = fdCount();
    await dp.enroll(pod(6, ['10.1.0.6', '10.1.0.66']), { netnsPath: ns.path });
    // IP reused by another pod meanwhile.
    await dp.enroll({ uid: 'uid-other', name: 'other', namespace: 'default', ips: ['10.1.0.66'] }, { netnsPath: ns.path });
    const r = await dp.unenroll(pod(6, ['10.1.0.6', '10.1.0.66']), { podDeleted: false });
    expect(r.rulesRemoved).toBe(true);
    expect(probes.entries.get('10.1.0.66')).toBe('uid-other');
    expect(probes.entries.has('10.1.0.6')).toBe(false);
    expect(warnings.some((w) => w.includes('10.1.0.66'))).toBe(true);
    expect(ztunnel.deleted).toEqual(['uid-6']);
    expect(dp.cache.get('uid-6')).toBeUndefined();
    expect(fdCount()).toBe(before + 1);  // uid-other's netns
    await dp.unenroll({ uid: 'uid-other', name: 'other', namespace: 'default', ips: ['10.1.0.66'] }, { podDeleted: true });
    expect(fdCount()).toBe(before);
    // A deleted pod: no rule removal.
    await dp.enroll(pod(7), { netnsPath: ns.path });
    rules.calls = [];
    expect((await dp.unenroll(pod(7), { podDeleted: true })).rulesRemoved).toBe(false);
    expect(rules.calls).toEqual([]);
    expect(fdCount()).toBe(before);
  });

  it('serialises operations per pod and runs different pods concurrently', { timeout: 15_000 }, async () => {
    const a = await freshNetns();
    const b = await freshNetns();
    // Rule calls that log their start and end and, for a gated pod, wait until the test opens its gate.
    const log: string[] = [];
    const gates = new Map<string, { open: () => void; opened: Promise<void> }>();
    const started = new Map<string, { resolve: () => void; p: Promise<void> }>();
    for (const uid of ['uid-8', 'uid-9']) {
      let open!: () => void;
      gates.set(uid, { opened: new Promise<void>((r) => (open = r)), open });
      let resolve!: () => void;
      started.set(uid, { p: new Promise<void>((r) => (resolve = r)), resolve });
    }
    class GatedRules extends FakeRules {
      override async apply(ns: Netns, p: PodInfo): Promise<void> {
        log.push(`apply+ ${p.uid}`);
        started.get(p.uid)?.resolve();
        await gates.get(p.uid)?.opened;
        await super.apply(ns, p);
        log.push(`apply- ${p.uid}`);
      }
      override async remove(ns: Netns, p: PodInfo): Promise<void> {
        log.push(`remove+ ${p.uid}`);
        await super.remove(ns, p);
        log.push(`remove- ${p.uid}`);
      }
    }
    const rules = new GatedRules();
    const dp = new Dataplane({ rules, ztunnel: new FakeZtunnel(), probes: new FakeProbes() });
    const ops8 = [
      dp.enroll(pod(8), { netnsPath: a.path }),
      dp.unenroll(pod(8), { podDeleted: false }),
      dp.enroll(pod(8), { netnsPath: a.path }),
    ];
    const enroll9 = dp.enroll(pod(9), { netnsPath: b.path });
    // Both pods are inside their rule step at once (serialising them would never start pod 9's: timeout).
    await started.get('uid-8')!.p;
    await started.get('uid-9')!.p;
    // Pod 9 finishes its whole enrollment while pod 8's first step still holds pod 8's lock.
    gates.get('uid-9')!.open();
    await enroll9;
    expect(log).toEqual(['apply+ uid-8', 'apply+ uid-9', 'apply- uid-9']);
    expect(dp.cache.get('uid-9')?.netns?.ino).toBe(b.id.ino);
    gates.get('uid-8')!.open();
    await Promise.all(ops8);
    // Pod 8's operations ran one after the other, in the order they were called, never overlapping.
    expect(log.filter((l) => l.endsWith('uid-8'))).toEqual([
      'apply+ uid-8', 'apply- uid-8', 'remove+ uid-8', 'remove- uid-8', 'apply+ uid-8', 'apply- uid-8',
    ]);
    expect(dp.cache.get('uid-8')).toMatchObject({ pod: { uid: 'uid-8' } });
    expect(dp.cache.get('uid-8')?.netns?.ino).toBe(a.id.ino);
    expect(dp.cache.get('uid-8')?.leaving).toBeFalsy();
    await dp.close();
  });

  it('does not leak fds over 1,000 enroll/unenroll cycles', async () => {
    const ns = await freshNetns();
    const { dp } = setup();
    const before = fdCount();
    for (let i = 0; i < 1000; i++) {
      await dp.enroll(pod(i % 50), { netnsPath: ns.path });
      await dp.unenroll(pod(i % 50), { podDeleted: i % 2 === 0 });
    }
    expect(fdCount()).toBe(before);
    expect(dp.cache.size).toBe(0);
  });

  it('reconciles after a restart: re-verifies, repairs drift only, refills and prunes the probe set', async () => {
    const ns1 = await freshNetns();
    const ns2 = await freshNetns();
    const { dp, rules, probes } = setup();
    await dp.enroll(pod(1), { netnsPath: ns1.path });
    await dp.enroll(pod(2), { netnsPath: ns2.path });
    await dp.close();
    // The agent restarts: new dataplane, same kernel state; one pod drifted meanwhile, a stale probe entry remains.
    probes.entries.set('10.1.0.99', 'uid-gone');
    rules.drifted.add('uid-2');
    rules.calls = [];
    const dp2 = new Dataplane({ rules, ztunnel: new FakeZtunnel(), probes });
    const report = await dp2.reconcile([{ pod: pod(1), netnsPath: ns1.path }, { pod: pod(2), netnsPath: ns2.path }]);
    expect(report).toMatchObject({ pods: 2, repaired: ['uid-2'], failed: [], complete: true, pruned: ['10.1.0.99'], probeEntries: 2 });
    expect(rules.calls.filter((c) => c.startsWith('apply'))).toEqual(['apply uid-2']);  // pod 1 untouched
    expect(dp2.snapshot().map((e) => e.netns?.ino).sort()).toEqual([ns1.id.ino, ns2.id.ino].sort());
    await dp2.close();
  });

  it('refills the probe set in one write; if that fails, pod by pod, reporting the pods that still fail', async () => {
    const nss = [await freshNetns(), await freshNetns(), await freshNetns()];
    const items = nss.map((ns, i) => ({ pod: pod(i + 1), netnsPath: ns.path }));
    const { dp, probes } = setup();
    const report = await dp.reconcile(items);
    expect(report).toMatchObject({ failed: [], complete: true, probeEntries: 3 });
    expect(probes.upserts).toEqual([3]);  // the three pods' IPs in one write
    await dp.close();
    // The set is empty again (a reboot); the big write fails, and so does pod 2's own.
    probes.entries.clear();
    probes.upserts = [];
    probes.failUpsert = (entries) => entries.length > 1 || entries[0]!.uid === 'uid-2';
    const dp2 = new Dataplane({ rules: new FakeRules(), ztunnel: new FakeZtunnel(), probes });
    const r2 = await dp2.reconcile(items);
    expect(probes.upserts.slice(0, 1)).toEqual([3]);
    expect(probes.upserts.slice(1).sort()).toEqual([1, 1, 1]);
    expect(r2.failed.map((f) => f.uid)).toEqual(['uid-2']);
    expect(r2.complete).toBe(false);
    expect([...probes.entries.values()].sort()).toEqual(['uid-1', 'uid-3']);
    await dp2.close();
  });

  it('never prunes when the snapshot is incomplete', async () => {
    const ns = await freshNetns();
    const { dp, probes } = setup();
    probes.entries.set('10.1.0.77', 'uid-77');
    const report = await dp.reconcile([{ pod: pod(1), netnsPath: ns.path }, { pod: pod(9, []), netnsPath: ns.path }]);
    expect(report.complete).toBe(false);
    expect(report.pruned).toEqual([]);
    expect(probes.entries.has('10.1.0.77')).toBe(true);
    const gone = await dp.reconcile([{ pod: pod(3), netnsPath: '/run/netns/pwt-nope' }]);
    expect(gone.failed.map((f) => f.uid)).toEqual(['uid-3']);
    expect(gone.complete).toBe(false);
    await dp.close();
  });

  it('keeps a netns alive that disappears mid-enrollment, and reports it in verify', async () => {
    const ns = await freshNetns();
    const { dp, rules } = setup();
    const path = ns.path;
    rules.failApply = () => {
      void Netns.remove(ns.name);  // the sandbox's netns file vanishes while we work (unlinked before remove() returns)
      return false;
    };
    await dp.enroll(pod(10), { netnsPath: path });
    const v = await dp.verify(pod(10), { netnsPath: path });
    expect(v.ok).toBe(false);
    expect(v.drift.join('\n')).toContain('is gone');
    await dp.unenroll(pod(10), { podDeleted: true });
  });
});
