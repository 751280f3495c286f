// The renderers against Istio's own golden files (no root needed).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ANNOTATIONS, hostProbeRules, inpodConfigFromPod, inpodRules, sidecarConfigFromPod, sidecarRules, toIptablesRestore,
  toIptablesText, toNft, type InpodConfig, type SidecarPodInput,
} from '../../lib/redirect/index.js';

const FIX = new URL('../fixtures/istio/', import.meta.url);
const read = (rel: string) => readFileSync(new URL(rel, FIX), 'utf8');
// Upstream records the two state-check commands first and joins lines with
// "\n"; the restore input itself ends each line (COMMIT included) with "\n".
const restoreOf = (golden: string) => `${golden.split('\n').slice(2).join('\n')}\n`;
const TEST_V6 = 'e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164';

const INPOD: Record<string, InpodConfig> = {
  default: { dnsCapture: true },
  ingress: { dnsCapture: false, ingressBypass: true },
  virtual_interfaces: { dnsCapture: false, virtualInterfaces: ['fake1s0f0', 'fake1s0f1'] },
  // Global DNS off, pod annotation on: goes through the annotation logic.
  dns_pod_enabled_and_off_globally: inpodConfigFromPod({ dnsCaptureGlobal: false, annotations: { [ANNOTATIONS.dnsCapture]: 'true' } }),
};

describe('in-pod rules match Istio byte for byte', () => {
  for (const [name, cfg] of Object.entries(INPOD)) {
    for (const ipv6 of [false, true]) {
      const file = `${name}${ipv6 ? '_ipv6' : ''}.golden`;
      const model = inpodRules({ ...cfg, ipv6, snatIp: '169.254.7.127', snatIpv6: TEST_V6 });
      it(`iptables ${file}`, () => {
        expect(toIptablesText(model)).toBe(restoreOf(read(`iptables/${file}`)));
      });
      it(`nftables ${file}`, () => {
        expect(toNft(model)).toBe(read(`nftables/${file}`));
      });
    }
  }

  it('splits the dual-stack text into one restore input per family', () => {
    const model = inpodRules({ ipv6: true, snatIpv6: TEST_V6 });
    const v4 = toIptablesRestore(model, 4);
    const v6 = toIptablesRestore(model, 6);
    expect(v4 + v6).toBe(restoreOf(read('iptables/default_ipv6.golden')));
    expect(v4).toBe(restoreOf(read('iptables/default.golden')));
    expect(v4).not.toContain('::1/128');
    expect(v6).not.toContain('127.0.0.1');
    expect(toIptablesRestore(inpodRules({ ipv6: false }), 6)).toBe('');
  });
});

describe('host probe rules match Istio', () => {
  for (const ipv6 of [false, true]) {
    const file = `hostprobe${ipv6 ? '_ipv6' : ''}.golden`;
    it(`iptables ${file}`, () => {
      expect(toIptablesText(hostProbeRules({ ipv6 }))).toBe(restoreOf(read(`iptables/${file}`)));
    });
    it(`nftables ${file}`, () => {
      expect(toNft(hostProbeRules({ ipv6, snatIpv6: TEST_V6, kubeletUid: 1000 }))).toBe(read(`nftables/${file}`));
    });
  }
});

const SIDECAR: Record<string, SidecarPodInput> = {
  basic: {},
  dns: { proxyEnv: { ISTIO_META_DNS_CAPTURE: 'true' } },
  'include-exclude-ip': {
    annotations: { [ANNOTATIONS.includeOutboundIPRanges]: '127.0.0.0/8', [ANNOTATIONS.excludeOutboundIPRanges]: '10.0.0.0/8' },
  },
  'include-exclude-ports': {
    annotations: { [ANNOTATIONS.includeInboundPorts]: '1111,2222', [ANNOTATIONS.excludeOutboundPorts]: '5555,6666' },
  },
  tproxy: { annotations: { [ANNOTATIONS.interceptionMode]: 'TPROXY' } },
};

describe('sidecar rules match the CNI plugin byte for byte', () => {
  for (const [name, input] of Object.entries(SIDECAR)) {
    it(`iptables ${name}.txt.golden`, () => {
      expect(toIptablesText(sidecarRules(sidecarConfigFromPod(input)))).toBe(read(`sidecar/${name}.txt.golden`));
    });
  }
});
