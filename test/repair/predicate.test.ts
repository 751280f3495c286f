import { describe, expect, it } from 'vitest';
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { DEFAULT_BROKEN_POD_FILTER, isBrokenPod } from '../../lib/repair/predicate.js';
import { ConfigError } from '../../lib/agent/config.js';
import { parseRepairConfig, REPAIR_SETTINGS } from '../../lib/repair/config.js';
import { DeleteRateLimiter } from '../../lib/repair/controller.js';

const status = (s: Partial<V1ContainerStatus>): V1ContainerStatus => ({ name: 'istio-validation', image: 'i', imageID: '', ready: false, restartCount: 1, ...s });
const pod = (statuses: V1ContainerStatus[], annotations: Record<string, string> | null = { 'sidecar.istio.io/status': '{}' }): V1Pod => ({
  metadata: { name: 'p', namespace: 'n', ...(annotations ? { annotations } : {}) },
  status: { initContainerStatuses: statuses },
});
const crashed = (exitCode = 126, message?: string) => status({ state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode, ...(message ? { message } : {}) } } });

describe('broken-pod predicate (§4)', () => {
  it('matches a sidecar pod whose istio-validation last terminated with 126', () => {
    expect(isBrokenPod(pod([crashed()]))).toBe(true);
  });
  it('needs the sidecar annotation unless it is configured empty', () => {
    expect(isBrokenPod(pod([crashed()], null))).toBe(false);
    expect(isBrokenPod(pod([crashed()], { other: 'x' }))).toBe(false);
    expect(isBrokenPod(pod([crashed()], null), { ...DEFAULT_BROKEN_POD_FILTER, sidecarAnnotation: '' })).toBe(true);
  });
  it('skips a Completed or exit-0 init container', () => {
    expect(isBrokenPod(pod([status({ state: { terminated: { exitCode: 0, reason: 'Completed' } }, lastState: { terminated: { exitCode: 126 } } })]))).toBe(false);
    expect(isBrokenPod(pod([status({ state: { terminated: { exitCode: 0 } }, lastState: { terminated: { exitCode: 126 } } })]))).toBe(false);
    expect(isBrokenPod(pod([status({ state: { terminated: { exitCode: 1, reason: 'Completed' } }, lastState: { terminated: { exitCode: 126 } } })]))).toBe(false);
  });
  it('needs a last termination', () => {
    expect(isBrokenPod(pod([status({ state: { running: {} } })]))).toBe(false);
    expect(isBrokenPod(pod([]))).toBe(false);
    expect(isBrokenPod({ metadata: { annotations: { 'sidecar.istio.io/status': '' } } })).toBe(false);
  });
  it('exit code: must equal, 0 = any', () => {
    expect(isBrokenPod(pod([crashed(1)]))).toBe(false);
    expect(isBrokenPod(pod([crashed(1)]), { ...DEFAULT_BROKEN_POD_FILTER, initExitCode: 0 })).toBe(true);
  });
  it('message: trimmed equality when configured', () => {
    const f = { ...DEFAULT_BROKEN_POD_FILTER, initTerminationMessage: '  no redirect \n' };
    expect(isBrokenPod(pod([crashed(126, 'no redirect')]), f)).toBe(true);
    expect(isBrokenPod(pod([crashed(126, 'other')]), f)).toBe(false);
    expect(isBrokenPod(pod([crashed(126)]), f)).toBe(false);
    expect(isBrokenPod(pod([crashed(126, 'anything')]))).toBe(true);
  });
  it('init container name: only that one, empty = any', () => {
    const other = { ...crashed(), name: 'other' };
    expect(isBrokenPod(pod([other]))).toBe(false);
    expect(isBrokenPod(pod([other]), { ...DEFAULT_BROKEN_POD_FILTER, initContainerName: '' })).toBe(true);
    // Any matching status suffices.
    expect(isBrokenPod(pod([status({ state: { terminated: { exitCode: 0, reason: 'Completed' } } }), other]), { ...DEFAULT_BROKEN_POD_FILTER, initContainerName: '' })).toBe(true);
  });
});

describe('REPAIR_* settings', () => {
  it('defaults: Istio\'s (REPAIR_REPAIR_PODS as the chart), node from NODE_NAME', () => {
    expect(parseRepairConfig({ NODE_NAME: 'n1' })).toEqual({
      enabled: true, nodeName: 'n1', fieldSelectors: '', labelSelectors: '', sidecarAnnotation: 'sidecar.istio.io/status',
      initContainerName: 'istio-validation', initTerminationMessage: '', initExitCode: 126, repairPods: true, deletePods: false,
      labelPods: false, labelKey: 'cni.istio.io/uninitialized', labelValue: 'true', deleteRatePerMinute: 10, resyncMs: 60_000, ambientGraceMs: 10_000,
      nativeNftables: false,
    });
  });
  it('env and flags (flag wins); REPAIR_NODE_NAME over NODE_NAME; agent and installer flags skipped', () => {
    const c = parseRepairConfig(
      { NODE_NAME: 'n1', REPAIR_NODE_NAME: 'n2', REPAIR_DELETE_PODS: 'true', REPAIR_REPAIR_PODS: 'false', REPAIR_INIT_CONTAINER_EXIT_CODE: '1', REPAIR_SIDECAR_ANNOTATION: '' },
      ['--repair-delete-rate=2.5', '--repair-resync-interval=0', '--repair-ambient-grace=1m30s', '--ambient-ipv6=false', '--mounted-cni-net-dir', '/x', '--repair-broken-pod-label-key=a.b/c', '--native-nftables'],
    );
    expect(c).toMatchObject({ nodeName: 'n2', deletePods: true, repairPods: false, initExitCode: 1, sidecarAnnotation: '', deleteRatePerMinute: 2.5, labelKey: 'a.b/c', nativeNftables: true, resyncMs: 0, ambientGraceMs: 90_000 });
  });
  it('bad values are ConfigErrors naming the setting', () => {
    const bad: Array<[Record<string, string>, string]> = [
      [{ REPAIR_INIT_CONTAINER_EXIT_CODE: '300' }, 'REPAIR_INIT_CONTAINER_EXIT_CODE'],
      [{ REPAIR_DELETE_RATE: '0' }, 'REPAIR_DELETE_RATE'],
      [{ REPAIR_DELETE_PODS: 'yes' }, 'REPAIR_DELETE_PODS'],
      [{ REPAIR_BROKEN_POD_LABEL_KEY: 'a/b/c!' }, 'REPAIR_BROKEN_POD_LABEL_KEY'],
      [{ REPAIR_FIELD_SELECTORS: 'status.phase' }, 'REPAIR_FIELD_SELECTORS'],
      [{ REPAIR_FIELD_SELECTORS: 'spec.nodeName=x' }, 'REPAIR_FIELD_SELECTORS'],
      [{ REPAIR_RESYNC_INTERVAL: '500ms' }, 'REPAIR_RESYNC_INTERVAL'],
      [{ REPAIR_RESYNC_INTERVAL: '60' }, 'REPAIR_RESYNC_INTERVAL'],
      [{ REPAIR_AMBIENT_GRACE: '-1s' }, 'REPAIR_AMBIENT_GRACE'],
    ];
    for (const [env, setting] of bad) {
      let e: unknown;
      try { parseRepairConfig({ NODE_NAME: 'n1', ...env }); } catch (err) { e = err; }
      expect(e, setting).toBeInstanceOf(ConfigError);
      expect((e as ConfigError).setting).toBe(setting);
    }
    expect(() => parseRepairConfig({})).toThrow(ConfigError);
    expect(parseRepairConfig({ REPAIR_ENABLED: 'false' }).enabled).toBe(false);
    expect(() => parseRepairConfig({ NODE_NAME: 'n' }, ['--bogus'])).toThrow(/unknown flag/);
  });
  it('every env name is REPAIR_* except the shared agent settings', () => {
    expect(REPAIR_SETTINGS.map((s) => s.env).filter((e) => !e?.startsWith('REPAIR_'))).toEqual(['NODE_NAME', 'NATIVE_NFTABLES']);
  });
});

describe('DeleteRateLimiter', () => {
  it('allows one per interval, never a burst', () => {
    let t = 1_000_000;
    const l = new DeleteRateLimiter(6, { now: () => t, setTimeout: () => 0, clearTimeout: () => undefined });
    expect(l.take()).toBe(0);
    expect(l.take()).toBe(10_000);
    t += 4_000;
    expect(l.take()).toBe(6_000);
    t += 6_000;
    expect(l.take()).toBe(0);
    t += 60_000; // idle for long: still one at a time
    expect(l.take()).toBe(0);
    expect(l.take()).toBeGreaterThan(0);
    expect(() => new DeleteRateLimiter(0)).toThrow(RangeError);
  });
});
