// Which rule backend the node agent programs (istio-cni.md §5.2 step 2).
//
// NATIVE_NFTABLES off → iptables. On → nftables, except on a node that must stay on iptables:
//  (a) the host netns already has ipset `istio-inpod-probes-v4` (or `-v6` with IPv6 on): the node
//      was upgraded from an iptables install, whose host and in-pod rules still match that set;
//      switching backends under running pods would leave both rule sets half in place. Looked up
//      over netlink; "no such set" (ENOENT) means absent, any other error keeps nftables (warning);
//  (b) the `nft` binary has no JSON support. Upstream probes `nft --json list tables` (5 s) and
//      falls back when the output says "JSON support not compiled-in"; any other probe failure
//      keeps nftables (warning).
// FORCE_IPTABLES_BINARY names an iptables variant, so with nftables it is ignored (warning); after
// a fallback to iptables it applies as usual.
//
// With iptables, the variant (legacy or nft) is chosen as upstream does in the host netns (cni/pkg/iptables
// NewIptablesConfigurator → DetectIptablesVersion, per family): FORCE_IPTABLES_BINARY, else legacy when
// `iptables-legacy-save` there already prints rules (kube-proxy's, say), else nft. Upstream commits pods to
// the host's answer, and so does podwire (in-pod and host rules use one variant). Unlike upstream the answer
// is kept in <run dir>/iptables-backend.json and reused by the next start (detection's own test rule
// must not flip it; the run dir is a tmpfs hostPath, so a reboot detects afresh).
//
// Why (b) applies to podwire too, although podwire writes nftables rules natively (the nf_tables
// batches of lib/net/nft/batch.ts through the netns's netfilter socket, no `nft -f`): its nftables
// engine still *reads* with the binary's JSON output. lib/redirect/engine-nft.ts `readNft` lists the
// ruleset with `nft -j list ruleset` whenever the quick native compare does not settle it — always
// on remove (every pod deletion), and on apply/verify when there is drift — and the reference
// rulesets verify compares against (lib/redirect/reference.ts) are read back with `nft -j` in a
// scratch netns. An nft without JSON would make every pod removal fail, which is the upstream
// failure (Istio #60328) the probe exists for. The probe's output is the only signal there is: nft
// exits with NFT_EXIT_FAILURE for every kind of failure, so the marker text is matched, as upstream.
import { join } from 'node:path';
import { isNotFound } from '../net/errors.js';
import type { Netns } from '../net/netns/netns.js';
import { detectBackend, type IptablesBackend, type IptablesMode } from '../net/xtables/iptables.js';
import { toolEnv } from '../net/tool-error.js';
import { PROBE_SET_V4, PROBE_SET_V6 } from '../dataplane/probe-set-ipset.js';
import type { Backend } from '../redirect/engine-types.js';
import type { IptablesBinary } from './config.js';

export type { Backend } from '../redirect/engine-types.js';

/** What decided the backend. */
export type BackendDecision =
  /** NATIVE_NFTABLES is off. */
  | 'not-requested'
  /** NATIVE_NFTABLES is on and nothing stands against it. */
  | 'requested'
  /** Fallback (a): an iptables install's probe ipset is in the host netns. */
  | 'probe-ipset-present'
  /** Fallback (b): `nft` was built without JSON support. */
  | 'nft-without-json';

export interface BackendSelection {
  backend: Backend;
  decision: BackendDecision;
  /** One sentence for the agent's start-up log line. */
  reason: string;
  /** Things the operator should know (ignored settings, detection failures); each one sentence. */
  warnings: string[];
}

export interface SelectBackendOptions {
  /** NATIVE_NFTABLES. */
  nativeNftables: boolean;
  /** AMBIENT_IPV6: the `-v6` probe set also counts. */
  ipv6: boolean;
  /** FORCE_IPTABLES_BINARY. */
  forceIptablesBinary: IptablesBinary;
  /** Limit of the `nft --json` probe, ms (default 5000, upstream's). */
  nftProbeTimeoutMs?: number;
}

/** Upstream's marker (nftables `src/main.c`, printed when built without libjansson). */
export const NFT_JSON_NOT_COMPILED = 'JSON support not compiled-in';
const NFT_PROBE_TIMEOUT_MS = 5000;

const describeError = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/**
 * Chooses the backend for the agent whose host netns is `host` (the node's; never changed here:
 * one ipset lookup per set and one `nft --json list tables` run inside it). Never throws for a
 * detection failure: that keeps nftables and comes back as a warning.
 */
export async function selectBackend(host: Netns, opts: SelectBackendOptions): Promise<BackendSelection> {
  if (!opts.nativeNftables) {
    return { backend: 'iptables', decision: 'not-requested', reason: 'NATIVE_NFTABLES is off: using iptables', warnings: [] };
  }
  const warnings: string[] = [];
  const ignoredForce = (): void => {
    if (opts.forceIptablesBinary !== '') {
      warnings.push(`FORCE_IPTABLES_BINARY=${opts.forceIptablesBinary} is ignored: the nftables backend does not use iptables`);
    }
  };

  const found = await probeSetsPresent(host, opts.ipv6, warnings);
  if (found.length > 0) {
    return {
      backend: 'iptables', decision: 'probe-ipset-present', warnings,
      reason: `NATIVE_NFTABLES is on, but ipset ${found.join(', ')} exists in the host netns (left by an iptables install): staying on iptables`,
    };
  }

  const json = await nftJsonSupported(host, opts.nftProbeTimeoutMs ?? NFT_PROBE_TIMEOUT_MS);
  if (json === false) {
    return {
      backend: 'iptables', decision: 'nft-without-json', warnings,
      reason: `NATIVE_NFTABLES is on, but nft reports "${NFT_JSON_NOT_COMPILED}" (the nftables backend reads rulesets as JSON): falling back to iptables`,
    };
  }
  if (json !== true) warnings.push(`could not check that nft supports JSON output (${json}); keeping nftables`);
  ignoredForce();
  return { backend: 'nftables', decision: 'requested', reason: 'NATIVE_NFTABLES is on: using nftables', warnings };
}

/** The probe sets present in the host netns; lookup errors other than "no such set" become warnings. */
async function probeSetsPresent(host: Netns, ipv6: boolean, warnings: string[]): Promise<string[]> {
  const names = ipv6 ? [PROBE_SET_V4, PROBE_SET_V6] : [PROBE_SET_V4];
  let ipset;
  try {
    ipset = (await host.netlink()).ipset;
  } catch (err) {
    warnings.push(`could not look for ipsets ${names.join(', ')} in the host netns (${describeError(err)}); keeping nftables`);
    return [];
  }
  const found: string[] = [];
  for (const name of names) {
    try {
      await ipset.list(name);
      found.push(name);
    } catch (err) {
      if (isNotFound(err)) continue;
      warnings.push(`could not look for ipset ${name} in the host netns (${describeError(err)}); keeping nftables unless another probe set is found`);
    }
  }
  return found;
}

/**
 * `nft --json list tables` inside `ns`: true when it works, false when nft says JSON is not
 * compiled in (stdout or stderr, any exit code, as upstream), else a description of the failure.
 */
async function nftJsonSupported(ns: Netns, timeoutMs: number): Promise<boolean | string> {
  let r;
  try {
    r = await ns.spawn(['nft', '--json', 'list', 'tables'], { env: toolEnv(), timeoutMs });
  } catch (err) {
    return describeError(err);
  }
  if (`${r.stdout}\n${r.stderr}`.includes(NFT_JSON_NOT_COMPILED)) return false;
  if (r.timedOut) return `nft --json list tables timed out after ${timeoutMs} ms`;
  if (r.code !== 0) {
    const said = r.stderr.trim().split('\n')[0] || r.stdout.trim().split('\n')[0];
    return `nft --json list tables ${r.code === null ? `was killed by ${r.signal}` : `exited with ${r.code}`}${said ? `: ${said}` : ''}`;
  }
  return true;
}

/** The iptables variant's state file in the CNI run dir. */
export const IPTABLES_STATE_FILE = 'iptables-backend.json';

export type IptablesSelectErrorCode =
  /** AMBIENT_IPV6 is on and no ip6tables variant can program the host netns (upstream refuses too). */
  'ERR_IP6TABLES_UNUSABLE';

export class IptablesSelectError extends Error {
  constructor(readonly code: IptablesSelectErrorCode, message: string) {
    super(message);
  }

  static {
    Object.defineProperty(this.prototype, 'name', { value: 'IptablesSelectError', enumerable: false });
  }
}

export interface SelectIptablesOptions {
  /** FORCE_IPTABLES_BINARY. */
  forceIptablesBinary: IptablesBinary;
  /** AMBIENT_IPV6: an ip6tables variant is required. */
  ipv6: boolean;
  /** CNI_AGENT_RUN_DIR: the choice is kept in `<it>/iptables-backend.json`. */
  runDir: string;
}

export interface IptablesSelection {
  /** The variant both families use. */
  mode: IptablesMode;
  detected: IptablesBackend;
  stateFile: string;
  /** One sentence for the start-up log line. */
  reason: string;
  warnings: string[];
}

/**
 * The iptables variant for the agent whose host netns is `host` (see the header). Errors:
 * detectBackend's (NetError ENOENT: no usable iptables; EINVAL: a bad state file, left for the
 * operator), IptablesSelectError ERR_IP6TABLES_UNUSABLE.
 */
export async function selectIptablesVariant(host: Netns, opts: SelectIptablesOptions): Promise<IptablesSelection> {
  const stateFile = join(opts.runDir, IPTABLES_STATE_FILE);
  const detected = await detectBackend({ netns: host, stateFile, env: { FORCE_IPTABLES_BINARY: opts.forceIptablesBinary } });
  const warnings: string[] = [];
  if (opts.ipv6 && detected.v6 === null) {
    throw new IptablesSelectError('ERR_IP6TABLES_UNUSABLE', `AMBIENT_IPV6 is on, but no ip6tables variant works in the host netns (iptables: ${detected.mode} ${detected.version})`);
  }
  // The redirection engine runs one variant for both families; upstream would run each family's own.
  if (opts.ipv6 && detected.v6 && detected.v6.mode !== detected.mode) {
    warnings.push(`ip6tables detection says ${detected.v6.mode} but iptables says ${detected.mode}: IPv6 rules use ${detected.mode} too`);
  }
  const why = detected.source === 'env' ? `FORCE_IPTABLES_BINARY=${detected.mode}`
    : detected.source === 'state' ? `kept from an earlier start in ${stateFile}`
      : detected.source === 'host-rules' ? `the host netns already holds an earlier agent's ISTIO_POSTRT chain in ${detected.mode} only`
      : detected.mode === 'legacy' ? 'iptables-legacy already holds rules in the host netns'
        : 'no iptables-legacy rules in the host netns';
  return { mode: detected.mode, detected, stateFile, reason: `${why}; iptables ${detected.version}`, warnings };
}
