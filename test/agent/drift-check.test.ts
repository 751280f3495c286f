// The drift check's scheduling and reporting over a real Dataplane with
// in-memory subsystems: a round checks every enrolled pod once, reports each
// drifted pod after its repair, keeps going past a pod whose check throws,
// rounds never overlap, and stop() waits for the round in flight.
import { describe, expect, it } from 'vitest';
import { DriftCheck } from '../../lib/agent/drift-check.js';
import type { PodInfo } from '../../lib/dataplane/types.js';
import { fakeDataplane } from '../dataplane/fakes.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const pod = (i: number): PodInfo => ({ uid: `uid-${i}`, name: `p${i}`, namespace: 'default', ips: [`10.2.0.${i}`] });

describe.skipIf(!privileged())('DriftCheck', () => {
  it('checks every enrolled pod, repairs and reports the drifted ones, survives a failing check', async () => {
    const t = fakeDataplane();
    for (let i = 1; i <= 5; i++) await t.dp.enroll(pod(i), { netnsPath: (await freshNetns()).path });
    t.rules.drifted.add('uid-2');
    t.probes.entries.delete('10.2.0.4');
    const reported: string[] = [];
    const errors: unknown[] = [];
    const verify = t.rules.verify.bind(t.rules);
    t.rules.verify = async (ns, p) => {
      if (p.uid === 'uid-5') throw new Error('netlink down');
      return verify(ns, p);
    };
    const dc = new DriftCheck({ dataplane: t.dp, intervalMs: 60_000, concurrency: 2, onDrift: (d) => { reported.push(`${d.uid}:${d.repaired.join('+')}`); }, onError: (e) => errors.push(e) });
    const r = await dc.runOnce();
    expect(r?.checked).toBe(5);
    expect(reported.sort()).toEqual(['uid-2:rules', 'uid-4:probe-set', 'uid-5:']);
    expect(r?.drifted.find((d) => d.uid === 'uid-5')?.failed[0]?.error).toBe('netlink down');
    expect(t.rules.drifted.size).toBe(0);
    expect(t.probes.entries.get('10.2.0.4')).toBe('uid-4');
    expect(errors).toEqual([]);
    await dc.stop();
    await t.dp.close();
  });

  it('runs on its interval without overlapping rounds, and stop() waits for the one in flight', async () => {
    const t = fakeDataplane();
    await t.dp.enroll(pod(1), { netnsPath: (await freshNetns()).path });
    t.rules.delayMs = 30;  // each round takes longer than the interval
    let rounds = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    const dp = {
      snapshot: () => t.dp.snapshot(),
      probeEntries: () => t.dp.probeEntries(),
      repair: async (uid: string, o?: { probeEntries?: ReadonlyMap<string, string> }) => {
        maxInFlight = Math.max(maxInFlight, ++inFlight);
        try { return await t.dp.repair(uid, o); } finally { inFlight--; }
      },
    };
    const dc = new DriftCheck({ dataplane: dp, intervalMs: 5, onRound: () => { rounds++; } });
    dc.start();
    await new Promise((r) => setTimeout(r, 200));
    await dc.stop();
    const after = rounds;
    expect(after).toBeGreaterThanOrEqual(2);
    expect(maxInFlight).toBe(1);
    await new Promise((r) => setTimeout(r, 50));
    expect(rounds).toBe(after);  // nothing ran after stop()
    expect(() => new DriftCheck({ dataplane: dp, intervalMs: 0 })).toThrow(RangeError);
    await t.dp.close();
  });
});
