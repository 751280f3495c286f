// lib/kube/dates.ts names the timestamp fields by hand so the agent need not load client-node's
// serializer; here the same paths are derived from client-node's own models (the pinned version),
// so a field the table misses, or one it invents, fails.
import { describe, expect, it } from 'vitest';
import * as models from '@kubernetes/client-node/dist/gen/models/all.js';
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { DATE_SHAPES, datePaths, reviveDates, type DateKind } from '../../lib/kube/dates.js';

type AttributeMap = Array<{ name: string; type: string }>;
const registry = models as unknown as Record<string, { getAttributeTypeMap?: () => AttributeMap }>;

/** Every `Date` attribute under a model, as `a.b.[].c` (maps are skipped: their keys are data, not fields). */
function modelDatePaths(type: string, prefix = '', depth = 0): string[] {
  const attrs = registry[type]?.getAttributeTypeMap?.();
  if (!attrs || depth > 12) return [];
  return attrs.flatMap(({ name, type: t }) => {
    let p = prefix ? `${prefix}.${name}` : name;
    let inner = t;
    if (inner.startsWith('Array<')) {
      inner = inner.slice(6, -1);
      p = `${p}.[]`;
    }
    if (inner.startsWith('{ [key: string]')) return [];
    return inner === 'Date' ? [p] : modelDatePaths(inner, p, depth + 1);
  });
}

const MODEL: Record<Exclude<DateKind, 'Object'>, string> = { Pod: 'V1Pod', Namespace: 'V1Namespace', Node: 'V1Node', DaemonSet: 'V1DaemonSet', Event: 'CoreV1Event' };

describe('timestamp fields (lib/kube/dates.ts)', () => {
  for (const [kind, model] of Object.entries(MODEL)) {
    it(`${kind}: the same Date fields as client-node's ${model}`, () => {
      const want = modelDatePaths(model).sort();
      expect(want.length).toBeGreaterThan(2);
      expect(datePaths(DATE_SHAPES[kind as DateKind]).sort()).toEqual(want);
    });
  }

  it('revives what client-node would, and leaves labels, annotations and other strings alone', () => {
    const raw = () => ({
      metadata: { name: 'p', creationTimestamp: '2026-12-01T00:00:00Z', labels: { creationTimestamp: '2026-12-01T00:00:00Z' }, annotations: { time: 'x' }, managedFields: [{ manager: 'm', time: '2026-12-01T00:00:01Z' }] },
      status: { startTime: '2026-12-01T00:00:02Z', phase: 'Running', conditions: [{ type: 'Ready', lastTransitionTime: '2026-12-01T00:00:03Z', lastProbeTime: null }],
        containerStatuses: [{ name: 'c', state: { running: { startedAt: '2026-12-01T00:00:04Z' } } }] },
    });
    const ours = reviveDates(raw(), 'Pod');
    const theirs = ObjectSerializer.deserialize(raw(), 'V1Pod', '') as typeof ours;
    expect(ours.metadata.creationTimestamp).toBeInstanceOf(Date);
    expect(ours.metadata.creationTimestamp).toEqual(theirs.metadata.creationTimestamp);
    expect(ours.metadata.managedFields[0]!.time).toEqual(theirs.metadata.managedFields[0]!.time);
    expect(ours.status.startTime).toEqual(theirs.status.startTime);
    expect(ours.status.conditions[0]!.lastTransitionTime).toEqual(theirs.status.conditions[0]!.lastTransitionTime);
    expect(ours.status.containerStatuses[0]!.state.running.startedAt).toEqual(theirs.status.containerStatuses[0]!.state.running.startedAt);
    expect(ours.status.conditions[0]!.lastProbeTime).toBeNull();
    expect(ours.metadata.labels.creationTimestamp).toBe('2026-12-01T00:00:00Z');
    expect(ours.metadata.annotations.time).toBe('x');
    expect(ours.status.phase).toBe('Running');
  });

  it('takes odd shapes without throwing (a field of the wrong type stays as it came)', () => {
    const o = { metadata: 'x', status: { conditions: 'y', containerStatuses: [null, 3, { state: [] }] } };
    expect(reviveDates(o, 'Pod')).toEqual({ metadata: 'x', status: { conditions: 'y', containerStatuses: [null, 3, { state: [] }] } });
    expect(reviveDates(null, 'Pod')).toBeNull();
  });
});
