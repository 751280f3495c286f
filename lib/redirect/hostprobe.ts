// The host (node netns) rule, spec §6.3 / §7: connections that a local
// process (kubelet) opens to an enrolled pod's IP leave SNATed to the host
// probe address, which the in-pod rules let past ztunnel. Forwarded traffic
// has no local socket and stays captured.
import { DEFAULT_HOST_PROBE_SNAT_IP, DEFAULT_HOST_PROBE_SNAT_IPV6, PROBE_IPSET, type Family, type Rule, type RuleModel } from './model.js';
import { hostTables } from './tables.js';
import { checkAddress, checkBool, checkId } from './validate.js';

export interface HostProbeConfig {
  /** Also the IPv6 rule (AMBIENT_IPV6). Default false. */
  ipv6?: boolean;
  /** HOST_PROBE_SNAT_IP. */
  snatIp?: string;
  /** HOST_PROBE_SNAT_IPV6. */
  snatIpv6?: string;
  /** The kubelet's UID: nft has no `--socket-exists`, so Istio's nft rule matches it instead. */
  kubeletUid?: number;
  /** Base name of the probe sets (`-v4`/`-v6` appended). */
  ipsetName?: string;
}

export function hostProbeRules(config: HostProbeConfig = {}): RuleModel {
  if (config === null || typeof config !== 'object') throw new TypeError('host probe config must be an object');
  const ipv6 = checkBool(config.ipv6, 'ipv6') ?? false;
  const snat = {
    4: checkAddress(config.snatIp ?? DEFAULT_HOST_PROBE_SNAT_IP, 4, 'snatIp'),
    6: checkAddress(config.snatIpv6 ?? DEFAULT_HOST_PROBE_SNAT_IPV6, 6, 'snatIpv6'),
  };
  const kubeletUid = config.kubeletUid === undefined ? undefined : Number(checkId(config.kubeletUid, 'kubeletUid'));
  const base = config.ipsetName ?? PROBE_IPSET;
  if (typeof base !== 'string' || !/^[A-Za-z0-9_.:-]{1,28}$/.test(base)) throw new TypeError(`ipsetName: ${JSON.stringify(base)} is not a valid set name`);

  const families: Family[] = ipv6 ? [4, 6] : [4];
  const rules: Rule[] = [{ table: 'nat', chain: 'POSTROUTING', family: 'any', insert: 1, matches: [], target: { kind: 'jump', chain: 'ISTIO_POSTRT' } }];
  for (const fam of families) {
    rules.push({
      table: 'nat', chain: 'ISTIO_POSTRT', family: fam,
      matches: [
        kubeletUid === undefined ? { kind: 'local-socket' } : { kind: 'local-socket', nftUid: kubeletUid },
        { kind: 'proto', proto: 'tcp' },
        { kind: 'set', dir: 'dst', name: `${base}-v${fam}` },
      ],
      target: { kind: 'snat', to: snat[fam] },
      nft: { order: [1, 0, 2] },
    });
  }
  return { kind: 'hostprobe', families, tables: hostTables(), rules, routes: [], policyRules: [], addresses: [] };
}
