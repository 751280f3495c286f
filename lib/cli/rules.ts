// `podwire rules <action>`: the redirection rule sets. `render` prints
// exactly the text that would be applied (iptables-restore input, v4 then v6;
// or the nft script), so users can diff and dry-run. apply/verify/remove act
// on a netns through the engine (lib/redirect/apply.ts).
import { isIP } from 'node:net';
import { Netns } from '../net/netns/netns.js';
import {
  apply, hostProbeRules, inpodConfigFromPod, inpodRules, remove, sidecarConfigFromPod, sidecarRules, toIptablesText, toNft, verify,
  type Backend, type EngineOptions, type InpodConfig, type RuleModel,
} from '../redirect/index.js';
import { parseArgs, UsageError, type ParsedArgs } from './args.js';
import type { Command } from './main.js';

const KINDS = ['inpod', 'hostprobe', 'sidecar'] as const;
const BACKENDS = ['nftables', 'iptables'] as const;
const ACTIONS = ['render', 'apply', 'verify', 'remove'] as const;

function keyValues(list: string[] | undefined, flag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of list ?? []) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new UsageError(`--${flag} takes KEY=VALUE, got ${JSON.stringify(item)}`);
    out[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return out;
}

function intFlag(args: ParsedArgs, name: string): number | undefined {
  const v = args.values.get(name);
  if (v === undefined) return undefined;
  if (!/^\d{1,10}$/.test(v) || Number(v) > 0xffffffff - 1) throw new UsageError(`--${name} takes a user or group id (0..4294967294), got ${JSON.stringify(v)}`);
  return Number(v);
}

// Which model flags each kind reads; any other is a usage error, not silently ignored.
const KIND_FLAGS: Record<(typeof KINDS)[number], string[]> = {
  inpod: ['ipv6', 'dns-capture', 'no-dns-capture', 'ingress-bypass', 'virtual-interfaces', 'snat-ip', 'snat-ipv6', 'annotation'],
  hostprobe: ['ipv6', 'snat-ip', 'snat-ipv6', 'kubelet-uid'],
  sidecar: ['ipv6', 'annotation', 'proxy-uid', 'proxy-gid', 'proxy-env'],
};
const MODEL_FLAGS = [...new Set(Object.values(KIND_FLAGS).flat())];

const given = (args: ParsedArgs, name: string) => args.flags.has(name) || args.values.has(name) || args.lists.has(name);

/** Builds the rule model the flags describe. */
export function modelFromArgs(args: ParsedArgs): RuleModel {
  const kind = args.values.get('kind');
  if (!KINDS.includes(kind as never)) throw new UsageError(`--kind must be one of ${KINDS.join('|')}`);
  for (const f of MODEL_FLAGS) {
    if (given(args, f) && !KIND_FLAGS[kind as (typeof KINDS)[number]].includes(f)) throw new UsageError(`--${f} does not apply to --kind ${kind}`);
  }
  const ipv6 = args.flags.has('ipv6');
  const snatIp = args.values.get('snat-ip');
  const snatIpv6 = args.values.get('snat-ipv6');
  if (snatIp !== undefined && isIP(snatIp) !== 4) throw new UsageError(`--snat-ip needs an IPv4 address, got ${JSON.stringify(snatIp)}`);
  if (snatIpv6 !== undefined && isIP(snatIpv6) !== 6) throw new UsageError(`--snat-ipv6 needs an IPv6 address, got ${JSON.stringify(snatIpv6)}`);
  const annotations = keyValues(args.lists.get('annotation'), 'annotation');
  if (kind === 'hostprobe') {
    const kubeletUid = intFlag(args, 'kubelet-uid');
    return hostProbeRules({ ipv6, ...(snatIp && { snatIp }), ...(snatIpv6 && { snatIpv6 }), ...(kubeletUid !== undefined && { kubeletUid }) });
  }
  if (kind === 'sidecar') {
    const proxyUid = intFlag(args, 'proxy-uid');
    const proxyGid = intFlag(args, 'proxy-gid');
    return sidecarRules(sidecarConfigFromPod({
      annotations, ipv6, proxyEnv: keyValues(args.lists.get('proxy-env'), 'proxy-env'),
      ...(proxyUid !== undefined && { proxyUid }), ...(proxyGid !== undefined && { proxyGid }),
    }));
  }
  if (args.flags.has('dns-capture') && args.flags.has('no-dns-capture')) throw new UsageError('--dns-capture and --no-dns-capture exclude each other');
  // The flags are the node-wide settings; pod annotations override them as in the agent.
  const cfg: InpodConfig = inpodConfigFromPod({
    annotations, ipv6, dnsCaptureGlobal: !args.flags.has('no-dns-capture'),
    ...(snatIp && { snatIp }), ...(snatIpv6 && { snatIpv6 }),
  });
  if (args.flags.has('ingress-bypass')) cfg.ingressBypass = true;
  const virt = args.values.get('virtual-interfaces');
  if (virt !== undefined) {
    const names = virt.split(',').map((s) => s.trim());
    const bad = names.find((n) => !/^[^\s/]{1,15}$/.test(n));
    if (bad !== undefined) throw new UsageError(`--virtual-interfaces takes interface names separated by commas, got ${JSON.stringify(virt)}`);
    cfg.virtualInterfaces = [...(cfg.virtualInterfaces ?? []), ...names];
  }
  return inpodRules(cfg);
}

export function renderModel(model: RuleModel, backend: string): string {
  if (backend === 'iptables') return toIptablesText(model);
  if (backend === 'nftables') return toNft(model);
  throw new UsageError(`--backend must be one of ${BACKENDS.join('|')}`);
}

export const command: Command = {
  summary: 'Render, apply, verify or remove the redirection rules of a pod or of the node.',
  usage: [
    'Usage: podwire rules render --kind inpod|hostprobe|sidecar --backend nftables|iptables [options]',
    '       podwire rules apply|remove --netns NAME|PATH|PID --kind ... --backend nftables|iptables [options]',
    '       podwire rules verify --netns NAME|PATH|PID --kind ... [--backend nftables|iptables] [options]',
    '',
    '  --netns NAME|PATH|PID      the netns to act on (/run/netns/NAME, a path, or a process\'s netns)',
    '  --iptables-mode legacy|nft iptables variant (default: the system\'s iptables-restore)',
    '  apply prints what it changed; verify prints each drift and exits 1 when there is any;',
    '  remove prints what it deleted. Failures exit 1.',
    '',
    'In-pod and host-probe (ambient):',
    '  --ipv6                     also the IPv6 family',
    '  --dns-capture              capture DNS (default; node-wide AMBIENT_DNS_CAPTURE)',
    '  --no-dns-capture           do not capture DNS',
    '  --ingress-bypass           no inbound redirection (ambient.istio.io/bypass-inbound-capture)',
    '  --virtual-interfaces a,b   reroute these interfaces (istio.io/reroute-virtual-interfaces)',
    '  --snat-ip ADDR             host probe SNAT address (HOST_PROBE_SNAT_IP, default 169.254.7.127)',
    '  --snat-ipv6 ADDR           (HOST_PROBE_SNAT_IPV6, default fd16:9254:7127:1337:ffff:ffff:ffff:ffff)',
    '  --kubelet-uid N            hostprobe with nftables: the kubelet\'s UID (nft has no --socket-exists)',
    '',
    'Sidecar (and pod overrides for inpod):',
    '  --annotation KEY=VALUE     a pod annotation (repeatable)',
    '  --proxy-uid N, --proxy-gid N   istio-proxy runAsUser/runAsGroup (default 1337)',
    '  --proxy-env KEY=VALUE      istio-proxy environment, e.g. ISTIO_META_DNS_CAPTURE=true, INVALID_DROP=true (repeatable)',
  ].join('\n'),
  async run(argv) {
    const args = parseArgs(argv, {
      booleans: ['ipv6', 'dns-capture', 'no-dns-capture', 'ingress-bypass'],
      strings: ['kind', 'backend', 'virtual-interfaces', 'snat-ip', 'snat-ipv6', 'kubelet-uid', 'proxy-uid', 'proxy-gid', 'netns', 'iptables-mode'],
      repeatable: ['annotation', 'proxy-env'],
    });
    const [action, ...extra] = args.positionals;
    if (!ACTIONS.includes(action as never)) throw new UsageError(`expected an action: ${ACTIONS.join('|')}`);
    if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`);
    const backend = args.values.get('backend');
    if (!(action === 'verify' && backend === undefined) && !BACKENDS.includes(backend as never)) {
      throw new UsageError(`--backend must be one of ${BACKENDS.join('|')}`);
    }
    const mode = args.values.get('iptables-mode');
    if (mode !== undefined && mode !== 'legacy' && mode !== 'nft') throw new UsageError('--iptables-mode must be legacy or nft');
    if (action === 'render') {
      for (const f of ['netns', 'iptables-mode']) if (args.values.has(f)) throw new UsageError(`--${f} does not apply to render`);
    }
    const model = modelFromArgs(args);
    if (action === 'render') {
      process.stdout.write(renderModel(model, backend!));
      return 0;
    }
    return act(action as 'apply' | 'verify' | 'remove', args, model, backend as Backend | undefined);
  },
};

async function act(action: 'apply' | 'verify' | 'remove', args: ParsedArgs, model: RuleModel, backend: Backend | undefined): Promise<number> {
  const ref = args.values.get('netns');
  if (ref === undefined) throw new UsageError(`${action} needs --netns NAME|PATH|PID`);
  const mode = args.values.get('iptables-mode');
  if (mode !== undefined && mode !== 'legacy' && mode !== 'nft') throw new UsageError('--iptables-mode must be legacy or nft');
  const ns = Netns.resolve(ref);
  try {
    const opts = { ...(backend ? { backend } : {}), ...(mode ? { iptablesMode: mode } : {}) } as EngineOptions;
    if (action === 'apply') {
      const r = await apply(ns, model, opts);
      process.stdout.write(r.changed ? `${r.actions.join('\n')}\n` : 'unchanged: the netns already holds these rules\n');
      return 0;
    }
    if (action === 'remove') {
      const r = await remove(ns, model, opts);
      process.stdout.write(r.removed.length ? `${r.removed.map((x) => `removed ${x}`).join('\n')}\n` : 'nothing to remove\n');
      return 0;
    }
    const r = await verify(ns, model, opts);
    process.stdout.write(r.ok ? 'ok: no drift\n' : `${r.drift.join('\n')}\n`);
    return r.ok ? 0 : 1;
  } finally {
    ns.close();
  }
}
