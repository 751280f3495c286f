// Dataplane.repair (the drift check's unit of work) and reconcile's `keep`
// mode, with real namespaces and in-memory subsystems: each kind of drift is
// found and put right under the pod's lock, a foreign probe entry is
// reported and not taken, an unenrolled or leaving pod is not checked.
import { describe, expect, it } from 'vitest';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';
import { fakeDataplane } from './fakes.js';

const pod = (i: number, ips = [`10.1.0.${i}`]): PodInfo => ({ uid: `uid-${i}`, name: `p${i}`, namespace: 'default', ips });

describe.skipIf(!privileged())('Dataplane.repair', () => {
  it('finds nothing on a healthy pod and touches nothing', async () => {
    const t = fakeDataplane();
    const ns = await freshNetns();
    await t.dp.enroll(pod(1), { netnsPath: ns.path });
    t.rules.calls.length = 0;
    const r = await t.dp.repair('uid-1');
    expect(r).toEqual({ uid: 'uid-1', checked: true, drift: [], repaired: [], failed: [] });
    expect(t.rules.calls).toEqual(['verify uid-1']);
    await t.dp.close();
  });

  it('re-applies drifted rules, re-adds a missing probe entry, hands the pod to ztunnel again', async () => {
    const t = fakeDataplane();
    const ns = await freshNetns();
    await t.dp.enroll(pod(1), { netnsPath: ns.path });
    t.rules.drifted.add('uid-1');
    t.probes.entries.delete('10.1.0.1');
    t.ztunnel.known.delete('uid-1');
    const r = await t.dp.repair('uid-1');
    expect(r.drift).toEqual(['rules missing', 'probe set: 10.1.0.1 missing', 'ztunnel: pod not acknowledged by any connection']);
    expect(r.repaired).toEqual(['rules', 'probe-set', 'ztunnel']);
    expect(r.failed).toEqual([]);
    expect(t.rules.drifted.has('uid-1')).toBe(false);
    expect(t.probes.entries.get('10.1.0.1')).toBe('uid-1');
    expect(t.ztunnel.known.has('uid-1')).toBe(true);
    expect((await t.dp.repair('uid-1')).drift).toEqual([]);
    await t.dp.close();
  });

  it('reports a probe entry another pod owns without taking it, and a failed re-apply', async () => {
    const t = fakeDataplane();
    const ns = await freshNetns();
    await t.dp.enroll(pod(1), { netnsPath: ns.path });
    t.probes.entries.set('10.1.0.1', 'uid-other');
    t.rules.drifted.add('uid-1');
    t.rules.failApply = () => true;
    const r = await t.dp.repair('uid-1', { probeEntries: new Map(t.probes.entries) });
    expect(r.drift).toContain('probe set: 10.1.0.1 belongs to uid-other');
    expect(r.failed.map((f) => f.part).sort()).toEqual(['probe-set', 'rules']);
    expect(t.probes.entries.get('10.1.0.1')).toBe('uid-other');
    await t.dp.close();
  });

  it('does not hand a pod to ztunnel when no ztunnel is connected', async () => {
    const t = fakeDataplane();
    const ns = await freshNetns();
    await t.dp.enroll(pod(1), { netnsPath: ns.path });
    t.ztunnel.known.delete('uid-1');
    Object.assign(t.ztunnel, { connected: () => false });
    expect((await t.dp.repair('uid-1')).drift).toEqual([]);
    await t.dp.close();
  });

  it('does not check a pod that is not enrolled, or that has no netns', async () => {
    const t = fakeDataplane();
    expect(await t.dp.repair('uid-9')).toMatchObject({ checked: false, drift: [] });
    await t.dp.reconcile([{ pod: pod(2) }]);  // cached without a netns (not found at start)
    expect(await t.dp.repair('uid-2')).toMatchObject({ checked: false });
    await expect(t.dp.repair('')).rejects.toThrow();
    await t.dp.close();
  });

  it('reconcile with rules "keep" restores the netns and probe set without reading or writing rules', async () => {
    const t = fakeDataplane();
    const ns = await freshNetns();
    const report = await t.dp.reconcile([{ pod: pod(1), netnsPath: ns.path }], { rules: 'keep' });
    expect(report).toMatchObject({ pods: 1, repaired: [], failed: [], complete: true });
    expect(t.rules.calls).toEqual([]);
    expect(t.dp.cache.get('uid-1')?.netns?.ino).toBe(ns.id.ino);
    expect(t.probes.entries.get('10.1.0.1')).toBe('uid-1');
    await expect(t.dp.reconcile([], { rules: 'bogus' as never })).rejects.toThrow(TypeError);
    await t.dp.close();
  });
});
