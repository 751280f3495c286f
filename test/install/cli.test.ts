// `podwire install render|entry` through the CLI entry point (runCli): the goldens byte for
// byte, settings from flags, --entry, --owned, and usage errors (exit 2).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { FIXTURES, fixture, tempDir } from './helpers.js';

const path = (name: string) => fileURLToPath(new URL(name, FIXTURES));
// The settings of upstream's unit tests (bridge/list goldens) and of cni/test (expected/).
const UNIT = ['--cni-agent-run-dir=/path/to/kubeconfig', '--pod-namespace=my-namespace', '--exclude-namespaces=', '--ambient-enablement-selector=', '--log_output_level=cni-plugin:debug'];
const E2E = ['--cni-agent-run-dir=/tmp', '--exclude-namespaces=istio-system', '--ambient-enablement-selector=', '--log_output_level=cni-plugin:debug'];

describe('podwire install', () => {
  it('entry prints the plugin entry (istio-cni.conf, expected/YYY-istio-cni.conf)', async () => {
    expect(await runCli('install', 'entry', ...UNIT)).toEqual({ code: 0, out: fixture('istio-cni.conf'), err: '' });
    expect((await runCli('install', 'entry', ...E2E)).out).toBe(fixture('expected/YYY-istio-cni.conf'));
    expect((await runCli('install', 'entry', ...E2E, '--plugin-agent-wait=3s')).out).toContain('"enable_ambient_detection_retry": false,\n  "agent_wait_ms": 3000\n}\n');
  });

  it.each([
    ['bridge.conf', UNIT, 'bridge.conf.golden', 'would write bridge.conflist (bridge.conf renamed; its mode kept)\n'],
    ['list.conflist', UNIT, 'list.conflist.golden', 'would write list.conflist (its mode kept)\n'],
    ['pre/calico.conflist', E2E, 'expected/10-calico.conflist-istioconfig', 'would write calico.conflist (its mode kept)\n'],
    ['pre/minikube_cni.conf', E2E, 'expected/minikube_cni.conflist.expected', 'would write minikube_cni.conflist (minikube_cni.conf renamed; its mode kept)\n'],
  ])('render --existing %s', async (existing, flags, golden, err) => {
    expect(await runCli('install', 'render', '--existing', path(existing), ...flags)).toEqual({ code: 0, out: fixture(golden), err });
  });

  it('render --owned: the owned file\'s content, the primary named as untouched', async () => {
    const r = await runCli('install', 'render', `--existing=${path('list.conflist')}`, '--owned', ...UNIT, '--ambient-enabled');
    expect(r).toEqual({ code: 0, out: fixture('istio-owned.conflist.golden'), err: 'would write 02-istio-cni.conflist (mode 0600; list.conflist is not modified)\n' });
  });

  it('render --entry FILE merges that entry as given', async () => {
    const r = await runCli('install', 'render', '--existing', path('bridge.conf'), '--entry', path('istio-cni.conf'));
    expect(r.code).toBe(0);
    expect(r.out).toBe(fixture('bridge.conf.golden'));
  });

  it('a config that is not one exits 1 with its code', async () => {
    const r = await runCli('install', 'render', '--existing', path('invalid-arr.conflist'));
    expect(r.code).toBe(1);
    expect(r.err).toContain('[ERR_CNI_CONFIG_INVALID]');
  });

  it.each([
    [['install'], 'needs an action'],
    [['install', 'bogus'], '"bogus"'],
    [['install', 'render'], '--existing'],
    [['install', 'render', '--existing'], '--existing needs a file'],
    [['install', 'render', '--existing', 'x', '--owned=yes'], '--owned takes no value'],
    [['install', 'render', '--existing', 'x', '--entry', 'y', '--pod-namespace=a'], '--pod-namespace=a'],
    [['install', 'render', '--existing', 'x', '--chained-cni-plugin=false'], 'install entry'],
    [['install', 'entry', '--kubeconfig-mode=999'], '--kubeconfig-mode'],
    [['install', 'entry', '--no-such-flag'], '--no-such-flag'],
    [['install', 'entry', 'stray'], 'stray'],
  ])('podwire %j exits 2 naming the problem', async (argv, names) => {
    const r = await runCli(...argv);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain(names);
    expect(r.out).toBe('');
  });

  it('--help lists the installer settings', async () => {
    const r = await runCli('install', '--help');
    expect(r.code).toBe(0);
    expect(r.out).toContain('Usage: podwire install <render|entry>');
    expect(r.out).toContain('CNI_CONF_NAME / --cni-conf-name');
    expect(r.out).toContain('WRITE_PLUGIN_KUBECONFIG / --write-plugin-kubeconfig');
  });

  it('reads the existing config from a file of any name', async () => {
    const d = tempDir();
    writeFileSync(join(d, '10-calico.conflist'), fixture('pre/calico.conflist'));
    const r = await runCli('install', 'render', '--existing', join(d, '10-calico.conflist'), ...E2E);
    expect(r.out).toBe(fixture('expected/10-calico.conflist-istioconfig'));
  });
});
