// What redirection changes in a netns, as text to compare before and after:
// the nft ruleset (counters blanked), the v4/v6 policy rules and every routing
// table. The kernel's own link-local (fe80::) entries are dropped: they appear
// when IPv6 DAD finishes on a new veth, a moment that depends on the machine,
// and no podwire code adds or removes them.
import { Netns } from '../../lib/net/netns/netns.js';

export async function redirectionState(netnsPath: string): Promise<string> {
  const ns = Netns.open(netnsPath);
  try {
    const out = (await ns.spawn(['nft', 'list', 'ruleset'])).stdout + (await ns.spawn(['ip', 'rule'])).stdout
      + (await ns.spawn(['ip', '-6', 'rule'])).stdout + (await ns.spawn(['ip', 'route', 'show', 'table', 'all'])).stdout;
    return out.replace(/counter packets \d+ bytes \d+/g, 'counter')
      .split('\n').filter((line) => !/\bfe80:/.test(line)).join('\n');
  } finally {
    ns.close();
  }
}
