// `podwire rules render` in-process against the goldens.
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { runCli } from '../helpers/cli.js';

const FIX = new URL('../fixtures/istio/', import.meta.url);
const read = (rel: string) => readFileSync(new URL(rel, FIX), 'utf8');

const run = runCli;

afterEach(() => vi.restoreAllMocks());

describe('podwire rules render', () => {
  it('prints the dual-stack iptables input (v4 then v6) exactly', async () => {
    const r = await run('rules', 'render', '--kind', 'inpod', '--backend', 'iptables', '--ipv6',
      '--snat-ipv6', 'e9ac:1e77:90ca:399f:4d6d:ece2:2f9b:3164');
    expect(r.code).toBe(0);
    expect(r.out).toBe(`${read('iptables/default_ipv6.golden').split('\n').slice(2).join('\n')}\n`);
  });

  it('prints the nft script with --no-dns-capture --virtual-interfaces', async () => {
    const r = await run('rules', 'render', '--kind=inpod', '--backend=nftables', '--no-dns-capture', '--virtual-interfaces', 'fake1s0f0,fake1s0f1');
    expect(r.code).toBe(0);
    expect(r.out).toBe(read('nftables/virtual_interfaces.golden'));
  });

  it('pod annotations override the node flags (ingress via annotation, dns forced on)', async () => {
    const r = await run('rules', 'render', '--kind', 'inpod', '--backend', 'nftables', '--no-dns-capture',
      '--annotation', 'ambient.istio.io/dns-capture=true');
    expect(r.out).toBe(read('nftables/dns_pod_enabled_and_off_globally.golden'));
    const i = await run('rules', 'render', '--kind', 'inpod', '--backend', 'iptables', '--no-dns-capture', '--ingress-bypass');
    expect(i.out).toBe(`${read('iptables/ingress.golden').split('\n').slice(2).join('\n')}\n`);
  });

  it('renders sidecar and host probe rule sets', async () => {
    const s = await run('rules', 'render', '--kind', 'sidecar', '--backend', 'iptables', '--annotation', 'sidecar.istio.io/interceptionMode=TPROXY');
    expect(s.out).toBe(read('sidecar/tproxy.txt.golden'));
    const d = await run('rules', 'render', '--kind', 'sidecar', '--backend', 'iptables', '--proxy-env', 'ISTIO_META_DNS_CAPTURE=true');
    expect(d.out).toBe(read('sidecar/dns.txt.golden'));
    const h = await run('rules', 'render', '--kind', 'hostprobe', '--backend', 'nftables', '--kubelet-uid', '1000');
    expect(h.out).toBe(read('nftables/hostprobe.golden'));
  });

  it('fails clearly on bad input and on a missing --netns', async () => {
    expect((await run('rules', 'render', '--kind', 'pod', '--backend', 'iptables')).code).toBe(2);
    expect((await run('rules', 'render', '--kind', 'inpod', '--backend', 'ebpf')).code).toBe(2);
    const bad = await run('rules', 'render', '--kind', 'sidecar', '--backend', 'iptables', '--annotation', 'traffic.sidecar.istio.io/excludeOutboundPorts=70000');
    expect(bad.code).toBe(1);
    expect(bad.err).toContain('excludeOutboundPorts');
    expect(bad.out).toBe('');
    const apply = await run('rules', 'apply', '--kind', 'inpod', '--backend', 'nftables');
    expect(apply.code).toBe(2);
    expect(apply.err).toContain('--netns');
  });
});
