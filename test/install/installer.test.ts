// The whole installer in temp dirs: upstream's install cases (cni/test: pre/ → expected/ →
// cleanup), standalone and Istio-owned modes, modes kept or set, the watch/reinstall loop (a
// writer dropping our entry, a revert fight, the binary deleted), readiness and metrics
// callbacks, failures by stage, the optional kubeconfig, and no temporary left behind.
import { chmodSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { InstallResult } from '../../lib/agent/metrics.js';
import { Installer, type InstallerOptions, type RevertLoopInfo } from '../../lib/install/installer.js';
import type { InstallConfig } from '../../lib/install/config.js';
import { fakeNode, fixture, installConfig, recorder, UNIT_ENTRY, until, type Node } from './helpers.js';

const running: Installer[] = [];
/** For tests of several rounds that are not about the throttle: its 1 s sleeps made 20 ms. */
const FAST: InstallerOptions = { throttle: { maxSleepMs: 20 } };
afterEach(async () => {
  for (const i of running.splice(0)) await i.stop();
});

interface Harness {
  installer: Installer;
  ready: boolean[];
  results: InstallResult[];
  reverts: RevertLoopInfo[];
  log: ReturnType<typeof recorder>;
}

function harness(cfg: InstallConfig, opts: InstallerOptions = {}): Harness {
  const h: Harness = { ready: [], results: [], reverts: [], log: recorder() } as unknown as Harness;
  h.installer = new Installer(cfg, {
    log: h.log.log,
    onReady: (r) => h.ready.push(r),
    onInstall: (r) => h.results.push(r),
    onRevertLoop: (i) => h.reverts.push(i),
    ...opts,
  });
  running.push(h.installer);
  return h;
}

const read = (p: string) => readFileSync(p, 'utf8');
const mode = (p: string) => statSync(p).mode & 0o7777;

/** Writes like other CNI agents do: a temporary renamed over the file. */
function atomicWrite(path: string, text: string): void {
  writeFileSync(`${path}.other-agent`, text);
  renameSync(`${path}.other-agent`, path);
}

function noTemporaries(...dirs: string[]): void {
  for (const d of dirs) expect(readdirSync(d).filter((n) => n.includes('.tmp.')), d).toEqual([]);
}

// cni/test/install_k8s_test.go: files are put in the dir as 0<i>-<name>; CNI_CONF_NAME is
// preConfFile unless NONE; after install resultFile must equal expected, after cleanup clean.
const UPSTREAM_CASES: [string, string | undefined, string, string, string, string[]][] = [
  ['File with pre-plugins--.conflist', '00-calico.conflist', '00-calico.conflist', 'expected/10-calico.conflist-istioconfig', 'pre/calico.conflist', ['calico.conflist']],
  ['File without pre-plugins--.conf', '00-minikube_cni.conf', '00-minikube_cni.conflist', 'expected/minikube_cni.conflist.expected', 'expected/minikube_cni.conflist.clean', ['minikube_cni.conf']],
  ['First file with pre-plugins--.conflist', undefined, '00-calico.conflist', 'expected/10-calico.conflist-istioconfig', 'pre/calico.conflist', ['calico.conflist', 'minikube_cni.conf']],
  ['First file without pre-plugins--.conf', undefined, '00-minikube_cni.conflist', 'expected/minikube_cni.conflist.expected', 'expected/minikube_cni.conflist.clean', ['minikube_cni.conf', 'calico.conflist']],
  ['Skip non-json file for first valid .conf file', undefined, '01-minikube_cni.conflist', 'expected/minikube_cni.conflist.expected', 'expected/minikube_cni.conflist.clean', ['non_json.conf', 'minikube_cni.conf', 'calico.conflist']],
  ['Skip non-json file for first valid .conflist file', undefined, '01-calico.conflist', 'expected/10-calico.conflist-istioconfig', 'pre/calico.conflist', ['non_json.conf', 'calico.conflist', 'minikube_cni.conf']],
  ['Skip invalid .conf file for first valid .conf file', undefined, '01-minikube_cni.conflist', 'expected/minikube_cni.conflist.expected', 'expected/minikube_cni.conflist.clean', ['bad_minikube_cni.conf', 'minikube_cni.conf', 'calico.conflist']],
  ['Skip invalid .conf file for first valid .conflist file', undefined, '01-calico.conflist', 'expected/10-calico.conflist-istioconfig', 'pre/calico.conflist', ['bad_minikube_cni.conf', 'calico.conflist', 'minikube_cni.conf']],
  ['Skip invalid .conflist files for first valid .conf file', undefined, '02-minikube_cni.conflist', 'expected/minikube_cni.conflist.expected', 'expected/minikube_cni.conflist.clean', ['noname_calico.conflist', 'noplugins_calico.conflist', 'minikube_cni.conf', 'calico.conflist']],
  ['Skip invalid .conflist files for first valid .conflist file', undefined, '02-calico.conflist', 'expected/10-calico.conflist-istioconfig', 'pre/calico.conflist', ['noname_calico.conflist', 'noplugins_calico.conflist', 'calico.conflist', 'minikube_cni.conf']],
  ['confFile env var point to missing .conf with valid .conflist file', '00-calico.conf', '00-calico.conflist', 'expected/10-calico.conflist-istioconfig', 'pre/calico.conflist', ['calico.conflist']],
];

describe('upstream install cases (cni/test testdata)', () => {
  it.each(UPSTREAM_CASES)('%s', async (_name, confName, resultFile, expected, clean, files) => {
    const node = fakeNode();
    files.forEach((f, i) => writeFileSync(join(node.netDir, `0${i}-${f}`), fixture(`pre/${f}`), { mode: 0o644 }));
    const h = harness(installConfig(node, confName ? { CNI_CONF_NAME: confName } : {}));
    await h.installer.start();
    const result = join(node.netDir, resultFile);
    expect(read(result)).toBe(fixture(expected));
    expect(mode(result)).toBe(0o644);
    expect(h.installer.configPath).toBe(result);
    // A .conf primary was converted: only the .conflist is left.
    expect(existsSync(result.slice(0, -4))).toBe(false);
    expect(read(join(node.binDir, 'istio-cni'))).toBe(read(node.source));
    expect(mode(join(node.binDir, 'istio-cni'))).toBe(0o755);
    await until(() => h.installer.ready, 3000, 'ready');
    expect(h.results).toEqual(['SUCCESS']);
    noTemporaries(node.netDir, node.binDir);

    await h.installer.cleanup();
    expect(read(result)).toBe(fixture(clean));
    expect(mode(result)).toBe(0o644);
    expect(existsSync(join(node.binDir, 'istio-cni'))).toBe(false);
    expect(h.ready).toEqual([true, false]);
    noTemporaries(node.netDir, node.binDir);
  });
});

describe('modes of operation', () => {
  it('standalone writes expected/YYY-istio-cni.conf 0600 (0640 with CNI_CONF_GROUP_READ); cleanup deletes it', async () => {
    for (const [env, want] of [[{}, 0o600], [{ CNI_CONF_GROUP_READ: 'true' }, 0o640]] as const) {
      const node = fakeNode();
      writeFileSync(join(node.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
      const h = harness(installConfig(node, { CHAINED_CNI_PLUGIN: 'false', ...env }));
      await h.installer.start();
      const path = join(node.netDir, 'YYY-istio-cni.conf');
      expect(read(path)).toBe(fixture('expected/YYY-istio-cni.conf'));
      expect(mode(path)).toBe(want);
      expect(read(join(node.netDir, '10-calico.conflist'))).toBe(fixture('pre/calico.conflist'));
      // 10-calico sorts first: reported as preempted, not fought over.
      await until(() => h.installer.ready, 3000, 'ready');
      expect(h.log.warnings().some((w) => w.includes('preempted'))).toBe(true);
      await h.installer.cleanup();
      expect(existsSync(path)).toBe(false);
      expect(read(join(node.netDir, '10-calico.conflist'))).toBe(fixture('pre/calico.conflist'));
    }
  });

  it('standalone with CNI_CONF_NAME writes that file; an edited type is rewritten', async () => {
    const node = fakeNode();
    const h = harness(installConfig(node, { CHAINED_CNI_PLUGIN: 'false', CNI_CONF_NAME: '05-istio.conf' }), FAST);
    await h.installer.start();
    const path = join(node.netDir, '05-istio.conf');
    expect(read(path)).toBe(fixture('expected/YYY-istio-cni.conf'));
    await until(() => h.installer.ready);
    writeFileSync(path, read(path).replace('"type": "istio-cni"', '"type": "bridge"'));
    await until(() => read(path) === fixture('expected/YYY-istio-cni.conf'), 2000, 'rewrite');
  });

  it('chained keeps the primary\'s mode, for a list and for a converted .conf', async () => {
    const node = fakeNode();
    writeFileSync(join(node.netDir, '10-mini.conf'), fixture('pre/minikube_cni.conf'));
    chmodSync(join(node.netDir, '10-mini.conf'), 0o604);
    const h = harness(installConfig(node));
    await h.installer.start();
    const path = join(node.netDir, '10-mini.conflist');
    expect(existsSync(join(node.netDir, '10-mini.conf'))).toBe(false);
    expect(read(path)).toBe(fixture('expected/minikube_cni.conflist.expected'));
    expect(mode(path)).toBe(0o604);
  });

  it('Istio-owned writes istio-owned.conflist.golden to 02-istio-cni.conflist, never touching the primary', async () => {
    const node = fakeNode();
    const primary = join(node.netDir, '10-list.conflist');
    writeFileSync(primary, fixture('list.conflist'), { mode: 0o644 });
    const cfg = installConfig(node, { ISTIO_OWNED_CNI_CONFIG: 'true', AMBIENT_ENABLED: 'true' }, UNIT_ENTRY);
    cfg.entry = { ...UNIT_ENTRY, ambientEnabled: true };
    expect(cfg.istioOwned).toBe(true);
    const h = harness(cfg, FAST);
    await h.installer.start();
    const owned = join(node.netDir, '02-istio-cni.conflist');
    expect(read(owned)).toBe(fixture('istio-owned.conflist.golden'));
    expect(mode(owned)).toBe(0o600);
    expect(read(primary)).toBe(fixture('list.conflist'));
    await until(() => h.installer.ready);

    // Q4 (intended): an edit inside the primary reaches the owned file.
    atomicWrite(primary, fixture('list.conflist').replace('"500"', '"1024"'));
    await until(() => read(owned).includes('"net.core.somaxconn": "1024"'), 2000, 'owned file follows the primary');
    expect(read(owned)).toBe(fixture('istio-owned.conflist.golden').replace('"500"', '"1024"'));

    // Deleted: written again; the primary is still untouched.
    rmSync(owned);
    await until(() => existsSync(owned), 2000, 'owned file back');
    await h.installer.cleanup();
    expect(existsSync(owned)).toBe(false);
    expect(read(primary)).toBe(fixture('list.conflist').replace('"500"', '"1024"'));
  });

  it('Istio-owned finds its primary again after a restart (the owned file sorts first)', async () => {
    const node = fakeNode();
    writeFileSync(join(node.netDir, '10-list.conflist'), fixture('list.conflist'));
    const cfg = installConfig(node, { ISTIO_OWNED_CNI_CONFIG: 'true', AMBIENT_ENABLED: 'true' });
    cfg.entry = { ...UNIT_ENTRY, ambientEnabled: true };
    const first = harness(cfg);
    await first.installer.start();
    await first.installer.stop();
    writeFileSync(join(node.netDir, '10-list.conflist'), fixture('list.conflist').replace('"500"', '"2048"'));
    const second = harness(cfg);
    await second.installer.start();
    expect(read(join(node.netDir, '02-istio-cni.conflist'))).toBe(fixture('istio-owned.conflist.golden').replace('"500"', '"2048"'));
  });

  it('Istio-owned is off unless chained and ambient (upstream\'s gate)', () => {
    const node = fakeNode();
    expect(installConfig(node, { ISTIO_OWNED_CNI_CONFIG: 'true' }).istioOwned).toBe(false);
    expect(installConfig(node, { ISTIO_OWNED_CNI_CONFIG: 'true', AMBIENT_ENABLED: 'true', CHAINED_CNI_PLUGIN: 'false' }).istioOwned).toBe(false);
  });

  it('waits for a primary config when there is none, not ready meanwhile', async () => {
    const node = fakeNode();
    const h = harness(installConfig(node));
    let started = false;
    const p = h.installer.start().then(() => { started = true; });
    await until(() => h.log.lines.some((l) => l.msg.startsWith('waiting for a CNI network config file')), 3000, 'the wait');
    expect(started).toBe(false);
    expect(h.installer.ready).toBe(false);
    expect(existsSync(join(node.binDir, 'istio-cni'))).toBe(true);
    atomicWrite(join(node.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    await p;
    expect(read(join(node.netDir, '10-calico.conflist'))).toBe(fixture('expected/10-calico.conflist-istioconfig'));
  });

  it('stop() during that wait ends start() with ERR_STOPPED, counting no failure', async () => {
    const node = fakeNode();
    const h = harness(installConfig(node));
    const p = h.installer.start();
    await new Promise((r) => setTimeout(r, 50));
    await h.installer.stop();
    await expect(p).rejects.toMatchObject({ code: 'ERR_STOPPED' });
    await expect(h.installer.done).resolves.toBeUndefined();
    expect(h.results).toEqual([]);
  });

  it('moves to a config that preempts ours (CNI_CONF_NAME unset)', async () => {
    const node = fakeNode();
    writeFileSync(join(node.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    const h = harness(installConfig(node));
    await h.installer.start();
    await until(() => h.installer.ready);
    atomicWrite(join(node.netDir, '05-other.conflist'), fixture('pre/calico.conflist'));
    await until(() => read(join(node.netDir, '05-other.conflist')) === fixture('expected/10-calico.conflist-istioconfig'), 2000, 'entry in the new first config');
    expect(h.installer.configPath).toBe(join(node.netDir, '05-other.conflist'));
  });
});

describe('watch and reinstall loop (§3.5)', () => {
  it('a writer dropping our entry: re-inserted within ~1 s (atomic rename and in-place write)', async () => {
    const node = fakeNode();
    const path = join(node.netDir, '10-calico.conflist');
    writeFileSync(path, fixture('pre/calico.conflist'));
    const h = harness(installConfig(node));
    await h.installer.start();
    for (const write of [atomicWrite, (p: string, t: string) => writeFileSync(p, t)]) {
      await until(() => h.installer.ready, 3000, 'ready');
      const t0 = Date.now();
      write(path, fixture('pre/calico.conflist'));
      await until(() => read(path) === fixture('expected/10-calico.conflist-istioconfig'), 1500, 're-insertion');
      expect(Date.now() - t0).toBeLessThan(1500);
    }
    await until(() => h.installer.ready, 3000, 'ready again');
    expect(h.results.every((r) => r === 'SUCCESS')).toBe(true);
    expect(h.results.length).toBeGreaterThanOrEqual(3);
    expect(h.ready.filter((r) => r).length).toBe(h.ready.filter((r) => !r).length + 1);
    noTemporaries(node.netDir, node.binDir);
  });

  it('idle: one round, ready, no self-triggered rounds (our reads and writes wake no watch)', async () => {
    const node = fakeNode();
    writeFileSync(join(node.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    const h = harness(installConfig(node, { CNI_BIN_TARGET_DIRS: `${node.binDir},${node.root}` }));
    await h.installer.start();
    await until(() => h.installer.ready);
    await new Promise((r) => setTimeout(r, 700));
    expect(h.results).toEqual(['SUCCESS']);
    expect(h.ready).toEqual([true]);
    expect(h.installer.ready).toBe(true);
    expect(existsSync(join(node.root, 'istio-cni'))).toBe(true);
  });

  it('a change that leaves the config valid is not rewritten', async () => {
    const node = fakeNode();
    const path = join(node.netDir, '10-calico.conflist');
    writeFileSync(path, fixture('pre/calico.conflist'));
    const h = harness(installConfig(node), FAST);
    await h.installer.start();
    await until(() => h.installer.ready);
    const edited = `${read(path).trimEnd()}  \n`;
    writeFileSync(path, edited);
    await until(() => h.results.length >= 2, 2000, 'a second round');
    expect(read(path)).toBe(edited);
  });

  it('the plugin binary deleted or replaced: installed again', async () => {
    const node = fakeNode();
    writeFileSync(join(node.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    const h = harness(installConfig(node), FAST);
    await h.installer.start();
    const bin = join(node.binDir, 'istio-cni');
    await until(() => h.installer.ready);
    rmSync(bin);
    await until(() => existsSync(bin) && read(bin) === read(node.source), 2000, 'binary re-copied');
    await until(() => h.installer.ready);
    writeFileSync(bin, 'garbage');
    await until(() => read(bin) === read(node.source), 2000, 'binary replaced');
    expect(mode(bin)).toBe(0o755);
    noTemporaries(node.binDir);
  });

  it('a component reverting us: warning after more than 5 throttled rounds, with the Cilium hint, and the callback', async () => {
    const node = fakeNode();
    const path = join(node.netDir, '05-cilium.conflist');
    writeFileSync(path, fixture('pre/calico.conflist'));
    const h = harness(installConfig(node), { throttle: { maxSleepMs: 10 } });
    await h.installer.start();
    const fight = setInterval(() => {
      try {
        if (read(path).includes('"istio-cni"')) atomicWrite(path, fixture('pre/calico.conflist'));
      } catch { /* mid-rename */ }
    }, 3);
    try {
      await until(() => h.reverts.length > 0, 5000, 'revert warning');
    } finally {
      clearInterval(fight);
    }
    expect(h.reverts[0]).toMatchObject({ hits: 6, path, hint: expect.stringContaining('cni.exclusive=false') });
    expect(h.log.warnings().some((w) => w.includes('another component keeps reverting') && w.includes('cni.exclusive=false'))).toBe(true);
    // Once the fight is over, the entry is back and stays.
    await until(() => read(path) === fixture('expected/10-calico.conflist-istioconfig') && h.installer.ready, 3000, 'settled');
  });

  it('without a fight the throttle does not delay: the first revert is fixed at once', async () => {
    const node = fakeNode();
    const path = join(node.netDir, '10-calico.conflist');
    writeFileSync(path, fixture('pre/calico.conflist'));
    const h = harness(installConfig(node));
    await h.installer.start();
    await until(() => h.installer.ready);
    const t0 = Date.now();
    atomicWrite(path, fixture('pre/calico.conflist'));
    await until(() => read(path) === fixture('expected/10-calico.conflist-istioconfig'), 1000);
    expect(Date.now() - t0).toBeLessThan(500);
    expect(h.reverts).toEqual([]);
  });

  it('a failed reinstallation ends the run: done rejects, the failure is counted, not ready', async () => {
    const node = fakeNode();
    writeFileSync(join(node.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    const h = harness(installConfig(node));
    await h.installer.start();
    await until(() => h.installer.ready);
    rmSync(node.binDir, { recursive: true });
    await expect(h.installer.done).rejects.toMatchObject({ code: 'ERR_BINARY_TARGET', stage: 'copy-binaries' });
    expect(h.results).toEqual(['SUCCESS', 'COPY_BINARIES_FAILURE']);
    expect(h.installer.ready).toBe(false);
    expect(h.ready).toEqual([true, false]);
  });
});

describe('failures of the first installation, by stage', () => {
  function node(): Node {
    const n = fakeNode();
    writeFileSync(join(n.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    return n;
  }

  it('no plugin binary: COPY_BINARIES_FAILURE / ERR_BINARY_SOURCE', async () => {
    const n = node();
    rmSync(n.source);
    const h = harness(installConfig(n));
    await expect(h.installer.start()).rejects.toMatchObject({ code: 'ERR_BINARY_SOURCE', stage: 'copy-binaries' });
    expect(h.results).toEqual(['COPY_BINARIES_FAILURE']);
    await expect(h.installer.done).rejects.toMatchObject({ code: 'ERR_BINARY_SOURCE' });
  });

  it('an unparsable named primary: CREATE_CNI_CONFIG_FAILURE', async () => {
    const n = node();
    writeFileSync(join(n.netDir, '20-broken.conflist'), '{ not json');
    const h = harness(installConfig(n, { CNI_CONF_NAME: '20-broken.conflist' }));
    await expect(h.installer.start()).rejects.toMatchObject({ code: 'ERR_CNI_CONFIG_INVALID', stage: 'cni-config' });
    expect(h.results).toEqual(['CREATE_CNI_CONFIG_FAILURE']);
  });

  it('kubeconfig option without a token: CREATE_KUBECONFIG_FAILURE', async () => {
    const n = node();
    const h = harness(installConfig(n, { WRITE_PLUGIN_KUBECONFIG: 'true', KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }));
    await expect(h.installer.start()).rejects.toMatchObject({ code: 'ERR_IO', stage: 'kubeconfig', errno: 'ENOENT' });
    expect(h.results).toEqual(['CREATE_KUBECONFIG_FAILURE']);
  });
});

describe('cleanup (§3.6)', () => {
  it('a config it cannot clean is reported (stage cleanup) after the rest was removed', async () => {
    const n = fakeNode();
    const path = join(n.netDir, '10-calico.conflist');
    writeFileSync(path, fixture('pre/calico.conflist'));
    const h = harness(installConfig(n));
    await h.installer.start();
    await h.installer.stop();
    writeFileSync(path, '{"name": "k8s-pod-network", "plugins": 5}');
    await expect(h.installer.cleanup()).rejects.toMatchObject({ code: 'ERR_CNI_CONFIG_INVALID', stage: 'cleanup', path });
    expect(existsSync(join(n.binDir, 'istio-cni'))).toBe(false);
    expect(read(path)).toBe('{"name": "k8s-pod-network", "plugins": 5}');
  });

  it('of an installer that wrote nothing: only the binary (and kubeconfig) go; a config is not touched', async () => {
    const n = fakeNode();
    writeFileSync(join(n.netDir, '10-calico.conflist'), fixture('expected/10-calico.conflist-istioconfig'));
    writeFileSync(join(n.binDir, 'istio-cni'), 'x');
    writeFileSync(join(n.runDir, 'istio-cni-kubeconfig'), 'x');
    await harness(installConfig(n)).installer.cleanup();
    expect(readdirSync(n.binDir)).toEqual([]);
    expect(readdirSync(n.runDir)).toEqual([]);
    expect(read(join(n.netDir, '10-calico.conflist'))).toBe(fixture('expected/10-calico.conflist-istioconfig'));
  });
});

describe('binary copy and kubeconfig', () => {
  it('removes <name>.tmp.* leftovers first, installs under a configured name', async () => {
    const n = fakeNode();
    writeFileSync(join(n.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    writeFileSync(join(n.binDir, 'podwire.tmp.123abc'), 'stale');
    writeFileSync(join(n.binDir, 'podwire.tmpx'), 'not ours');
    const cfg = installConfig(n, { CNI_PLUGIN_NAME: 'podwire' });
    cfg.entry.type = 'podwire';
    const h = harness(cfg);
    await h.installer.start();
    expect(readdirSync(n.binDir).sort()).toEqual(['podwire', 'podwire.tmpx']);
    const list = JSON.parse(read(join(n.netDir, '10-calico.conflist'))) as { plugins: { type: string; name?: string }[] };
    expect(list.plugins.at(-1)).toMatchObject({ type: 'podwire', name: 'istio-cni' });
    await h.installer.cleanup();
    expect(readdirSync(n.binDir)).toEqual(['podwire.tmpx']);
    expect(read(join(n.netDir, '10-calico.conflist'))).toBe(fixture('pre/calico.conflist'));
  });

  it('kubeconfig: off by default; with the option written (golden), rewritten on token rotation, removed at cleanup', async () => {
    const n = fakeNode();
    writeFileSync(join(n.netDir, '10-calico.conflist'), fixture('pre/calico.conflist'));
    const off = harness(installConfig(n));
    await off.installer.start();
    await off.installer.stop();
    expect(existsSync(join(n.runDir, 'istio-cni-kubeconfig'))).toBe(false);

    writeFileSync(join(n.saDir, 'token'), 'service_account_token_string');
    const h = harness(installConfig(n, { WRITE_PLUGIN_KUBECONFIG: 'true', SKIP_TLS_VERIFY: 'true', KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443', KUBECONFIG_MODE: '0640' }));
    await h.installer.start();
    const kc = join(n.runDir, 'istio-cni-kubeconfig');
    expect(read(kc)).toBe(fixture('kubeconfig-skip-tls'));
    expect(mode(kc)).toBe(0o640);
    await until(() => h.installer.ready);
    atomicWrite(join(n.saDir, 'token'), 'rotated_token');
    await until(() => read(kc).includes('token: rotated_token'), 2000, 'kubeconfig rewritten');
    await h.installer.cleanup();
    expect(existsSync(kc)).toBe(false);
  });

  it('a second copy replaces the binary atomically (readers never see a partial file)', async () => {
    const n = fakeNode();
    const big = Buffer.alloc(4 << 20, 7);
    writeFileSync(n.source, big);
    chmodSync(n.source, 0o750);
    const { copyBinaries } = await import('../../lib/install/binaries.js');
    await copyBinaries({ source: n.source, name: 'istio-cni', targetDirs: [n.binDir] });
    const bin = join(n.binDir, 'istio-cni');
    const sizes = new Set<number>();
    const poll = setInterval(() => {
      try {
        sizes.add(statSync(bin).size);
      } catch { /* never: rename replaces in one step */ sizes.add(-1); }
    }, 0);
    for (let i = 0; i < 5; i++) await copyBinaries({ source: n.source, name: 'istio-cni', targetDirs: [n.binDir] });
    clearInterval(poll);
    expect([...sizes]).toEqual([big.length]);
    expect(mode(bin)).toBe(0o750);
    noTemporaries(n.binDir);
  });
});
