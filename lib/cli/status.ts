// `podwire status`: what the agent on this node holds, from its status socket.
import type { NodeStatus, PodStatus } from '../agent/status.js';
import { noExtraPositionals, parseArgs } from './args.js';
import type { Command } from './main.js';
import { defaultStatusSocket, getStatus } from './status-client.js';
import { table } from './table.js';

const ago = (iso: string | undefined, now: number) => (iso ? `${Math.max(0, Math.round((now - Date.parse(iso)) / 1000))}s ago` : undefined);

function podRow(p: PodStatus, now: number): Array<string | undefined> {
  const d = p.decision ? (p.decision.enroll ? `selected (entry ${p.decision.selector})` : p.decision.reason) : 'namespace unknown';
  const drift = p.lastDrift ? `${p.lastDrift.failed.length ? 'not repaired' : 'repaired'} ${ago(p.lastDrift.at, now)}` : undefined;
  const failure = p.lastFailure ? `${p.lastFailure.stage} ${ago(p.lastFailure.at, now)}` : undefined;
  return [p.namespace, p.name, p.state, d, p.rulesVerifiedAt ? `${ago(p.rulesVerifiedAt, now)} (${p.rulesVerifiedBy})` : undefined,
    p.ztunnelAck ? `#${p.ztunnelAck.connection} ${p.ztunnelAck.type}` : undefined, p.probeSet.join(',') || undefined, drift, failure];
}

/** The human rendering of a status document. */
export function renderStatus(s: NodeStatus, now = Date.now()): string {
  const unmet = s.readiness.filter((r) => !r.met).map((r) => r.condition);
  const b = s.backend;
  const backend = b.backend ? `${b.backend}${b.iptablesVariant ? ` (${b.iptablesVariant})` : ''}${b.kubeletUid !== undefined ? `, kubelet uid ${b.kubeletUid}` : ''}` : 'not chosen yet';
  const q = s.queue;
  const dr = s.driftCheck;
  const lines = [
    `node ${s.node}: ${s.ready ? 'ready' : `not ready (waiting for ${unmet.join(', ')})`}`,
    `backend: ${backend}`,
    `install: ${s.install.enabled ? `${s.install.ready ? 'ready' : 'not ready'}${s.install.configPath ? `, ${s.install.configPath}` : ''}` : 'not run by this agent'}`,
    `work queue: ${q ? `${q.queued} queued, ${q.waiting} waiting, ${q.inFlight} in flight (${q.retries} retries, ${q.dropped} dropped)` : 'not running'}`,
    `drift check: ${dr.intervalMs > 0 ? `every ${dr.intervalMs / 1000}s${dr.lastRound ? `; last round ${ago(dr.lastRound.at, now)}: ${dr.lastRound.checked} checked, ${dr.lastRound.drifted} drifted` : ''}` : 'off'}`,
    `ztunnel (${s.ztunnel.socket}): ${s.ztunnel.connections.length} connection(s)`,
    ...s.ztunnel.connections.map((c) => `  #${c.id} ${c.state}, pid ${c.pid} uid ${c.uid}, connected ${ago(c.connectedAt, now)}, ${c.acked}/${c.sent} acked, ${c.nacked} nacked, ${c.queued} queued`),
    '',
    `pods (${s.pods.length}, ${s.pods.filter((p) => p.state === 'enrolled').length} enrolled)`,
    table(['namespace', 'name', 'state', 'decision', 'rules verified', 'ztunnel ack', 'probe set', 'last drift', 'last failure'], s.pods.map((p) => podRow(p, now))),
  ];
  return lines.join('\n');
}

export const command: Command = {
  summary: 'Show what the node agent on this node holds: readiness, backend, ztunnel, every pod.',
  usage: [
    'Usage: podwire status [--socket PATH] [--json]',
    '',
    '  --socket PATH  the agent\'s status socket (default: $CNI_AGENT_RUN_DIR/status.sock, /var/run/istio-cni/status.sock); root only',
    '  --json         the agent\'s answer as it is (one JSON object)',
  ].join('\n'),
  async run(argv) {
    const args = parseArgs(argv, { booleans: ['json'], strings: ['socket'] });
    noExtraPositionals(args);
    const s = await getStatus<NodeStatus>(args.values.get('socket') ?? defaultStatusSocket(), '/v1/status');
    process.stdout.write(args.flags.has('json') ? `${JSON.stringify(s, null, 2)}\n` : `${renderStatus(s)}\n`);
    return 0;
  },
};
