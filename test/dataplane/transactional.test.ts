// Per-pod state is transactional: after any failure a pod is either still
// fully enrolled and cached, or fully removed; concurrent operations on other
// pods (or on the same probe IP) never undo each other's work.
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Dataplane } from '../../lib/dataplane/dataplane.js';
import { IpsetProbeSet } from '../../lib/dataplane/probe-set-ipset.js';
import type { PodInfo, ProbeEntry } from '../../lib/dataplane/types.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { fakeDataplane, FakeProbes, FakeRules, FakeZtunnel } from './fakes.js';

const pod = (i: number, ips = [`10.1.${i >> 8}.${i & 255}`]): PodInfo => ({ uid: `uid-${i}`, name: `p${i}`, namespace: 'default', ips });
const fdCount = () => readdirSync('/proc/self/fd').length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const setup = fakeDataplane;

describe.skipIf(!privileged('ipset'))('transactional per-pod state', () => {
  it('a re-enroll with a bad netns path leaves the enrolled pod enrolled, cached and removable', async () => {
    const ns = await freshNetns();
    const { dp, rules, ztunnel, probes } = setup();
    await dp.enroll(pod(1), { netnsPath: ns.path });
    const err = await dp.enroll(pod(1), { netnsPath: '/run/netns/pwt-does-not-exist' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ stage: 'netns', code: 'ENOENT' });
    expect(dp.cache.get('uid-1')?.netns?.ino).toBe(ns.id.ino);
    expect(rules.applied.get('uid-1')).toBe(ns.id.ino);
    expect(ztunnel.knows('uid-1')).toBe(true);
    expect(probes.entries.get('10.1.0.1')).toBe('uid-1');
    expect((await dp.unenroll(pod(1), { podDeleted: false })).rulesRemoved).toBe(true);
    expect(rules.applied.has('uid-1')).toBe(false);
    await dp.close();
  });

  it('a rules failure on re-enroll never removes the rules of the working pod', async () => {
    const ns = await freshNetns();
    const { dp, rules, ztunnel, probes } = setup();
    await dp.enroll(pod(2), { netnsPath: ns.path });
    rules.failApply = () => true;
    rules.calls = [];
    const err = await dp.enroll(pod(2), { netnsPath: ns.path }).catch((e: unknown) => e);
    expect(err).toMatchObject({ stage: 'rules' });
    expect(rules.calls).not.toContain('remove uid-2');
    expect(rules.applied.get('uid-2')).toBe(ns.id.ino);
    expect(dp.cache.get('uid-2')?.netns?.ino).toBe(ns.id.ino);
    expect(ztunnel.knows('uid-2')).toBe(true);
    expect(probes.entries.get('10.1.0.2')).toBe('uid-2');
    rules.failApply = undefined;
    await dp.unenroll(pod(2), { podDeleted: false });
    expect(rules.applied.has('uid-2')).toBe(false);
    await dp.close();
  });

  it('a re-created sandbox whose rules fail leaves the pod as it was and releases the new netns', async () => {
    const old = await freshNetns();
    const fresh = await freshNetns();
    const { dp, rules } = setup();
    await dp.enroll(pod(3), { netnsPath: old.path });
    const before = fdCount();
    rules.failApply = () => true;
    const err = await dp.enroll(pod(3), { netnsPath: fresh.path }).catch((e: unknown) => e);
    expect(err).toMatchObject({ stage: 'rules', retryable: false });
    expect(dp.cache.get('uid-3')?.netns?.ino).toBe(old.id.ino);
    expect(fdCount()).toBe(before);
    await dp.close();
  });

  it('an unenroll that fails half-way keeps the pod cached, and a retry finishes it', async () => {
    const ns = await freshNetns();
    const { dp, rules, ztunnel } = setup();
    const before = fdCount();
    await dp.enroll(pod(4), { netnsPath: ns.path });
    rules.failRemove = () => true;
    await expect(dp.unenroll(pod(4), { podDeleted: false })).rejects.toMatchObject({ code: 'EAGAIN' });
    expect(dp.cache.get('uid-4')?.netns?.ino).toBe(ns.id.ino);
    expect(dp.cache.get('uid-4')?.leaving).toBe(true);
    rules.failRemove = undefined;
    ztunnel.failDelete = true;
    await expect(dp.unenroll(pod(4), { podDeleted: false })).rejects.toMatchObject({ code: 'EPIPE' });
    // Still held, half-removed: marked leaving (not offered to a new ztunnel), its netns kept for the retry.
    expect(dp.cache.get('uid-4')).toMatchObject({ leaving: true, pod: { uid: 'uid-4' } });
    expect(dp.cache.get('uid-4')?.netns?.ino).toBe(ns.id.ino);
    expect(dp.snapshot().some((e) => e.pod.uid === 'uid-4')).toBe(false);
    ztunnel.failDelete = false;
    expect((await dp.unenroll(pod(4), { podDeleted: false })).rulesRemoved).toBe(true);
    expect(ztunnel.deleted).toEqual(['uid-4']);
    expect(rules.applied.has('uid-4')).toBe(false);
    expect(dp.cache.get('uid-4')).toBeUndefined();
    expect(fdCount()).toBe(before);
  });

  it('reconcile never prunes the probe entries of pods enrolled while it runs', async () => {
    const ns = await freshNetns();
    const { dp, probes } = setup();
    probes.entries.set('10.9.9.9', 'uid-stale');
    const fresh = Array.from({ length: 300 }, (_, i) => pod(1000 + i));
    const [report] = await Promise.all([
      dp.reconcile([{ pod: pod(5), netnsPath: ns.path }]),
      ...fresh.map((p) => dp.enroll(p, { netnsPath: ns.path })),
    ]);
    expect(report.complete).toBe(true);
    const missing = fresh.filter((p) => probes.entries.get(p.ips[0]!) !== p.uid);
    expect(missing.length).toBe(0);
    expect(probes.entries.has('10.9.9.9')).toBe(false);  // the stale one still goes
    await dp.close();
  });

  it("one pod's unenroll never deletes another pod's fresh entry for a reused IP", async () => {
    const host = await freshNetns();
    const ns = await freshNetns();
    // A big set makes the listing slow; here a pause after it stands in for that.
    class SlowListing extends IpsetProbeSet {
      override async list(): Promise<ProbeEntry[]> {
        const out = await super.list();
        await sleep(30);
        return out;
      }
    }
    const probes = new SlowListing(await host.netlink(), true);
    const rules = new FakeRules();
    const dp = new Dataplane({ rules, ztunnel: new FakeZtunnel(), probes });
    await dp.start();
    await dp.enroll(pod(6, ['10.2.0.6']), { netnsPath: ns.path });
    const a = dp.unenroll(pod(6, ['10.2.0.6']), { podDeleted: true });
    await sleep(5);
    await dp.enroll(pod(7, ['10.2.0.6']), { netnsPath: ns.path });  // the IP is reused at once
    await a;
    const l = await (await host.netlink()).ipset.list('istio-inpod-probes-v4');
    expect(l.entries.map((e) => [e.address, e.comment])).toEqual([['10.2.0.6', 'uid-7']]);
    await dp.close();
  });

  it('verify during an unenroll waits for it and reports the pod gone, never half-removed', async () => {
    const ns = await freshNetns();
    const { dp, rules } = setup();
    await dp.enroll(pod(8), { netnsPath: ns.path });
    rules.delayMs = 10;
    const un = dp.unenroll(pod(8), { podDeleted: false });
    const v = await dp.verify(pod(8), { netnsPath: ns.path });
    await un;
    // Queued behind the unenroll on the pod's lock: it sees the pod fully gone, not half-removed.
    expect(v).toEqual({ uid: 'uid-8', ok: false, drift: ['pod is not enrolled'] });
    await dp.close();
  });

  it('rejects a pod that can never succeed before writing anything, and keeps nothing', async () => {
    const ns = await freshNetns();
    const { dp, rules, ztunnel, probes } = setup();
    const bad: Array<Partial<PodInfo> & Record<string, unknown>> = [
      { ...pod(9), uid: '' },
      { ...pod(9), name: 42 as unknown as string },
      { ...pod(9), uid: 'u'.repeat(2000) },
      { ...pod(9), ips: ['10.1.0.999'] },
      { ...pod(9), ips: ['not-an-ip'] },
      { ...pod(9), namespace: '' },
      { ...pod(9), ips: '10.1.0.9' as unknown as string[] },
      { ...pod(9), annotations: { a: 7 as unknown as string } },
    ];
    for (const b of bad) {
      const err = await dp.enroll(b as PodInfo, { netnsPath: ns.path }).catch((e: unknown) => e);
      expect(err, JSON.stringify(b).slice(0, 80)).toMatchObject({ stage: 'input', retryable: false, code: 'ERR_INVALID_POD' });
    }
    expect(rules.calls).toEqual([]);
    expect(ztunnel.known.size).toBe(0);
    expect(probes.entries.size).toBe(0);
    expect(dp.cache.size).toBe(0);
    expect(dp.snapshot()).toEqual([]);
    // A reconcile item that is invalid is reported, not cached.
    const r = await dp.reconcile([{ pod: { ...pod(10), uid: '' }, netnsPath: ns.path }, { pod: pod(11), netnsPath: ns.path }]);
    expect(r.failed.map((f) => f.uid)).toEqual(['']);
    expect(r.complete).toBe(false);
    expect(dp.snapshot().map((e) => e.pod.uid)).toEqual(['uid-11']);
    await dp.close();
  });

  it('reconcile works on a bounded number of pods at once', async () => {
    const ns = await freshNetns();
    const rules = new FakeRules();
    let inFlight = 0;
    let peak = 0;
    const verify = rules.verify.bind(rules);
    rules.verify = async (n, p) => {
      peak = Math.max(peak, ++inFlight);
      try {
        await sleep(2);
        return await verify(n, p);
      } finally {
        inFlight--;
      }
    };
    const dp = new Dataplane({ rules, ztunnel: new FakeZtunnel(), probes: new FakeProbes(), concurrency: 4 });
    const before = fdCount();
    const report = await dp.reconcile(Array.from({ length: 40 }, (_, i) => ({ pod: pod(2000 + i), netnsPath: ns.path })));
    expect(report.failed).toEqual([]);
    expect(report.repaired.length).toBe(40);
    expect(peak).toBe(4);
    await dp.close();
    expect(fdCount()).toBeLessThanOrEqual(before);  // every netns handle released
    expect(() => new Dataplane({ rules, ztunnel: new FakeZtunnel(), probes: new FakeProbes(), concurrency: 0 })).toThrow(RangeError);
  });
});
