// Istio's way of programming a pod, for comparisons in the same run: upstream's
// CreateInpodRules does netlink routing, then per family `iptables-save` and
// `iptables-restore --noflush`, each exec'd inside the pod netns. Its verify
// is upstream's startup reconciliation check (AMBIENT_RECONCILE_POD_RULES_ON_STARTUP):
// `iptables-save` per family exec'd in the pod, compared with what is expected.
import type { RuleBackend } from '../../lib/dataplane/types.js';
import type { Netns } from '../../lib/net/netns/netns.js';
import { applyRouting, diffRouting } from '../../lib/redirect/engine-routes.js';
import { inpodRules } from '../../lib/redirect/inpod.js';
import { toIptablesRestore } from '../../lib/redirect/render-iptables.js';

/** Upstream's CreateInpodRules: netlink routing, then save + restore per family, each an exec in the netns. */
export class IstioStyleRules implements RuleBackend {
  private readonly model = inpodRules({ ipv6: true, dnsCapture: true });
  private readonly text = { 4: toIptablesRestore(this.model, 4), 6: toIptablesRestore(this.model, 6) };

  async apply(ns: Netns): Promise<void> {
    await applyRouting(ns, await diffRouting(ns, this.model));
    for (const [fam, save, restore] of [[4, 'iptables-save', 'iptables-restore'], [6, 'ip6tables-save', 'ip6tables-restore']] as const) {
      const s = await ns.spawn([save], { timeoutMs: 30_000 });
      if (s.code !== 0) throw new Error(`${save}: ${s.stderr}`);
      const r = await ns.spawn([restore, '--noflush', '-v'], { stdin: this.text[fam], timeoutMs: 30_000 });
      if (r.code !== 0) throw new Error(`${restore}: ${r.stderr}`);
    }
  }
  async verify(ns: Netns): Promise<{ ok: boolean; drift: string[] }> {
    const drift: string[] = [];
    for (const save of ['iptables-save', 'ip6tables-save']) {
      const s = await ns.spawn([save], { timeoutMs: 30_000 });
      if (s.code !== 0) throw new Error(`${save}: ${s.stderr}`);
      if (!s.stdout.includes(':ISTIO_OUTPUT')) drift.push(`${save}: ISTIO_OUTPUT missing`);
    }
    return { ok: drift.length === 0, drift };
  }
  async remove(): Promise<void> {}
}

