// `podwire ztunnel-sim`: a ztunnel-like ZDS peer for checking a node (or the
// demo) without ztunnel. Connects to the node agent's socket, acks every
// request, opens ztunnel's listeners inside each pod netns and prints one
// line per event until SIGINT/SIGTERM.
import { UsageError, noExtraPositionals, parseArgs } from './args.js';
import type { Command } from './main.js';
import { ZtunnelPeer } from '../testing/ztunnel-peer.js';
import { ZTUNNEL_SOCKET_PATH } from '../zds/server.js';
import { MAX_TIMEOUT_MS } from '../util/timeout.js';

function nonNegative(name: string, v: string | undefined, max = MAX_TIMEOUT_MS): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d{1,10}$/.test(v) || n > max) throw new UsageError(`--${name} needs an integer from 0 to ${max}, got ${JSON.stringify(v)}`);
  return n;
}

/** sun_path holds 108 bytes: a path needs its NUL (107 left), an @abstract name's @ stands for the leading NUL. */
export function validateSocketName(v: string): string {
  if (v === '@') throw new UsageError(`--socket needs a path or an @abstract name, got ${JSON.stringify(v)}`);
  if (v.includes('\0')) throw new UsageError('--socket must not contain NUL bytes');
  const max = v.startsWith('@') ? 108 : 107;
  const len = Buffer.byteLength(v);
  if (len > max) throw new UsageError(`--socket is ${len} bytes, longer than a unix socket address holds (${max}): ${v}`);
  return v;
}

export const command: Command = {
  summary: 'Run a ztunnel-like ZDS peer: ack the node agent, open ztunnel\'s listeners in every pod netns.',
  usage: [
    'Usage: podwire ztunnel-sim [--socket PATH] [--no-listeners] [--json] [--reconnect-max MS]',
    '                           [--ack-delay MS] [--nack UID]... [--close-after N] [--crash-mid-snapshot N]',
    '',
    `  --socket PATH           the node agent's ZDS socket (default ${ZTUNNEL_SOCKET_PATH}; @name for abstract)`,
    '  --no-listeners          protocol only: hold the netns fds, bind nothing',
    '  --json                  one JSON object per event line',
    '  --reconnect-max MS      longest wait between connection attempts (default 15000; doubling from 100)',
    '  --ack-delay MS          wait before every ack (fault injection)',
    '  --nack UID              answer adds for UID with a nack (repeatable)',
    '  --close-after N         drop the connection after N more acked messages (once)',
    '  --crash-mid-snapshot N  drop everything on the Nth snapshot request (once)',
    '',
    'Listeners per pod: TCP 15001, 15006, 15008 on [::] and 15053 TCP+UDP on loopback, SO_MARK 0x539.',
    'Exit status 1 when a fatal protocol error ends the peer (as ztunnel exits).',
  ].join('\n'),
  async run(argv) {
    const args = parseArgs(argv, {
      booleans: ['no-listeners', 'json'],
      strings: ['socket', 'ack-delay', 'close-after', 'crash-mid-snapshot', 'reconnect-max'],
      repeatable: ['nack'],
    });
    noExtraPositionals(args);
    const json = args.flags.has('json');
    const nacks = args.lists.get('nack') ?? [];
    for (const u of nacks) if (/\s/.test(u)) throw new UsageError(`--nack needs a pod UID, got ${JSON.stringify(u)}`);
    // Every value is checked before the peer starts: it retries connecting forever, so a bad flag must not get that far.
    const path = validateSocketName(args.values.get('socket') ?? ZTUNNEL_SOCKET_PATH);
    const faults = {
      ackDelayMs: nonNegative('ack-delay', args.values.get('ack-delay')),
      nackUids: nacks.length ? new Map(nacks.map((u) => [u, `failure to start proxy : nack requested for ${u}`])) : undefined,
      closeAfterMessages: nonNegative('close-after', args.values.get('close-after')),
      crashMidSnapshot: nonNegative('crash-mid-snapshot', args.values.get('crash-mid-snapshot')),
    };
    const backoffMaxMs = nonNegative('reconnect-max', args.values.get('reconnect-max'));
    if (backoffMaxMs === 0) throw new UsageError('--reconnect-max needs at least 1 ms (0 would retry in a busy loop)');
    const peer = new ZtunnelPeer({ path, listeners: !args.flags.has('no-listeners'), faults, ...(backoffMaxMs !== undefined ? { backoffMaxMs } : {}) });
    const print = (event: string, fields: Record<string, unknown>) => {
      if (json) process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), event, ...fields })}\n`);
      else process.stdout.write(`${event}${Object.entries(fields).map(([k, v]) => ` ${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join('')}\n`);
    };
    let lastConnectError = '';
    peer.on('connect-failed', (err: { code?: string; message?: string }) => {
      const code = err.code ?? err.message ?? 'error';
      if (code !== lastConnectError) print('connect-failed', { socket: peer.path, error: code });  // once per kind, not per retry
      lastConnectError = code;
    });
    peer.on('connect', (id: number) => {
      lastConnectError = '';
      print('connected', { connection: id, socket: peer.path });
    });
    peer.on('disconnect', (id: number) => print('disconnected', { connection: id }));
    peer.on('message', (e) => print('request', { connection: e.connection, type: e.type, uid: e.uid ?? '', fds: e.fds, response: e.response ?? '(none)' }));
    // Per message: O(1) lookups, not the `active` copy (that made a long run quadratic).
    peer.on('ready', () => print('ready', { active: peer.activeCount }));
    peer.on('proxy-started', (uid: string) => print('proxy-started', { uid, netns: peer.netnsOf(uid) ?? '', listeners: peer.boundPorts(uid) }));
    peer.on('proxy-stopped', (uid: string) => print('proxy-stopped', { uid }));
    peer.on('capture', (c) => print('capture', { uid: c.uid, proto: c.proto, port: c.port, orig_dst: `${c.origDst.address}:${c.origDst.port}`, redirected: c.redirected, peer: `${c.peer.address}:${c.peer.port}` }));
    peer.on('warning', (err: Error) => print('warning', { error: err.message }));
    const exited = new Promise<number>((resolve) => {
      peer.once('exit', (code: number) => resolve(code));
      const stop = () => resolve(0);
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    peer.start();
    const code = await exited;
    await peer.stop();
    print('stopped', { counters: peer.counters });
    return code;
  },
};
