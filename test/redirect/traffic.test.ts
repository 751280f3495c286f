// The proof: real TCP/UDP between a node netns and a pod netns (v4 and v6),
// through the rules the engine programs, for both backends. Listeners in the
// pod behave like ztunnel (15001, 15006, 15008, 15053; marked 0x539) and say
// where each connection was headed; probes run inside the namespaces.
import { describe, expect, it } from 'vitest';
import { iptables } from '../../lib/net/xtables/iptables.js';
import { nft } from '../../lib/net/nft/tool.js';
import { apply, hostProbeRules, inpodRules, sidecarRules, verify, type Backend } from '../../lib/redirect/index.js';
import { privileged } from '../helpers/privileged.js';
import {
  CLIENT4, CLIENT6, NODE4, NODE6, POD4, POD6, listen, probe, tcp, topology, udp, ztunnelSpecs, type Listeners, type Reply,
} from '../helpers/traffic.js';

const BACKENDS: Backend[] = ['nftables', 'iptables'];
const MARK = 0x539;
const SNAT4 = '169.254.7.127';
const SNAT6 = 'fd16:9254:7127:1337:ffff:ffff:ffff:ffff';
const at = (host: string, port: number) => (host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`);

/** A reply from `name` on `port`; with `orig`, the recovered original destination. */
const landed = (name: string, port: number, extra: Partial<Reply> = {}) => expect.objectContaining({ name, port, ...extra });

async function withListeners(sets: Array<Promise<Listeners>>, fn: () => Promise<void>): Promise<void> {
  const open = await Promise.allSettled(sets);
  try {
    for (const o of open) if (o.status === 'rejected') throw o.reason;
    await fn();
  } finally {
    for (const o of open) if (o.status === 'fulfilled') o.value.close();
  }
}

const nodeServers = (ns: Parameters<typeof listen>[0]) => listen(ns, [
  { name: 'node', port: 8080 }, { name: 'node-dns', port: 53, udp: true },
]);

describe.skipIf(!privileged('nft', 'iptables-restore', 'ip6tables-restore', 'python3'))('redirection with real traffic', () => {
  for (const backend of BACKENDS) {
    describe(backend, () => {
      it('in-pod: outbound → 15001 (original dst kept), inbound → 15006, 15008 direct, DNS → 15053, 0x539 untouched; drift leaks and apply repairs it', async () => {
        const { node, pod } = await topology();
        const model = inpodRules({ ipv6: true });
        expect((await apply(pod, model, { backend })).changed).toBe(true);
        expect((await apply(pod, model, { backend })).changed).toBe(false);
        await withListeners([listen(pod, [...ztunnelSpecs(), { name: 'app', port: 8080 }]), nodeServers(node)], async () => {
          const [out, marked, inbound] = await Promise.all([
            probe(pod, [tcp(NODE4, 8080), tcp(NODE6, 8080), tcp('10.99.0.9', 443), tcp(NODE4, 53), tcp(NODE6, 53), udp(NODE4, 53), udp(NODE6, 53)]),
            probe(pod, [tcp(NODE4, 8080, MARK), tcp(NODE6, 8080, MARK), udp(NODE4, 53, MARK), udp(NODE6, 53, MARK)]),
            probe(node, [tcp(POD4, 8080), tcp(POD6, 8080), tcp(POD4, 15008), tcp(POD6, 15008)]),
          ]);
          expect(out).toEqual([
            landed('ztunnel', 15001, { orig: at(NODE4, 8080), redirected: true }),
            landed('ztunnel', 15001, { orig: at(NODE6, 8080), redirected: true }),
            landed('ztunnel', 15001, { orig: at('10.99.0.9', 443), redirected: true }),
            landed('ztunnel-dns', 15053, { orig: at(NODE4, 53), redirected: true }),
            landed('ztunnel-dns', 15053, { orig: at(NODE6, 53), redirected: true }),
            landed('ztunnel-dns', 15053), landed('ztunnel-dns', 15053),
          ]);
          expect(marked).toEqual([
            landed('node', 8080, { peer: POD4 }), landed('node', 8080, { peer: POD6 }), landed('node-dns', 53), landed('node-dns', 53),
          ]);
          expect(inbound).toEqual([
            landed('ztunnel', 15006, { orig: at(POD4, 8080), redirected: true, peer: NODE4 }),
            landed('ztunnel', 15006, { orig: at(POD6, 8080), redirected: true, peer: NODE6 }),
            landed('ztunnel', 15008, { orig: at(POD4, 15008), redirected: false }),
            landed('ztunnel', 15008, { orig: at(POD6, 15008), redirected: false }),
          ]);

          // Drift by hand: the v4 outbound capture rule deleted, a foreign rule added to our chain.
          if (backend === 'iptables') {
            await iptables.run(pod, ['-t', 'nat', '-D', 'ISTIO_OUTPUT', '!', '-d', '127.0.0.1/32', '-p', 'tcp', '-m', 'mark', '!', '--mark', '0x539/0xfff', '-j', 'REDIRECT', '--to-ports', '15001']);
            await iptables.run(pod, ['-t', 'nat', '-I', 'ISTIO_OUTPUT', '1', '-p', 'tcp', '--dport', '9999', '-j', 'ACCEPT']);
          } else {
            const chain = (await nft.list(pod)).tables.find((t) => t.name === 'istio-ambient-nat')!.chains.find((c) => c.name === 'istio-output')!;
            const victim = chain.rules.find((r) => { const j = JSON.stringify(r.expr); return j.includes('15001') && j.includes('"ip"'); })!;
            await nft.apply(pod, `delete rule inet istio-ambient-nat istio-output handle ${victim.handle}\ninsert rule inet istio-ambient-nat istio-output tcp dport 9999 accept\n`);
          }
          const leaked = await probe(pod, [tcp(NODE4, 8080), tcp(NODE6, 8080)]);
          expect(leaked).toEqual([landed('node', 8080), landed('ztunnel', 15001)]);
          const report = await verify(pod, model, { backend });
          expect(report.ok).toBe(false);
          expect(report.drift.filter((d) => d.startsWith('missing rule:'))).toHaveLength(1);
          expect(report.drift.filter((d) => d.startsWith('foreign rule:') && d.includes('9999'))).toHaveLength(1);
          expect(report.drift).toHaveLength(2);
          expect((await apply(pod, model, { backend })).changed).toBe(true);
          expect(await verify(pod, model, { backend })).toEqual({ ok: true, drift: [] });
          expect(await probe(pod, [tcp(NODE4, 8080), tcp(NODE6, 8080)])).toEqual([
            landed('ztunnel', 15001, { orig: at(NODE4, 8080) }), landed('ztunnel', 15001, { orig: at(NODE6, 8080) }),
          ]);
        });
      });

      it('in-pod without DNS capture and with ingress bypass: DNS and inbound untouched', async () => {
        const { node, pod } = await topology();
        await apply(pod, inpodRules({ ipv6: true, dnsCapture: false, ingressBypass: true }), { backend });
        await withListeners([listen(pod, [...ztunnelSpecs(), { name: 'app', port: 8080 }]), nodeServers(node)], async () => {
          const [out, inbound] = await Promise.all([
            probe(pod, [udp(NODE4, 53), udp(NODE6, 53), tcp(NODE4, 53), tcp(NODE6, 8080)]),
            probe(node, [tcp(POD4, 8080), tcp(POD6, 8080)]),
          ]);
          expect(out).toEqual([
            landed('node-dns', 53), landed('node-dns', 53),
            // TCP to :53 is ordinary outbound now.
            landed('ztunnel', 15001, { orig: at(NODE4, 53) }), landed('ztunnel', 15001, { orig: at(NODE6, 8080) }),
          ]);
          expect(inbound).toEqual([
            landed('app', 8080, { redirected: false, peer: NODE4 }), landed('app', 8080, { redirected: false, peer: NODE6 }),
          ]);
        });
      });

      it('host probe: node-local connections leave SNATed and skip ztunnel; forwarded ones are captured', async () => {
        const { node, pod, client } = await topology({ client: true });
        await apply(pod, inpodRules({ ipv6: true }), { backend });
        const host = hostProbeRules({ ipv6: true, ...(backend === 'nftables' ? { kubeletUid: 0 } : {}) });
        if (backend === 'iptables') {
          const nl = await node.netlink();
          await nl.ipset.create('istio-inpod-probes-v4', { type: 'hash:ip', family: 4, comment: true });
          await nl.ipset.create('istio-inpod-probes-v6', { type: 'hash:ip', family: 6, comment: true });
          await nl.ipset.add('istio-inpod-probes-v4', POD4);
          await nl.ipset.add('istio-inpod-probes-v6', POD6);
          await apply(node, host, { backend });
        } else {
          await apply(node, host, { backend });
          await nft.apply(node, `add element inet istio-ambient-nat istio-inpod-probes-v4 { ${POD4} }\nadd element inet istio-ambient-nat istio-inpod-probes-v6 { ${POD6} }\n`);
        }
        expect(await verify(node, host, { backend })).toEqual({ ok: true, drift: [] });
        await withListeners([listen(pod, [...ztunnelSpecs(), { name: 'app', port: 8080 }])], async () => {
          const [local, forwarded] = await Promise.all([
            probe(node, [tcp(POD4, 8080), tcp(POD6, 8080)]),
            probe(client!, [tcp(POD4, 8080), tcp(POD6, 8080)]),
          ]);
          expect(local).toEqual([
            landed('app', 8080, { orig: at(POD4, 8080), redirected: false, peer: SNAT4 }),
            landed('app', 8080, { orig: at(POD6, 8080), redirected: false, peer: SNAT6 }),
          ]);
          expect(forwarded).toEqual([
            landed('ztunnel', 15006, { orig: at(POD4, 8080), peer: CLIENT4 }),
            landed('ztunnel', 15006, { orig: at(POD6, 8080), peer: CLIENT6 }),
          ]);
        });
      });

      it('sidecar REDIRECT: outbound → 15001, inbound → 15006; excluded CIDR, port and proxy UID pass', async () => {
        const { node, pod } = await topology();
        const model = sidecarRules({ ipv6: true, excludeOutboundCidrs: [`${NODE4}/32`], excludeInboundPorts: [8080, 15020, 15021, 15090] });
        await apply(pod, model, { backend });
        expect(await verify(pod, model, { backend })).toEqual({ ok: true, drift: [] });
        const proxy = [{ name: 'envoy', port: 15001 }, { name: 'envoy', port: 15006 }, { name: 'app', port: 8080 }];
        await withListeners([listen(pod, proxy), nodeServers(node)], async () => {
          const [out, asProxy, inbound] = await Promise.all([
            probe(pod, [tcp(NODE4, 8080), tcp(NODE6, 8080), tcp('10.99.0.9', 80)]),
            probe(pod, [tcp(NODE6, 8080)], { uid: 1337 }),
            probe(node, [tcp(POD4, 9090), tcp(POD6, 9090), tcp(POD4, 8080)]),
          ]);
          expect(out).toEqual([
            landed('node', 8080),
            landed('envoy', 15001, { orig: at(NODE6, 8080), redirected: true }),
            landed('envoy', 15001, { orig: at('10.99.0.9', 80), redirected: true }),
          ]);
          expect(asProxy).toEqual([landed('node', 8080, { peer: POD6 })]);
          expect(inbound).toEqual([
            landed('envoy', 15006, { orig: at(POD4, 9090), redirected: true }),
            landed('envoy', 15006, { orig: at(POD6, 9090), redirected: true }),
            landed('app', 8080, { redirected: false }),
          ]);
        });
      });

      it('sidecar TPROXY: inbound reaches a transparent 15006 with its destination intact; excluded port passes', async () => {
        const { node, pod } = await topology();
        const model = sidecarRules({ ipv6: true, mode: 'TPROXY', excludeInboundPorts: [8080, 15020, 15021, 15090] });
        await apply(pod, model, { backend });
        expect(await verify(pod, model, { backend })).toEqual({ ok: true, drift: [] });
        const proxy = [{ name: 'envoy', port: 15001 }, { name: 'envoy', port: 15006, transparent: true }, { name: 'app', port: 8080 }];
        await withListeners([listen(pod, proxy), nodeServers(node)], async () => {
          const [out, inbound] = await Promise.all([
            probe(pod, [tcp(NODE4, 8080), tcp(NODE6, 8080)]),
            probe(node, [tcp(POD4, 9090), tcp(POD6, 9090), tcp(POD4, 8080), tcp(POD6, 8080)]),
          ]);
          expect(out).toEqual([
            landed('envoy', 15001, { orig: at(NODE4, 8080), redirected: true }),
            landed('envoy', 15001, { orig: at(NODE6, 8080), redirected: true }),
          ]);
          expect(inbound).toEqual([
            landed('envoy', 15006, { orig: at(POD4, 9090), redirected: false, peer: NODE4 }),
            landed('envoy', 15006, { orig: at(POD6, 9090), redirected: false, peer: NODE6 }),
            landed('app', 8080, { redirected: false }), landed('app', 8080, { redirected: false }),
          ]);
        });
      });
    });
  }
});
