// FORCE_IPTABLES_BINARY reaches the rules: with iptablesMode 'legacy' the
// host probe rule and a pod's rules go into the legacy tables and none into
// iptables-nft's, and the other way round.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { NodeDataplane } from '../../lib/dataplane/node.js';
import { FakeZtunnel } from './fakes.js';
import { freshNetns } from '../helpers/netns.js';
import { privileged } from '../helpers/privileged.js';

const save = (ns: string, bin: string) => execFileSync('ip', ['netns', 'exec', ns, bin, '-t', 'nat'], { encoding: 'utf8' });

describe.skipIf(!privileged('iptables-legacy-save', 'iptables-nft-save', 'ipset'))('NodeDataplane iptablesMode', () => {
  it.each([['legacy', 'iptables-legacy-save', 'iptables-nft-save'], ['nft', 'iptables-nft-save', 'iptables-legacy-save']] as const)(
    '%s: host and pod rules in that variant only', async (mode, used, unused) => {
      const host = await freshNetns({ loUp: true });
      const pod = await freshNetns({ loUp: true });
      const node = await NodeDataplane.start({ host, backend: 'iptables', iptablesMode: mode, ztunnel: new FakeZtunnel(), ipv6: false });
      try {
        await node.dataplane.enroll({ uid: 'u1', name: 'p', namespace: 'n', ips: ['10.3.0.2'] }, { netnsPath: pod.path });
        expect(save(host.name, used)).toContain('ISTIO_POSTRT');
        expect(save(host.name, unused)).not.toContain('ISTIO_');
        expect(save(pod.name, used)).toContain('ISTIO_OUTPUT');
        expect(save(pod.name, unused)).not.toContain('ISTIO_');
        await node.uninstall();
        expect(save(host.name, used)).not.toContain('ISTIO_');
      } finally {
        await node.close();
      }
    });
});
