// The installer's settings (spec §8.1): defaults, precedence, validation by setting, the
// shared command line with the agent, quirk Q1, and the plugin entry they make.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseAgentConfig } from '../../lib/agent/config.js';
import { DEFAULT_PLUGIN_BINARY, describeInstallSettings, INSTALL_SETTINGS, parseInstallConfig } from '../../lib/install/config.js';
import { DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/enablement.js';
import { configError } from '../helpers/config-error.js';


describe('defaults', () => {
  it('are upstream\'s (chart values for the shared env-only settings)', () => {
    const c = parseInstallConfig({}, []);
    expect(c).toEqual({
      mountedCniNetDir: '/host/etc/cni/net.d', cniConfName: '', chainedCniPlugin: true, istioOwnedCniConfig: false,
      istioOwnedCniConfigFilename: '02-istio-cni.conflist', istioOwned: false, cniConfGroupRead: false,
      cniBinTargetDirs: ['/host/opt/cni/bin'], cniPluginBinary: DEFAULT_PLUGIN_BINARY, cniPluginName: 'istio-cni',
      cniAgentRunDir: '/var/run/istio-cni', writeKubeconfig: false, kubeconfigMode: 0o600, kubeCaFile: '', skipTlsVerify: false,
      serviceAccountDir: '/var/run/secrets/kubernetes.io/serviceaccount', kubernetesServiceProtocol: '', kubernetesServiceHost: '',
      kubernetesServicePort: '',
      entry: {
        type: 'istio-cni', pluginLogLevel: 'info', cniAgentRunDir: '/var/run/istio-cni', ambientEnabled: false,
        enablementSelectors: DEFAULT_ENABLEMENT_SELECTORS, excludeNamespaces: ['kube-system'], podNamespace: '', nativeNftables: false,
        enableAmbientDetectionRetry: false, agentWaitMs: undefined, agentTimeoutMs: undefined, statusAlwaysOk: undefined,
      },
    });
    expect(DEFAULT_PLUGIN_BINARY).toMatch(/\/build\/Release\/podwire-cni$/);
  });
});

describe('values', () => {
  it('flag over env over default; env names as in §8.1', () => {
    const c = parseInstallConfig({
      CNI_CONF_NAME: '10-calico.conflist', CHAINED_CNI_PLUGIN: 'false', MOUNTED_CNI_NET_DIR: '/n/', CNI_CONF_GROUP_READ: 't',
      KUBECONFIG_MODE: '0644', KUBE_CA_FILE: '/ca.pem', SKIP_TLS_VERIFY: '1', ENABLE_AMBIENT_DETECTION_RETRY: 'true',
      CNI_BIN_TARGET_DIRS: '/a, /b/,,/a', POD_NAMESPACE: 'istio-system', EXCLUDE_NAMESPACES: '', AMBIENT_ENABLEMENT_SELECTOR: '[]',
      NATIVE_NFTABLES: 'true', AMBIENT_ENABLED: 'true',
    }, ['--cni-conf-name=05-x.conf', '--log_output_level=cni-agent:warn,cni-plugin:debug']);
    expect(c).toMatchObject({
      cniConfName: '05-x.conf', chainedCniPlugin: false, mountedCniNetDir: '/n', cniConfGroupRead: true, kubeconfigMode: 0o644,
      kubeCaFile: '/ca.pem', skipTlsVerify: true, cniBinTargetDirs: ['/a', '/b'],
    });
    expect(c.entry).toMatchObject({
      pluginLogLevel: 'debug', podNamespace: 'istio-system', excludeNamespaces: [], enablementSelectors: [], nativeNftables: true,
      ambientEnabled: true, enableAmbientDetectionRetry: true,
    });
    expect(parseInstallConfig({}, ['--log_output_level=warn']).entry.pluginLogLevel).toBe('warn');
  });

  it('KUBECONFIG_MODE is octal however written (upstream would read 600 as decimal)', () => {
    for (const raw of ['0600', '600', '0o600']) expect(parseInstallConfig({ KUBECONFIG_MODE: raw }).kubeconfigMode).toBe(0o600);
    expect(configError(() => parseInstallConfig({ KUBECONFIG_MODE: '0800' })).setting).toBe('KUBECONFIG_MODE');
  });

  it('Q1: the chart\'s ISTIO_OWNED_CNI_CONF_FILENAME is honoured; ISTIO_OWNED_CNI_CONFIG_FILENAME wins', () => {
    expect(parseInstallConfig({ ISTIO_OWNED_CNI_CONF_FILENAME: '01-mine.conflist' }).istioOwnedCniConfigFilename).toBe('01-mine.conflist');
    expect(parseInstallConfig({ ISTIO_OWNED_CNI_CONF_FILENAME: '01-a.conflist', ISTIO_OWNED_CNI_CONFIG_FILENAME: '01-b.conflist' }).istioOwnedCniConfigFilename).toBe('01-b.conflist');
    expect(configError(() => parseInstallConfig({ ISTIO_OWNED_CNI_CONF_FILENAME: '01-a.conf' })).setting).toBe('ISTIO_OWNED_CNI_CONF_FILENAME');
  });

  it('Istio-owned is in effect only with chained and ambient', () => {
    expect(parseInstallConfig({ ISTIO_OWNED_CNI_CONFIG: 'true', AMBIENT_ENABLED: 'true' }).istioOwned).toBe(true);
    expect(parseInstallConfig({ ISTIO_OWNED_CNI_CONFIG: 'true' }).istioOwned).toBe(false);
    expect(parseInstallConfig({ ISTIO_OWNED_CNI_CONFIG: 'true', AMBIENT_ENABLED: 'true' }, ['--chained-cni-plugin=false']).istioOwned).toBe(false);
  });

  it('podwire\'s plugin fields: Go durations → ms, set only when given', () => {
    const c = parseInstallConfig({ PLUGIN_AGENT_WAIT: '2.5s' }, ['--plugin-agent-timeout', '1m', '--plugin-status-always-ok']);
    expect(c.entry).toMatchObject({ agentWaitMs: 2500, agentTimeoutMs: 60000, statusAlwaysOk: true });
    expect(parseInstallConfig({ PLUGIN_AGENT_WAIT: '0' }).entry.agentWaitMs).toBe(0);
    expect(configError(() => parseInstallConfig({ PLUGIN_AGENT_TIMEOUT: '0s' })).setting).toBe('PLUGIN_AGENT_TIMEOUT');
    expect(configError(() => parseInstallConfig({ PLUGIN_AGENT_WAIT: '5' })).message).toContain('unit is required');
    expect(configError(() => parseInstallConfig({ PLUGIN_AGENT_TIMEOUT: '2h' })).message).toContain('at most 1h');  // podwire-cni would refuse it on every pod
  });

  it('the kubeconfig option needs the service host and port, said at start', () => {
    expect(configError(() => parseInstallConfig({ WRITE_PLUGIN_KUBECONFIG: 'true' })).setting).toBe('KUBERNETES_SERVICE_HOST');
    expect(configError(() => parseInstallConfig({ KUBERNETES_SERVICE_HOST: '10.96.0.1' }, ['--write-plugin-kubeconfig'])).setting).toBe('KUBERNETES_SERVICE_PORT');
    const c = parseInstallConfig({ WRITE_PLUGIN_KUBECONFIG: 'true', KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' });
    expect(c).toMatchObject({ writeKubeconfig: true, kubernetesServiceHost: 'fd00::1', kubernetesServicePort: '6443' });
  });

  it.each([
    ['CNI_CONF_NAME', '../etc/x.conflist'],
    ['CHAINED_CNI_PLUGIN', 'yes'],
    ['MOUNTED_CNI_NET_DIR', 'relative/dir'],
    ['CNI_BIN_TARGET_DIRS', ' , '],
    ['CNI_BIN_TARGET_DIRS', '/ok,rel'],
    ['CNI_PLUGIN_BINARY', 'build/podwire-cni'],
    ['CNI_PLUGIN_NAME', 'a/b'],
    ['KUBERNETES_SERVICE_PORT', '70000'],
    ['KUBERNETES_SERVICE_HOST', 'bad host'],
    ['KUBERNETES_SERVICE_PROTOCOL', 'ftp'],
    ['ISTIO_OWNED_CNI_CONFIG_FILENAME', 'x/y.conflist'],
    ['AMBIENT_ENABLEMENT_SELECTOR', '{}'],
    ['CNI_AGENT_RUN_DIR', 'run'],
  ])('%s=%j is refused, naming the setting', (env, raw) => {
    const e = configError(() => parseInstallConfig({ [env]: raw }));
    expect(e.setting).toBe(env);
    expect(e.value).toBe(raw);
  });
});

describe('one command line for agent and installer', () => {
  const argv = ['--node-name=n1', '--cni-conf-name', '10-calico.conflist', '--ambient-enabled', '--chained-cni-plugin=false', '--ambient-ipv6=false', '--monitoring-port', '9999'];

  it('the installer skips the agent\'s flags (with their values), the agent the installer\'s', () => {
    const i = parseInstallConfig({}, argv);
    expect(i).toMatchObject({ cniConfName: '10-calico.conflist', chainedCniPlugin: false, entry: { ambientEnabled: true } });
    const a = parseAgentConfig({}, argv, { foreign: INSTALL_SETTINGS });
    expect(a).toMatchObject({ nodeName: 'n1', ambientEnabled: true, ipv6: false, monitoringPort: 9999 });
  });

  it('unknown flags stay errors for both', () => {
    expect(configError(() => parseInstallConfig({}, ['--nope=1'])).setting).toBe('--nope');
    expect(configError(() => parseAgentConfig({ NODE_NAME: 'n' }, ['--cni-conf-name=x'])).setting).toBe('--cni-conf-name');
    expect(configError(() => parseInstallConfig({}, ['--node-name=x'], { foreign: [] })).setting).toBe('--node-name');
  });

  it('--help text lists every setting with its env name', () => {
    const d = describeInstallSettings();
    expect(d.map((s) => s.env)).toEqual(expect.arrayContaining(['CNI_CONF_NAME', 'CHAINED_CNI_PLUGIN', 'ISTIO_OWNED_CNI_CONFIG', 'ISTIO_OWNED_CNI_CONFIG_FILENAME', 'MOUNTED_CNI_NET_DIR', 'KUBECONFIG_MODE', 'CNI_CONF_GROUP_READ', 'KUBE_CA_FILE', 'SKIP_TLS_VERIFY', 'CNI_AGENT_RUN_DIR']));
    expect(d.filter((s) => s.podwire).map((s) => s.env)).toEqual(['CNI_BIN_TARGET_DIRS', 'CNI_PLUGIN_BINARY', 'CNI_PLUGIN_NAME', 'WRITE_PLUGIN_KUBECONFIG', 'SERVICE_ACCOUNT_DIR', 'PLUGIN_AGENT_WAIT', 'PLUGIN_AGENT_TIMEOUT', 'PLUGIN_STATUS_ALWAYS_OK']);
  });
});
