// A ztunnel stand-in for a real node, in a process of its own as ztunnel runs: `podwire
// ztunnel-sim --json` connected to the node agent's ZDS socket, its event lines appended to a
// file. The test reads the file when it asks (active proxies, captures), so a test blocked in
// a synchronous kubectl call never delays an ack — an in-process ZtunnelPeer shared the test's
// event loop, and under load its acks came after the agent's 5 s ZDS timeout.
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { Capture } from '../../lib/testing/ztunnel-peer.js';

const CLI = join(import.meta.dirname, '..', '..', 'bin', 'podwire.js');

function hostPort(s: string): { address: string; port: number; family: 4 | 6 } {
  const i = s.lastIndexOf(':');
  const address = s.slice(0, i);
  return { address, port: Number(s.slice(i + 1)), family: address.includes(':') ? 6 : 4 };
}

export class ZtunnelProcess {
  readonly #events: string;
  readonly #socket: string;
  #child: ChildProcess | undefined;
  #fd = -1;
  #offset = 0;
  #partial = '';
  readonly #active = new Map<string, string>();
  readonly #captures: Capture[] = [];
  #connects = 0;
  #snapshotReceived = false;

  /** `socket`: the agent's ZDS socket; `events`: the file its event lines go to. */
  constructor(socket: string, events: string) {
    this.#socket = socket;
    this.#events = events;
  }

  start(): this {
    const out = openSync(this.#events, 'a');
    try {
      // Dies with the test process (pdeathsig), as the node's processes do.
      this.#child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, CLI, 'ztunnel-sim', '--json', '--socket', this.#socket, '--reconnect-max', '500'],
        { stdio: ['ignore', out, out] });
    } finally {
      closeSync(out);
    }
    this.#fd = openSync(this.#events, 'r');
    return this;
  }

  /** Reads the event lines written since the last call. */
  #refresh(): void {
    const buf = Buffer.alloc(1 << 16);
    for (;;) {
      const n = readSync(this.#fd, buf, 0, buf.length, this.#offset);
      if (n <= 0) break;
      this.#offset += n;
      const lines = (this.#partial + buf.toString('utf8', 0, n)).split('\n');
      this.#partial = lines.pop()!;
      for (const line of lines) this.#apply(line);
    }
  }

  #apply(line: string): void {
    let e: Record<string, any>;
    try {
      e = JSON.parse(line);
    } catch {
      return; // not an event line (a warning printed by Node)
    }
    if (e.event === 'connected') {
      this.#connects++;
      this.#snapshotReceived = false;
    } else if (e.event === 'ready') this.#snapshotReceived = true;
    else if (e.event === 'proxy-started') this.#active.set(e.uid, e.netns);
    else if (e.event === 'proxy-stopped') this.#active.delete(e.uid);
    else if (e.event === 'capture') {
      this.#captures.push({ uid: e.uid, proto: e.proto, port: e.port, origDst: hostPort(e.orig_dst), redirected: e.redirected, peer: hostPort(e.peer) });
    }
  }

  /** Running proxies: uid → netns identity (dev:ino). */
  get active(): Map<string, string> {
    this.#refresh();
    return new Map(this.#active);
  }

  /** Every capture since the start, oldest first. */
  get captures(): readonly Capture[] {
    this.#refresh();
    return this.#captures;
  }

  /** Connections made to the agent so far (ZtunnelPeer's counters.connects). */
  get counters(): { connects: number } {
    this.#refresh();
    return { connects: this.#connects };
  }

  /** The current connection's snapshot has been received and every proxy of it started. */
  get snapshotReceived(): boolean {
    this.#refresh();
    return this.#snapshotReceived;
  }

  async stop(): Promise<void> {
    const c = this.#child;
    if (c && c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await exited;
    }
    if (this.#fd >= 0) closeSync(this.#fd);
    this.#fd = -1;
  }
}
