// The kubeconfig for Istio's plugin, `<CNI_AGENT_RUN_DIR>/istio-cni-kubeconfig` (spec §3.1.2).
// podwire's own plugin needs no credentials (it only talks to the agent), so writing it is an
// option, off by default: it exists to run upstream's `istio-cni` plugin against podwire. The
// text is what Istio writes (clientcmd's YAML: keys sorted, block style), byte for byte.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { InstallError, ioError } from './errors.js';
import { SILENT_LOG, type InstallLog } from './log.js';

/** The file name Istio's plugin reads in its run dir. */
export const KUBECONFIG_NAME = 'istio-cni-kubeconfig';
/** The service account directory of a pod. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeconfigSource {
  /** KUBERNETES_SERVICE_PROTOCOL; '' = https. */
  serviceProtocol: string;
  /** KUBERNETES_SERVICE_HOST (an IPv6 address is bracketed in the URL). */
  serviceHost: string;
  /** KUBERNETES_SERVICE_PORT. */
  servicePort: string;
  /** KUBE_CA_FILE; '' = `<serviceAccountDir>/ca.crt`. Not read with skipTlsVerify. */
  caFile: string;
  /** SKIP_TLS_VERIFY: `insecure-skip-tls-verify: true` instead of the CA. */
  skipTlsVerify: boolean;
  /** Where `token` (and `ca.crt`) are. */
  serviceAccountDir: string;
}

export interface KubeconfigContent {
  server: string;
  /** The CA certificate(s), PEM bytes; absent with skipTlsVerify. */
  caData?: Uint8Array;
  skipTlsVerify: boolean;
  token: string;
}

/** The kubeconfig text (clientcmd's field names and order). */
export function renderKubeconfig(c: KubeconfigContent): string {
  const cluster = c.skipTlsVerify
    ? ['    insecure-skip-tls-verify: true']
    : [`    certificate-authority-data: ${Buffer.from(c.caData ?? new Uint8Array()).toString('base64')}`];
  return [
    'apiVersion: v1',
    'clusters:',
    '- cluster:',
    ...cluster,
    `    server: ${yamlScalar(c.server)}`,
    '  name: local',
    'contexts:',
    '- context:',
    '    cluster: local',
    '    user: istio-cni',
    '  name: istio-cni-context',
    'current-context: istio-cni-context',
    'kind: Config',
    'users:',
    '- name: istio-cni',
    '  user:',
    `    token: ${yamlScalar(c.token)}`,
    '',
  ].join('\n');
}

/** `<protocol>://<host>:<port>`, an IPv6 host in brackets. */
export function serverUrl(protocol: string, host: string, port: string): string {
  const h = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return `${protocol || 'https'}://${h}:${port}`;
}

/** Reads the token (and CA) and builds the content; ERR_KUBECONFIG_SERVICE / ERR_IO of stage `kubeconfig`. */
export async function kubeconfigContent(src: KubeconfigSource): Promise<KubeconfigContent> {
  if (!src.serviceHost || !src.servicePort) {
    throw new InstallError('ERR_KUBECONFIG_SERVICE', 'kubeconfig', 'KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set to write the plugin kubeconfig');
  }
  const tokenPath = join(src.serviceAccountDir, 'token');
  const token = await readFile(tokenPath, 'utf8').catch((err: unknown) => {
    throw ioError('kubeconfig', 'cannot read the service account token', tokenPath, err);
  });
  const content: KubeconfigContent = { server: serverUrl(src.serviceProtocol, src.serviceHost, src.servicePort), skipTlsVerify: src.skipTlsVerify, token };
  if (!src.skipTlsVerify) {
    const caPath = src.caFile || join(src.serviceAccountDir, 'ca.crt');
    content.caData = await readFile(caPath).catch((err: unknown) => {
      throw ioError('kubeconfig', 'cannot read the CA file', caPath, err);
    });
  }
  return content;
}

/** Writes `<runDir>/istio-cni-kubeconfig` atomically with `mode`; returns its path. */
export async function writeKubeconfig(runDir: string, src: KubeconfigSource, mode: number, log: InstallLog = SILENT_LOG): Promise<string> {
  const content = await kubeconfigContent(src);
  const path = join(runDir, KUBECONFIG_NAME);
  try {
    await writeFileAtomic(path, renderKubeconfig(content), { mode, mkdir: false, tmp: 'suffix' });
  } catch (err) {
    throw ioError('kubeconfig', 'cannot write the plugin kubeconfig', path, err);
  }
  // Upstream logs the kubeconfig with its secrets redacted: the token never reaches the log.
  log.debug(`wrote the plugin kubeconfig ${path}`, { server: content.server, insecureSkipTlsVerify: content.skipTlsVerify, token: '<redacted>' });
  return path;
}

// A plain scalar when YAML reads it back as this same string, else a double-quoted one (JSON's
// escapes are valid there). Block context: `[`, `]`, `,` are allowed inside, as go-yaml emits.
function yamlScalar(s: string): string {
  const plain = /^[A-Za-z0-9_./][A-Za-z0-9_./:@%+=~\-[\],]*$/.test(s)
    && !s.includes(': ') && !s.endsWith(':')
    && !/^(true|false|yes|no|on|off|y|n|null|~)$/i.test(s)
    && !/^[-+]?(\.?\d|\.inf|\.nan)/i.test(s);
  return plain ? s : JSON.stringify(s);
}
