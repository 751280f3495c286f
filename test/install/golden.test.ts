// The installer's text against Istio's golden files (test/fixtures/istio/install), byte for
// byte: the plugin entry, the chained merge (.conf and .conflist), the Istio-owned merge, the
// cleanup result, and the kubeconfigs. The whole installer against expected/ is in
// installer.test.ts. Not used: istio-cni.conf.template (the old CNI_NETWORK_CONFIG template,
// a setting upstream registers but no longer reads, spec §8.1).
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { insertEntry, removeEntry } from '../../lib/install/conflist.js';
import { kubeconfigContent, renderKubeconfig, writeKubeconfig } from '../../lib/install/kubeconfig.js';
import { renderPluginEntry } from '../../lib/install/plugin-entry.js';
import { E2E_ENTRY, fixture, tempDir, UNIT_ENTRY } from './helpers.js';

describe('plugin entry (§3.2)', () => {
  it('is istio-cni.conf for upstream\'s unit-test settings (exclude_namespaces null when none)', () => {
    expect(renderPluginEntry(UNIT_ENTRY)).toBe(fixture('istio-cni.conf'));
  });

  it('is expected/YYY-istio-cni.conf for the install test\'s settings', () => {
    expect(renderPluginEntry(E2E_ENTRY)).toBe(fixture('expected/YYY-istio-cni.conf'));
  });

  it('writes podwire\'s fields only when set, after Istio\'s, in struct order', () => {
    const text = renderPluginEntry({ ...E2E_ENTRY, agentWaitMs: 2500, agentTimeoutMs: 30000, statusAlwaysOk: false });
    expect(text).toBe(fixture('expected/YYY-istio-cni.conf').replace(
      '  "enable_ambient_detection_retry": false\n}\n',
      '  "enable_ambient_detection_retry": false,\n  "agent_wait_ms": 2500,\n  "agent_timeout_ms": 30000,\n  "status_always_ok": false\n}\n',
    ));
    expect(renderPluginEntry({ ...E2E_ENTRY, statusAlwaysOk: true })).toContain('  "enable_ambient_detection_retry": false,\n  "status_always_ok": true\n}\n');
  });

  it('writes selectors as Go marshals util.EnablementSelector (both selectors always, omitempty inside, map keys sorted)', () => {
    const text = renderPluginEntry({
      ...E2E_ENTRY,
      enablementSelectors: [
        { podSelector: { matchLabels: { 'z.io/b': '1', 'a.io/a': '2' } } },
        { podSelector: { matchExpressions: [{ key: 'istio.io/dataplane-mode', operator: 'NotIn', values: ['none'] }, { key: 'k', operator: 'Exists' }] }, namespaceSelector: { matchLabels: { 'istio.io/dataplane-mode': 'ambient' } } },
      ],
    });
    expect(text).toContain([
      '  "enablement_selectors": [',
      '    {',
      '      "podSelector": {',
      '        "matchLabels": {',
      '          "a.io/a": "2",',
      '          "z.io/b": "1"',
      '        }',
      '      },',
      '      "namespaceSelector": {}',
      '    },',
      '    {',
      '      "podSelector": {',
      '        "matchExpressions": [',
      '          {',
      '            "key": "istio.io/dataplane-mode",',
      '            "operator": "NotIn",',
      '            "values": [',
      '              "none"',
      '            ]',
      '          },',
      '          {',
      '            "key": "k",',
      '            "operator": "Exists"',
      '          }',
      '        ]',
      '      },',
      '      "namespaceSelector": {',
      '        "matchLabels": {',
      '          "istio.io/dataplane-mode": "ambient"',
      '        }',
      '      }',
      '    }',
      '  ],',
    ].join('\n'));
  });
});

describe('chained merge (§3.2)', () => {
  const entry = renderPluginEntry(UNIT_ENTRY);

  it('a single .conf becomes a k8s-pod-network list (bridge.conf → bridge.conf.golden)', () => {
    expect(insertEntry(entry, fixture('bridge.conf'))).toBe(fixture('bridge.conf.golden'));
  });

  it('a list gets the entry appended, keys sorted at every level (list.conflist → list.conflist.golden)', () => {
    expect(insertEntry(entry, fixture('list.conflist'))).toBe(fixture('list.conflist.golden'));
  });

  it('an entry already in the list is replaced, not added twice', () => {
    expect(insertEntry(entry, fixture('list.conflist.golden'))).toBe(fixture('list.conflist.golden'));
    const stale = fixture('list.conflist.golden').replace('"plugin_log_level": "debug"', '"plugin_log_level": "info"');
    expect(insertEntry(entry, stale)).toBe(fixture('list.conflist.golden'));
  });

  it('the Istio-owned file holds the same merge (list.conflist → istio-owned.conflist.golden, ambient on)', () => {
    expect(insertEntry(renderPluginEntry({ ...UNIT_ENTRY, ambientEnabled: true }), fixture('list.conflist'))).toBe(fixture('istio-owned.conflist.golden'));
  });

  it('cni/test pre/ configs merge to expected/ (calico list, minikube .conf)', () => {
    const e2e = renderPluginEntry(E2E_ENTRY);
    expect(insertEntry(e2e, fixture('pre/calico.conflist'))).toBe(fixture('expected/10-calico.conflist-istioconfig'));
    expect(insertEntry(e2e, fixture('pre/minikube_cni.conf'))).toBe(fixture('expected/minikube_cni.conflist.expected'));
  });

  it('rejects what is not a config: invalid-arr.conflist, a list without plugins, an entry that is not an object', () => {
    expect(() => insertEntry(entry, fixture('invalid-arr.conflist'))).toThrow(expect.objectContaining({ code: 'ERR_CNI_CONFIG_INVALID', stage: 'cni-config' }));
    expect(() => insertEntry(entry, fixture('invalid-map.conflist'))).toThrow(expect.objectContaining({ code: 'ERR_CNI_CONFIG_INVALID' }));
    expect(() => insertEntry(entry, fixture('pre/non_json.conf'))).toThrow(expect.objectContaining({ code: 'ERR_CNI_CONFIG_INVALID' }));
    expect(() => insertEntry('[]', fixture('list.conflist'))).toThrow(expect.objectContaining({ code: 'ERR_ENTRY_INVALID' }));
  });
});

describe('cleanup text (§3.6)', () => {
  it('removes the entry and keeps the rest sorted (list.conflist.golden → list-no-istio.conflist)', () => {
    expect(removeEntry(fixture('list.conflist.golden'))).toBe(fixture('list-no-istio.conflist'));
    expect(removeEntry(fixture('istio-owned.conflist.golden'))).toBe(fixture('list-no-istio.conflist'));
  });

  it('expected/ → the clean files (calico back to pre/calico.conflist; minikube stays a list)', () => {
    expect(removeEntry(fixture('expected/10-calico.conflist-istioconfig'))).toBe(fixture('pre/calico.conflist'));
    expect(removeEntry(fixture('expected/minikube_cni.conflist.expected'))).toBe(fixture('expected/minikube_cni.conflist.clean'));
  });

  it('removes only the first istio-cni plugin; a list without one is only re-sorted', () => {
    const list = JSON.parse(fixture('list.conflist.golden')) as { plugins: Record<string, unknown>[] };
    list.plugins.push({ type: 'istio-cni', second: true });
    const once = JSON.parse(removeEntry(JSON.stringify(list))) as { plugins: Record<string, unknown>[] };
    expect(once.plugins.map((p) => p.type)).toEqual(['bridge', 'tuning', 'istio-cni']);
    expect(once.plugins[2]).toEqual({ type: 'istio-cni', second: true });
    expect(removeEntry(fixture('list.conflist'))).toBe(fixture('list-no-istio.conflist'));
  });
});

describe('kubeconfig (§3.1.2, option)', () => {
  const ca = Buffer.from(/certificate-authority-data: (\S+)/.exec(fixture('kubeconfig-tls'))![1]!, 'base64');

  function serviceAccount(): string {
    const dir = tempDir();
    writeFileSync(join(dir, 'token'), 'service_account_token_string');
    writeFileSync(join(dir, 'ca.crt'), ca);
    return dir;
  }

  const src = (saDir: string, over: Partial<Parameters<typeof kubeconfigContent>[0]> = {}) => ({
    serviceProtocol: '', serviceHost: '10.96.0.1', servicePort: '443', caFile: '', skipTlsVerify: false, serviceAccountDir: saDir, ...over,
  });

  it('with the service account CA is kubeconfig-tls', async () => {
    const sa = serviceAccount();
    expect(ca.toString()).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(renderKubeconfig(await kubeconfigContent(src(sa)))).toBe(fixture('kubeconfig-tls'));
  });

  it('with KUBE_CA_FILE reads that file instead', async () => {
    const sa = serviceAccount();
    const caFile = join(tempDir(), 'other-ca.pem');
    writeFileSync(caFile, ca);
    writeFileSync(join(sa, 'ca.crt'), 'not this one');
    expect(renderKubeconfig(await kubeconfigContent(src(sa, { caFile })))).toBe(fixture('kubeconfig-tls'));
  });

  it('with SKIP_TLS_VERIFY is kubeconfig-skip-tls (no CA read)', async () => {
    const sa = tempDir();
    writeFileSync(join(sa, 'token'), 'service_account_token_string');
    expect(renderKubeconfig(await kubeconfigContent(src(sa, { skipTlsVerify: true })))).toBe(fixture('kubeconfig-skip-tls'));
  });

  it('brackets an IPv6 host, honours the protocol, quotes a token YAML would misread', async () => {
    const sa = serviceAccount();
    writeFileSync(join(sa, 'token'), 'true');
    const text = renderKubeconfig(await kubeconfigContent(src(sa, { serviceHost: 'fd00::1', serviceProtocol: 'http' })));
    expect(text).toContain('    server: http://[fd00::1]:443\n');
    expect(text).toContain('    token: "true"\n');
  });

  it('is written atomically to <run dir>/istio-cni-kubeconfig with KUBECONFIG_MODE', async () => {
    const sa = serviceAccount();
    const run = tempDir();
    const path = await writeKubeconfig(run, src(sa), 0o640);
    expect(path).toBe(join(run, 'istio-cni-kubeconfig'));
    expect(readFileSync(path, 'utf8')).toBe(fixture('kubeconfig-tls'));
    expect(statSync(path).mode & 0o777).toBe(0o640);
  });

  it('fails typed without the service host or a token', async () => {
    const sa = tempDir();
    await expect(kubeconfigContent(src(sa, { serviceHost: '' }))).rejects.toMatchObject({ code: 'ERR_KUBECONFIG_SERVICE', stage: 'kubeconfig' });
    await expect(kubeconfigContent(src(sa))).rejects.toMatchObject({ code: 'ERR_IO', stage: 'kubeconfig', errno: 'ENOENT' });
  });
});
