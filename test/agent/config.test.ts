// Every setting's parsing, precedence (flag > env > default) and each validation error by code/setting.
import { describe, expect, it } from 'vitest';
import { ConfigError, describeSettings, parseAgentConfig, selectionPolicy, SETTINGS, type AgentConfig } from '../../lib/agent/config.js';
import { parseGoDuration } from '../../lib/settings/duration.js';
import { decideAmbient, DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/index.js';
import { configError } from '../helpers/config-error.js';

const BASE = { NODE_NAME: 'node-1' };
const parse = (env: Record<string, string | undefined> = {}, argv: string[] = []) => parseAgentConfig({ ...BASE, ...env }, argv);


describe('defaults', () => {
  it('are upstream\'s (chart values for env-only settings)', () => {
    const c = parse();
    const { selectors, enablementSelectors, ...rest } = c;
    expect(selectors.size).toBe(2);
    expect(enablementSelectors).toEqual(DEFAULT_ENABLEMENT_SELECTORS);
    expect(rest).toEqual<Omit<AgentConfig, 'selectors' | 'enablementSelectors'>>({
      nodeName: 'node-1', podName: '', podNamespace: '', systemNamespace: 'istio-system', revision: '',
      ambientEnabled: false, excludeNamespaces: ['kube-system'], dnsCapture: true, ipv6: true,
      reconcilePodRulesOnStartup: true, disableSafeUpgrade: false, hostProbeSnatIp: '169.254.7.127',
      hostProbeSnatIpv6: 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff', ztunnelUdsAddress: '/var/run/ztunnel/ztunnel.sock',
      cniAgentRunDir: '/var/run/istio-cni', nativeNftables: false, forceIptablesBinary: '', useScopedXtablesLocking: true,
      enableAwsBranchEniProbe: true, allowSwitchToHostNs: false, monitoringPort: 15014, logOutputLevel: { default: 'info' },
      logAsJson: true, driftCheckIntervalMs: 60_000, hostProcRoot: '/host/proc', hostMountsRoot: '/host',
      healthPort: 8000, listenAddress: '', nodeReadinessTaint: false, nodeReadinessTaintKey: 'cni.podwire.io/not-ready',
      kubeletUid: null,
    });
  });

  it('empty env values of scalar settings mean the default (viper), of list settings mean none', () => {
    const c = parse({ AMBIENT_IPV6: '', MONITORING_PORT: '', SYSTEM_NAMESPACE: '', EXCLUDE_NAMESPACES: '', AMBIENT_ENABLEMENT_SELECTOR: '' });
    expect(c.ipv6).toBe(true);
    expect(c.monitoringPort).toBe(15014);
    expect(c.systemNamespace).toBe('istio-system');
    expect(c.excludeNamespaces).toEqual([]);
    expect(c.selectors.size).toBe(0);
  });
});

// [env, flag, raw value, field, parsed]
const VALUES: [string, string, string, keyof AgentConfig, unknown][] = [
  ['NODE_NAME', '--node-name', 'worker-7.example', 'nodeName', 'worker-7.example'],
  ['POD_NAME', '--pod-name', 'istio-cni-node-x1', 'podName', 'istio-cni-node-x1'],
  ['POD_NAMESPACE', '--pod-namespace', 'istio-cni', 'podNamespace', 'istio-cni'],
  ['SYSTEM_NAMESPACE', '--system-namespace', 'mesh', 'systemNamespace', 'mesh'],
  ['REVISION', '--revision', '1-27', 'revision', '1-27'],
  ['AMBIENT_ENABLED', '--ambient-enabled', 'true', 'ambientEnabled', true],
  ['EXCLUDE_NAMESPACES', '--exclude-namespaces', 'kube-system, istio-system,,kube-system', 'excludeNamespaces', ['kube-system', 'istio-system']],
  ['AMBIENT_DNS_CAPTURE', '--ambient-dns-capture', 'false', 'dnsCapture', false],
  ['AMBIENT_IPV6', '--ambient-ipv6', 'F', 'ipv6', false],
  ['AMBIENT_RECONCILE_POD_RULES_ON_STARTUP', '--ambient-reconcile-pod-rules-on-startup', '0', 'reconcilePodRulesOnStartup', false],
  ['AMBIENT_DISABLE_SAFE_UPGRADE', '--ambient-disable-safe-upgrade', 'True', 'disableSafeUpgrade', true],
  ['HOST_PROBE_SNAT_IP', '--host-probe-snat-ip', '169.254.1.2', 'hostProbeSnatIp', '169.254.1.2'],
  ['HOST_PROBE_SNAT_IPV6', '--host-probe-snat-ipv6', 'fd00::1', 'hostProbeSnatIpv6', 'fd00::1'],
  ['ZTUNNEL_UDS_ADDRESS', '--ztunnel-uds-address', '/run/zt/zds.sock', 'ztunnelUdsAddress', '/run/zt/zds.sock'],
  ['CNI_AGENT_RUN_DIR', '--cni-agent-run-dir', '/run/podwire/', 'cniAgentRunDir', '/run/podwire'],
  ['NATIVE_NFTABLES', '--native-nftables', '1', 'nativeNftables', true],
  ['FORCE_IPTABLES_BINARY', '--force-iptables-binary', 'legacy', 'forceIptablesBinary', 'legacy'],
  ['AMBIENT_USE_SCOPED_XTABLES_LOCKING', '--ambient-use-scoped-xtables-locking', 'false', 'useScopedXtablesLocking', false],
  ['AMBIENT_ENABLE_AWS_BRANCH_ENI_PROBE', '--ambient-enable-aws-branch-eni-probe', 'FALSE', 'enableAwsBranchEniProbe', false],
  ['ALLOW_SWITCH_TO_HOST_NS', '--allow-switch-to-host-ns', 't', 'allowSwitchToHostNs', true],
  ['MONITORING_PORT', '--monitoring-port', '9090', 'monitoringPort', 9090],
  ['AMBIENT_DRIFT_CHECK_INTERVAL', '--ambient-drift-check-interval', '1m30s', 'driftCheckIntervalMs', 90_000],
  ['HOST_PROC_ROOT', '--host-proc-root', '/proc', 'hostProcRoot', '/proc'],
  ['HOST_MOUNTS_ROOT', '--host-mounts-root', '/', 'hostMountsRoot', '/'],
  ['KUBELET_UID', '--kubelet-uid', '0', 'kubeletUid', 0],
  ['HEALTH_PORT', '--health-port', '18000', 'healthPort', 18000],
  ['AGENT_LISTEN_ADDRESS', '--listen-address', '127.0.0.1', 'listenAddress', '127.0.0.1'],
  ['NODE_READINESS_TAINT', '--node-readiness-taint', 'true', 'nodeReadinessTaint', true],
  ['NODE_READINESS_TAINT_KEY', '--node-readiness-taint-key', 'example.com/mesh-not-ready', 'nodeReadinessTaintKey', 'example.com/mesh-not-ready'],
];

describe('each setting from env and from its flag', () => {
  it.each(VALUES)('%s', (env, flag, raw, field, parsed) => {
    expect(parse({ [env]: raw })[field]).toEqual(parsed);
    expect(parse({}, [`${flag}=${raw}`])[field]).toEqual(parsed);
  });

  it.each(VALUES.filter((v) => v[0] !== 'NODE_NAME'))('%s: the flag wins over the env', (env, flag, raw, field, parsed) => {
    const def = SETTINGS.find((s) => s.env === env)!.default;
    const defaults = parse()[field];
    expect(defaults).not.toEqual(parsed);
    expect(parse({ [env]: raw }, [`${flag}=${def}`])[field]).toEqual(defaults);
  });

  it('table covers every env setting under test', () => {
    const tested = new Set(VALUES.map((v) => v[0]));
    expect(SETTINGS.filter((s) => s.env && s.env !== 'AMBIENT_ENABLEMENT_SELECTOR' && !tested.has(s.env)).map((s) => s.env)).toEqual([]);
  });
});

describe('flag syntax', () => {
  it('takes a value in the next argument, and the last occurrence wins', () => {
    expect(parse({}, ['--monitoring-port', '1234']).monitoringPort).toBe(1234);
    expect(parse({}, ['--monitoring-port=1', '--monitoring-port=2']).monitoringPort).toBe(2);
  });
  it('a bare boolean flag means true; --flag=false turns it off', () => {
    expect(parse({}, ['--ambient-enabled']).ambientEnabled).toBe(true);
    expect(parse({ AMBIENT_IPV6: 'true' }, ['--ambient-ipv6=false']).ipv6).toBe(false);
  });
  it('a boolean flag does not swallow the next argument', () => {
    expect(configError(() => parse({}, ['--native-nftables', 'false'])).setting).toBe('false');
  });
  it('--node-name satisfies the NODE_NAME requirement', () => {
    expect(parseAgentConfig({}, ['--node-name', 'n2']).nodeName).toBe('n2');
  });
  it('Istio\'s logging flags', () => {
    expect(parse({}, ['--log_output_level=cni-agent:debug,cni-plugin:info,warn', '--log_as_json']))
      .toMatchObject({ logOutputLevel: { 'cni-agent': 'debug', 'cni-plugin': 'info', default: 'warn' }, logAsJson: true });
    expect(parse({}, ['--log_output_level=']).logOutputLevel).toEqual({});
    expect(parse({}, ['--log-level=debug']).logOutputLevel).toEqual({ default: 'debug' });
    expect(parse({}, ['--log_as_json=false']).logAsJson).toBe(false);
  });
  const bad: [string, string[], string][] = [
    ['unknown flag', ['--bogus=1'], '--bogus'],
    ['unknown flag without value', ['--help'], '--help'],
    ['positional argument', ['agent'], 'agent'],
    ['single dash', ['-monitoring-port=1'], '-monitoring-port=1'],
    ['bare --', ['--'], '--'],
    ['missing value', ['--monitoring-port'], '--monitoring-port'],
    ['env-only logging flag is not an env', ['--log-output-level=info'], '--log-output-level'],
  ];
  it.each(bad)('rejects %s', (_name, argv, setting) => {
    expect(configError(() => parse({}, argv)).setting).toBe(setting);
  });
});

describe('AMBIENT_ENABLEMENT_SELECTOR', () => {
  const yaml = [
    '- podSelector:',
    '    matchLabels: {app: web}',
    '  namespaceSelector:',
    '    matchExpressions:',
    '    - key: team',
    '      operator: In',
    '      values: [a, b]',
  ].join('\n');
  it('reads the chart\'s YAML', () => {
    const c = parse({ AMBIENT_ENABLEMENT_SELECTOR: yaml });
    expect(c.selectors.size).toBe(1);
    expect(c.selectors.match({ app: 'web' }, { team: 'b' })).toBe(0);
    expect(c.selectors.match({ app: 'web' }, { team: 'c' })).toBe(-1);
  });
  it('reads JSON, and the same value from the flag', () => {
    const json = '[{"podSelector":{"matchLabels":{"x":"y"}}}]';
    expect(parse({}, [`--ambient-enablement-selector=${json}`]).selectors.match({ x: 'y' }, {})).toBe(0);
  });
  it.each(['[]', 'null', '~', '  '])('%j selects nothing', (raw) => {
    expect(parse({ AMBIENT_ENABLEMENT_SELECTOR: raw }).selectors.size).toBe(0);
  });
  it.each([
    ['not YAML', 'a: [b'],
    ['a mapping', 'podSelector: {}'],
    ['a scalar', 'ambient'],
    ['false', 'false'],
    ['a bad operator', '- podSelector: {matchExpressions: [{key: a, operator: Equals, values: [b]}]}'],
    ['a typo in a field', '- podSelector: {matchLabel: {a: b}}'],
    ['a non-string label value', '- podSelector: {matchLabels: {a: 1}}'],
    ['duplicate keys', '- podSelector: {}\n  podSelector: {}'],
  ])('rejects %s', (_name, raw) => {
    expect(configError(() => parse({ AMBIENT_ENABLEMENT_SELECTOR: raw }))).toMatchObject({ setting: 'AMBIENT_ENABLEMENT_SELECTOR', value: raw });
    expect(configError(() => parse({}, ['--ambient-enablement-selector', raw])).setting).toBe('--ambient-enablement-selector');
  });
});

describe('validation errors name the setting and the value', () => {
  const bad: [string, string][] = [
    ['NODE_NAME', 'Node_1'],
    ['POD_NAME', 'has space'],
    ['POD_NAMESPACE', 'a.b'],
    ['SYSTEM_NAMESPACE', 'X'],
    ['AMBIENT_ENABLED', 'yes'],
    ['AMBIENT_DNS_CAPTURE', 'on'],
    ['AMBIENT_IPV6', 'yes'],
    ['AMBIENT_RECONCILE_POD_RULES_ON_STARTUP', '2'],
    ['AMBIENT_DISABLE_SAFE_UPGRADE', 'tRuE'],
    ['NATIVE_NFTABLES', ' true'],
    ['AMBIENT_USE_SCOPED_XTABLES_LOCKING', 'no'],
    ['AMBIENT_ENABLE_AWS_BRANCH_ENI_PROBE', 'off'],
    ['ALLOW_SWITCH_TO_HOST_NS', 'y'],
    ['HOST_PROBE_SNAT_IP', 'fd00::1'],
    ['HOST_PROBE_SNAT_IP', '169.254.7.256'],
    ['HOST_PROBE_SNAT_IPV6', '169.254.7.127'],
    ['ZTUNNEL_UDS_ADDRESS', 'ztunnel.sock'],
    ['ZTUNNEL_UDS_ADDRESS', `/${'z'.repeat(107)}`],
    ['CNI_AGENT_RUN_DIR', 'var/run/istio-cni'],
    ['CNI_AGENT_RUN_DIR', `/${'d'.repeat(90)}`],
    ['FORCE_IPTABLES_BINARY', 'iptables-nft'],
    ['MONITORING_PORT', '0'],
    ['MONITORING_PORT', '65536'],
    ['MONITORING_PORT', '15014.0'],
    ['MONITORING_PORT', '-1'],
    ['AMBIENT_DRIFT_CHECK_INTERVAL', '60'],
    ['AMBIENT_DRIFT_CHECK_INTERVAL', '500ms'],
    ['AMBIENT_DRIFT_CHECK_INTERVAL', '-1m'],
    ['AMBIENT_DRIFT_CHECK_INTERVAL', '1d'],
    ['HOST_PROC_ROOT', 'host/proc'],
    ['HOST_PROC_ROOT', '/host/\0proc'],
    ['HOST_MOUNTS_ROOT', 'host'],
    ['KUBELET_UID', 'root'],
    ['KUBELET_UID', '-1'],
    ['KUBELET_UID', '4294967295'],
    ['KUBELET_UID', '01'],
    ['KUBELET_UID', ' 0'],
    ['HEALTH_PORT', '0'],
    ['AGENT_LISTEN_ADDRESS', 'localhost'],
    ['NODE_READINESS_TAINT_KEY', 'bad key'],
    ['NODE_READINESS_TAINT_KEY', 'Bad_Prefix/key'],
  ];
  it.each(bad)('%s=%j', (env, raw) => {
    expect(configError(() => parse({ [env]: raw }))).toMatchObject({ setting: env, value: raw });
  });

  it.each(bad)('--flag for %s=%j', (env, raw) => {
    const flag = SETTINGS.find((s) => s.env === env)!.flag;
    expect(configError(() => parse({}, [`${flag}=${raw}`]))).toMatchObject({ setting: flag, value: raw });
  });

  it.each([
    ['--log_output_level', 'verbose'],
    ['--log_output_level', 'cni-agent:loud'],
    ['--log_output_level', ':debug'],
    ['--log_as_json', 'maybe'],
  ])('%s=%j', (flag, raw) => {
    expect(configError(() => parse({}, [`${flag}=${raw}`]))).toMatchObject({ setting: flag, value: raw });
  });

  it('NODE_NAME is required (unset or empty)', () => {
    expect(configError(() => parseAgentConfig({})).setting).toBe('NODE_NAME');
    expect(configError(() => parseAgentConfig({ NODE_NAME: '' })).setting).toBe('NODE_NAME');
    expect(configError(() => parseAgentConfig({ NODE_NAME: 'n' }, ['--node-name='])).setting).toBe('--node-name');
  });

  it('drift check 0 turns it off; 1s is the minimum', () => {
    expect(parse({ AMBIENT_DRIFT_CHECK_INTERVAL: '0' }).driftCheckIntervalMs).toBe(0);
    expect(parse({ AMBIENT_DRIFT_CHECK_INTERVAL: '1s' }).driftCheckIntervalMs).toBe(1000);
  });

  it('the message names the setting and the value', () => {
    const e = configError(() => parse({ MONITORING_PORT: 'abc' }));
    expect(e.message).toContain('MONITORING_PORT');
    expect(e.message).toContain('abc');
  });

  it('env of flag-only settings is not read', () => {
    expect(parse({ LOG_OUTPUT_LEVEL: 'bogus', LOG_AS_JSON: 'bogus' }).logAsJson).toBe(true);
  });
});

describe('parseGoDuration', () => {
  it.each([
    ['0', 0], ['1s', 1000], ['1m30s', 90_000], ['1.5h', 5_400_000], ['250ms', 250], ['+2m', 120_000],
    ['-1s', -1000], ['1h1m1s1ms', 3_661_001], ['.5s', 500], ['1000us', 1], ['2000000ns', 2], ['3µs', 0.003],
  ])('%s', (text, ms) => {
    expect(parseGoDuration(text)).toBeCloseTo(ms as number, 9);
  });
  it.each(['', '60', '1', 's', '1d', '1s 2s', '1S', '--1s', '1.5'])('rejects %j', (text) => {
    expect(() => parseGoDuration(text)).toThrow(RangeError);
  });
});

describe('describeSettings', () => {
  const d = describeSettings();
  it('lists every setting once with a flag, a default and a meaning', () => {
    expect(d).toHaveLength(SETTINGS.length);
    expect(new Set(d.map((s) => s.flag)).size).toBe(d.length);
    for (const s of d) {
      expect(s.flag).toMatch(/^--[a-z0-9_-]+$/);
      expect(typeof s.default).toBe('string');
      expect(s.description.length).toBeGreaterThan(10);
    }
  });
  it('keeps Istio\'s flag spellings and marks podwire\'s own settings', () => {
    const byEnv = new Map(d.map((s) => [s.env, s]));
    expect(byEnv.get('ZTUNNEL_UDS_ADDRESS')!.flag).toBe('--ztunnel-uds-address');
    expect(byEnv.get('CNI_AGENT_RUN_DIR')!.flag).toBe('--cni-agent-run-dir');
    expect(byEnv.get('MONITORING_PORT')!.flag).toBe('--monitoring-port');
    expect(byEnv.get('AMBIENT_DRIFT_CHECK_INTERVAL')).toMatchObject({ podwire: true, default: '1m' });
    expect(byEnv.get('HOST_PROC_ROOT')).toMatchObject({ podwire: true, default: '/host/proc' });
    expect(d.filter((s) => s.podwire).map((s) => s.env)).toEqual(['AMBIENT_DRIFT_CHECK_INTERVAL', 'HOST_PROC_ROOT', 'KUBELET_UID', 'HOST_MOUNTS_ROOT', 'HEALTH_PORT', 'NODE_READINESS_TAINT', 'NODE_READINESS_TAINT_KEY', 'AGENT_LISTEN_ADDRESS']);
    expect(byEnv.get('AMBIENT_IPV6')).toMatchObject({ default: 'true', upstreamDefault: 'false' });
  });
  it('every default in the table parses', () => {
    for (const s of SETTINGS.filter((x) => x.env !== 'NODE_NAME')) expect(() => s.parse(s.default)).not.toThrow();
  });
});

describe('selectionPolicy', () => {
  it('carries exclusions, namespaces and selectors into the decision', () => {
    const p = selectionPolicy(parse({ EXCLUDE_NAMESPACES: 'skip', POD_NAMESPACE: 'istio-cni', SYSTEM_NAMESPACE: 'mesh' }));
    const amb = { 'istio.io/dataplane-mode': 'ambient' };
    const ns = (name: string) => ({ metadata: { name, labels: amb } });
    expect(decideAmbient({ metadata: { name: 'a', namespace: 'skip' } }, ns('skip'), p).reason).toBe('namespace-excluded');
    expect(decideAmbient({ metadata: { name: 'z', namespace: 'mesh', labels: { app: 'ztunnel' } } }, ns('mesh'), p).reason).toBe('ztunnel-pod');
    expect(decideAmbient({ metadata: { name: 'istio-cni-node-q', namespace: 'istio-cni' } }, ns('istio-cni'), p).reason).toBe('agent-pod');
    expect(decideAmbient({ metadata: { name: 'a', namespace: 'apps' } }, ns('apps'), p).reason).toBe('selected');
  });
});
