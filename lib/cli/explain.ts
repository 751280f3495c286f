// `podwire explain <namespace>/<pod>`: why the agent on this node has (or has not) put a pod
// into the mesh, as one paragraph (the agent builds it: lib/agent/status.ts explainPod).
import type { Explanation } from '../agent/status.js';
import { parsePodRef } from '../agent/status-socket.js';
import { noExtraPositionals, parseArgs, UsageError } from './args.js';
import type { Command } from './main.js';
import { defaultStatusSocket, getStatus } from './status-client.js';

export const command: Command = {
  summary: 'Say why a pod of this node is or is not in the mesh, and what to do about it.',
  usage: [
    'Usage: podwire explain <namespace>/<pod> [--socket PATH] [--json]',
    '',
    '  --socket PATH  the agent\'s status socket (default: $CNI_AGENT_RUN_DIR/status.sock, /var/run/istio-cni/status.sock); root only',
    '  --json         the explanation and the facts it rests on (one JSON object)',
    '',
    'Exit status: 0 when the pod is in the mesh, 3 when it is not, 1 on an error.',
  ].join('\n'),
  async run(argv) {
    const args = parseArgs(argv, { booleans: ['json'], strings: ['socket'] });
    noExtraPositionals(args, 1);
    const ref = args.positionals[0];
    if (ref === undefined) throw new UsageError('which pod? give <namespace>/<pod>');
    const pod = parsePodRef(ref);
    if (!pod) throw new UsageError(`${JSON.stringify(ref)} is not <namespace>/<pod> (Kubernetes names)`);
    const e = await getStatus<Explanation>(args.values.get('socket') ?? defaultStatusSocket(), `/v1/explain?pod=${encodeURIComponent(`${pod.namespace}/${pod.name}`)}`);
    process.stdout.write(args.flags.has('json') ? `${JSON.stringify(e, null, 2)}\n` : `${e.text}\n`);
    return e.inMesh ? 0 : 3;
  },
};
