// A container image of upstream's node agent (`install-cni` + its `istio-cni` plugin, built from
// the Go module proxy by istio-agent.ts and cached there), laid out as upstream's own image
// (cni/deployments/kubernetes/Dockerfile.install-cni: the agent at /usr/local/bin/install-cni, the
// plugin it copies to the node at /opt/cni/bin/istio-cni, /opt/cni/bin on PATH) so that Istio's
// `istio-cni` Helm chart runs it unchanged: `--set global.hub=localhost --set global.tag=<tag>`.
// Its iptables, ip6tables and nft are the host's, gathered exactly as podwire's image gathers
// them (scripts/lib/netfilter-tools.mjs), so both agents run the same netfilter binaries and a
// difference between their rules is a difference between the agents. Upstream's base image is a
// distroless Debian with the same tools; nothing else of it is used by the agent.
//
// The image is an uncompressed OCI archive (`ctr images import` takes it) built with the
// project's own writer (scripts/lib/oci-image.mjs) into its content-addressed cache, so a
// machine builds the binaries once and the archive once per binary/host-tool change.
import { imageTarball } from '../../scripts/lib/oci-image.mjs';
import { MERGED_USR_LINKS, netfilterTools, withSharedLibs } from '../../scripts/lib/netfilter-tools.mjs';
import { ensureIstioAgent } from './istio-agent.js';
import { ISTIO_VERSION } from './istio-cni.js';

/** What the chart's `global.hub` / `global.tag` name: `<hub>/install-cni:<tag>`. */
export const UPSTREAM_HUB = 'localhost';
/** The pinned module's pseudo-version is a valid image tag as it is. */
export const UPSTREAM_TAG = ISTIO_VERSION;
export const UPSTREAM_IMAGE = `${UPSTREAM_HUB}/install-cni:${UPSTREAM_TAG}`;

/** The binaries could not be built (no Go, no proxy, a failed build): why. */
export class UpstreamImageError extends Error {
  override readonly name = 'UpstreamImageError';
  readonly code = 'ERR_UPSTREAM_IMAGE';
}

/** The archive of upstream's agent image (built when missing); throws UpstreamImageError when it cannot be. */
export function upstreamAgentImage(opts: { log?: (m: string) => void } = {}): { ref: string; tarball: string } {
  // 18 min per Go build: on a fresh machine the plugin's build (istio.io/istio's whole module) ran
  // past the default 480 s beside the other test files.
  const bins = ensureIstioAgent({ log: opts.log, timeoutS: 1080 });
  if (!bins.agent || !bins.plugin) throw new UpstreamImageError(`upstream's agent: ${bins.why}`);
  const netfilter = netfilterTools();
  const empty = (dst: string) => ({ dst, data: Buffer.alloc(0), mode: 0o644 });
  return imageTarball({
    ref: UPSTREAM_IMAGE,
    entrypoint: ['/usr/local/bin/install-cni'],
    env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/cni/bin'],
    files: [
      { dst: '/usr/local/bin/install-cni', src: bins.agent },
      { dst: '/opt/cni/bin/istio-cni', src: bins.plugin },
      ...withSharedLibs(netfilter.binaries),
      // The layer holds only files' parents: iptables-legacy locks /run/xtables.lock, and Go's
      // os.TempDir is /tmp; passwd/group as distroless has them.
      empty('/run/.keep'), empty('/tmp/.keep'),
      { dst: '/etc/passwd', data: Buffer.from('root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n'), mode: 0o644 },
      { dst: '/etc/group', data: Buffer.from('root:x:0:\nnogroup:x:65534:\n'), mode: 0o644 },
    ],
    symlinks: { ...MERGED_USR_LINKS, ...netfilter.links },
  });
}
