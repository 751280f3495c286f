// Table layouts: which iptables tables/chains a rule set uses and their nft
// names and hooks (Istio's names, spec §7 and §2.7).
import type { BaseChain, ChainDef, TableDef } from './model.js';

const NAT_PRE: BaseChain = { type: 'nat', hook: 'prerouting', priority: -100 };
const NAT_OUT: BaseChain = { type: 'nat', hook: 'output', priority: -100 };
const MANGLE_PRE: BaseChain = { type: 'filter', hook: 'prerouting', priority: -150 };
const MANGLE_OUT: BaseChain = { type: 'route', hook: 'output', priority: -150 };
const RAW_PRE: BaseChain = { type: 'filter', hook: 'prerouting', priority: -300 };
const RAW_OUT: BaseChain = { type: 'filter', hook: 'output', priority: -300 };

const chain = (name: string, nft: string | null, base?: BaseChain): ChainDef => (base ? { name, nft, base } : { name, nft });

/** In-pod (ambient) tables: istio-ambient-{nat,mangle,raw}. */
export function inpodTables(): TableDef[] {
  const own = [chain('ISTIO_PRERT', 'istio-prerouting'), chain('ISTIO_OUTPUT', 'istio-output')];
  return [
    { name: 'nat', nft: 'istio-ambient-nat', chains: [chain('PREROUTING', 'prerouting', NAT_PRE), chain('OUTPUT', 'output', NAT_OUT), ...own] },
    { name: 'mangle', nft: 'istio-ambient-mangle', chains: [chain('PREROUTING', 'prerouting', MANGLE_PRE), chain('OUTPUT', 'output', MANGLE_OUT), ...own] },
    { name: 'raw', nft: 'istio-ambient-raw', chains: [chain('PREROUTING', 'prerouting', RAW_PRE), chain('OUTPUT', 'output', RAW_OUT), ...own] },
  ];
}

/**
 * Host (node netns) table. In nft our own base chain hooks postrouting
 * directly, so iptables' POSTROUTING → ISTIO_POSTRT jump has no nft twin.
 */
export function hostTables(): TableDef[] {
  return [{
    name: 'nat',
    nft: 'istio-ambient-nat',
    chains: [chain('POSTROUTING', null), chain('ISTIO_POSTRT', 'postrouting', { type: 'nat', hook: 'postrouting', priority: 100 })],
  }];
}

/** Sidecar tables: istio-proxy-{nat,mangle,raw}. */
export function sidecarTables(): TableDef[] {
  return [
    {
      name: 'nat',
      nft: 'istio-proxy-nat',
      chains: [
        chain('PREROUTING', 'prerouting', NAT_PRE), chain('OUTPUT', 'output', NAT_OUT),
        chain('ISTIO_INBOUND', 'istio-inbound'), chain('ISTIO_REDIRECT', 'istio-redirect'),
        chain('ISTIO_IN_REDIRECT', 'istio-in-redirect'), chain('ISTIO_OUTPUT', 'istio-output'),
        chain('ISTIO_OUTPUT_DNS', 'istio-output-dns'),
      ],
    },
    {
      name: 'mangle',
      nft: 'istio-proxy-mangle',
      chains: [
        chain('PREROUTING', 'prerouting', MANGLE_PRE), chain('OUTPUT', 'output', MANGLE_OUT),
        chain('ISTIO_DIVERT', 'istio-divert'), chain('ISTIO_TPROXY', 'istio-tproxy'),
        chain('ISTIO_INBOUND', 'istio-inbound'), chain('ISTIO_DROP', 'istio-drop'),
      ],
    },
    {
      name: 'raw',
      nft: 'istio-proxy-raw',
      chains: [
        chain('PREROUTING', 'prerouting', RAW_PRE), chain('OUTPUT', 'output', RAW_OUT),
        chain('ISTIO_INBOUND', 'istio-inbound'), chain('ISTIO_OUTPUT_DNS', 'istio-output-dns'),
      ],
    },
  ];
}
