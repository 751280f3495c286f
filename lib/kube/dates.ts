// Which fields of the objects podwire reads are timestamps, so JSON from the
// API server comes out typed as client-node's models type it (Date, not
// string) without loading client-node's generated serializer (about 21 MB of
// RSS and 350 ms of start-up on its own, for hundreds of models the agent never
// sees). test/kube/dates.test.ts derives the same paths from client-node's own
// attribute maps (the pinned 1.4.0), so a field missing here fails there.

/** A timestamp leaf. */
const D = true;
/** Where the Dates are in an object: a leaf, a nested shape, or [shape] for every item of an array. */
export type DateShape = true | { readonly [field: string]: DateShape | readonly [DateShape] };

const META: DateShape = { creationTimestamp: D, deletionTimestamp: D, managedFields: [{ time: D }] };
const STATE: DateShape = { running: { startedAt: D }, terminated: { startedAt: D, finishedAt: D } };
const CONTAINER_STATUS: DateShape = { state: STATE, lastState: STATE };
const POD_SPEC: DateShape = { volumes: [{ ephemeral: { volumeClaimTemplate: { metadata: META } } }] };

export const DATE_SHAPES = {
  Pod: {
    metadata: META,
    spec: POD_SPEC,
    status: {
      startTime: D,
      conditions: [{ lastProbeTime: D, lastTransitionTime: D }],
      containerStatuses: [CONTAINER_STATUS],
      initContainerStatuses: [CONTAINER_STATUS],
      ephemeralContainerStatuses: [CONTAINER_STATUS],
    },
  },
  Namespace: { metadata: META, status: { conditions: [{ lastTransitionTime: D }] } },
  Node: {
    metadata: META,
    spec: { taints: [{ timeAdded: D }] },
    status: { conditions: [{ lastHeartbeatTime: D, lastTransitionTime: D }] },
  },
  DaemonSet: {
    metadata: META,
    spec: { template: { metadata: META, spec: POD_SPEC } },
    status: { conditions: [{ lastTransitionTime: D }] },
  },
  Event: { metadata: META, firstTimestamp: D, lastTimestamp: D },
  /** Any other object: its metadata only. */
  Object: { metadata: META },
} as const satisfies Record<string, DateShape>;

export type DateKind = keyof typeof DATE_SHAPES;

/** Turns the timestamp strings of `obj` (parsed JSON of one `kind`) into Dates, in place; returns obj. */
export function reviveDates<T>(obj: T, kind: DateKind): T {
  revive(obj, DATE_SHAPES[kind]);
  return obj;
}

function revive(v: unknown, shape: DateShape | readonly [DateShape]): unknown {
  if (v === null || v === undefined) return v;
  if (shape === true) return typeof v === 'string' ? new Date(v) : v;
  if (Array.isArray(shape)) {
    if (Array.isArray(v)) for (let i = 0; i < v.length; i++) v[i] = revive(v[i], shape[0] as DateShape);
    return v;
  }
  if (typeof v !== 'object' || Array.isArray(v)) return v;
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(shape)) {
    if (o[k] !== undefined && o[k] !== null) o[k] = revive(o[k], (shape as Record<string, DateShape | readonly [DateShape]>)[k]!);
  }
  return v;
}

/** Every Date path of a shape, as `a.b.[].c` (the tests compare them with client-node's models). */
export function datePaths(shape: DateShape | readonly [DateShape], prefix = ''): string[] {
  if (shape === true) return [prefix];
  if (Array.isArray(shape)) return datePaths(shape[0] as DateShape, `${prefix}.[]`);
  return Object.entries(shape as Record<string, DateShape | readonly [DateShape]>).flatMap(([k, s]) => datePaths(s, prefix ? `${prefix}.${k}` : k));
}
