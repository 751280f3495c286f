// podwire-cni end to end (docs/cni-protocol.md): the static executable from build/Release, exec'd
// the way a container runtime does (CNI_* env, config on stdin), against agent-like servers on a
// unix socket in a temp run dir — a node:http server that records each request and answers per
// the protocol, a raw server for answers that break it, and the agent's real endpoint
// (lib/cni/endpoint.ts). No root needed; nothing outside the temp dirs is touched.
import { spawn } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CURRENT_VERSION, DECISION_FILE, SUPPORTED_VERSIONS } from '../../lib/cni/constants.js';
import { startCniEndpoint, type CniEndpoint } from '../../lib/cni/endpoint.js';
import { passThrough } from '../../lib/cni/result.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
// PODWIRE_TEST_SHIM: another build of the shim (e.g. an older one, to see which tests it fails).
const SHIM = process.env.PODWIRE_TEST_SHIM ?? join(ROOT, 'build', 'Release', 'podwire-cni');
const VERSION_REPLY = JSON.stringify({ cniVersion: CURRENT_VERSION, supportedVersions: SUPPORTED_VERSIONS });
const MiB = 1 << 20;

interface ShimRun { code: number | null; signal: string | null; stdout: string; stderr: string; ms: number }

/** Execs the shim with exactly `env` and `stdin` (null: a stdin pipe never closed); resolves when it exits. */
function runShim(env: Record<string, string>, stdin: string | Buffer | null): Promise<ShimRun> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn(SHIM, [], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.stdin.on('error', () => {});  // EPIPE: the shim stops reading at its stdin cap
    child.on('error', reject);
    if (stdin === null) child.on('exit', () => child.stdin.destroy());  // else 'close' waits for our end of the pipe
    child.on('close', (code, signal) => resolve({
      code, signal, ms: Number(process.hrtime.bigint() - t0) / 1e6,
      stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'),
    }));
    if (stdin === null) {
      child.stdin.write('{"cniVersion":"1.0.0",');
      closers.push(async () => { child.stdin.destroy(); });
    } else {
      child.stdin.end(stdin);
    }
  });
}

interface Recorded { method: string; url: string; headers: IncomingHttpHeaders; body: string }
type Answer = { status: number; exit?: number; body?: string } | 'hang';

interface Agent { requests: Recorded[]; close(): Promise<void> }

let dirs: string[] = [];
let closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempRunDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-cnishim-'));
  dirs.push(d);
  const run = join(d, 'run');
  mkdirSync(run);
  return run;
}

const sock = (runDir: string) => join(runDir, 'pluginevent.sock');

/** An agent-like node:http server on `<runDir>/pluginevent.sock`: records every request, answers with `answer`. */
async function startAgent(runDir: string, answer: (req: Recorded, n: number) => Answer): Promise<Agent> {
  const requests: Recorded[] = [];
  const hanging: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rec = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      requests.push(rec);
      const a = answer(rec, requests.length - 1);
      if (a === 'hang') {
        hanging.push(res);
        return;
      }
      const body = Buffer.from(a.body ?? '', 'utf8');
      const headers: Record<string, string | number> = { 'Content-Type': 'application/json', 'Content-Length': body.length };
      if (a.exit !== undefined) headers['X-Podwire-Cni-Exit'] = String(a.exit);
      res.writeHead(a.status, headers);
      res.end(body);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(sock(runDir), () => resolve());
  });
  const close = async () => {
    for (const r of hanging) r.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  closers.push(close);
  return { requests, close };
}

/** A server that reads one whole request, then writes `raw` (and closes unless `keepOpen`). */
async function startRawAgent(runDir: string, raw: string | Buffer, keepOpen = false): Promise<{ requests: number }> {
  const state = { requests: 0 };
  const sockets = new Set<Socket>();
  const server: NetServer = createNetServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
    let buf = Buffer.alloc(0);
    s.on('data', (c: Buffer) => {
      buf = Buffer.concat([buf, c]);
      const head = buf.indexOf('\r\n\r\n');
      const len = /content-length: (\d+)/i.exec(buf.subarray(0, Math.max(head, 0)).toString('latin1'));
      if (head < 0 || !len || buf.length < head + 4 + Number(len[1])) return;
      state.requests++;
      if (keepOpen) s.write(raw);
      else s.end(raw);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(sock(runDir), () => resolve());
  });
  closers.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return state;
}

const POD_ARGS = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=c0ffee01;K8S_POD_UID=uid-1';

function cniEnv(command: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    CNI_COMMAND: command, CNI_CONTAINERID: 'c0ffee01', CNI_NETNS: '/var/run/netns/cni-1', CNI_IFNAME: 'eth0',
    CNI_ARGS: POD_ARGS, CNI_PATH: '/opt/cni/bin', ...extra,
  };
}

function conf(runDir: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'istio-cni', cni_agent_run_dir: runDir, agent_wait_ms: 300, ...extra });
}

function cniError(r: ShimRun): { cniVersion: string; code: number; msg: string; details: string } {
  expect(r.code).toBe(1);
  return JSON.parse(r.stdout);
}

/** Writes `<runDir>/cni-decisions.json` as the agent does (root, 0600), or as `body` says. */
function writeDecisionFile(runDir: string, doc: unknown = DECISIONS, mode = 0o600): string {
  const path = join(runDir, DECISION_FILE);
  writeFileSync(path, typeof doc === 'string' ? doc : JSON.stringify(doc), { mode });
  chmodSync(path, mode);
  return path;
}

/** The agent's decision file for these tests: `shop` may be meshed; `plain` is not. */
const DECISIONS = {
  version: 1, generation: 7, writtenAtMs: 1764636000000, node: 'node-a', excludeNamespaces: ['kube-system'],
  meshNamespaces: ['shop'],
  pods: [
    { namespace: 'plain', name: 'app-0', uid: 'uid-1', mesh: false },
    { namespace: 'shop', name: 'batch-1', uid: 'uid-1', mesh: false },
    { namespace: 'shop', name: 'old-0', uid: 'uid-old', mesh: false },
    { namespace: 'shop', name: 'web-0', uid: 'uid-1', mesh: true },
  ],
};

const podArgs = (ns: string, name: string, uid = 'uid-1') => `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=c0ffee01;K8S_POD_UID=${uid}`;

// A prevResult as bridge + host-local print it, and what upstream passes on for it.
const PREV = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/cni-1' }], ips: [{ address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 0 }], dns: {} };
const PREV_OUT = passThrough(PREV, '1.0.0');

const linux = process.platform === 'linux';

describe.skipIf(!linux)('podwire-cni', () => {
  beforeAll(() => {
    if (!existsSync(SHIM)) throw new Error(`${SHIM} is missing: build it with npm run build:native`);
  });

  it('answers VERSION itself, with no agent anywhere', async () => {
    const r = await runShim({ CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}');
    expect(r).toMatchObject({ code: 0, stdout: VERSION_REPLY, stderr: '' });
    expect((await runShim({ CNI_COMMAND: 'VERSION' }, 'not json at all')).stdout).toBe(VERSION_REPLY);
  });

  it('forwards ADD exactly and relays stdout and the exit code', async () => {
    const run = tempRunDir();
    const result = '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/var/run/netns/cni-1"}],"ips":[{"address":"10.244.0.5/24","interface":0}]}';
    const failure = '{"cniVersion":"1.0.0","code":11,"msg":"pod not found","details":"retry"}';
    const agent = await startAgent(run, (req) => (JSON.parse(req.body).env.CNI_CONTAINERID === 'fail'
      ? { status: 200, exit: 1, body: failure } : { status: 200, exit: 0, body: result }));
    // Escaping: raw UTF-8 (2, 3 and 4 bytes), U+2028, DEL, tabs and newlines between tokens, escapes inside strings.
    const stdin = `{\n\t"cniVersion": "1.0.0", "name": "k8s-pod-network", "type": "istio-cni",\n  "cni_agent_run_dir": ${JSON.stringify(run)},\n` +
      '  "note": "caf\u00e9 \u20ac \u{1F600} \u2028 \x7f", "esc": "q\\"b\\\\s\\n\\u00e9\\ud83d\\ude00", "n": [1, -2.5e3, true, null]\n}\n';
    const env = {
      CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c0ffee01', HOME: '/root', CNI_NETNS: '/var/run/netns/cni-1', CNI_IFNAME: 'eth0',
      CNI_ARGS: POD_ARGS, CNI_PATH: '/opt/cni/bin:/usr/lib/cni', CNI_EMPTY: '', OTHER: 'not forwarded',
    };
    const r = await runShim(env, stdin);
    expect(r).toMatchObject({ code: 0, stdout: result, stderr: '' });
    expect(agent.requests).toHaveLength(1);
    const req = agent.requests[0];
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/v1/cni');
    expect(req.headers).toMatchObject({ host: 'podwire', 'content-type': 'application/json', connection: 'close' });
    expect(Number(req.headers['content-length'])).toBe(Buffer.byteLength(req.body));
    const { HOME: _h, OTHER: _o, ...cniVars } = env;
    expect(req.body).toBe(JSON.stringify({ command: 'ADD', env: cniVars, config: stdin }));

    const f = await runShim({ ...env, CNI_CONTAINERID: 'fail' }, stdin);
    expect(f).toMatchObject({ code: 1, stdout: failure });
  });

  it('accepts a stdin of exactly 1 MiB and refuses one byte more (code 7, nothing sent)', async () => {
    const run = tempRunDir();
    const agent = await startAgent(run, () => ({ status: 200, exit: 0, body: '{}' }));
    const base = conf(run);
    const exact = base.slice(0, -1) + ' '.repeat(MiB - base.length) + '}';
    expect(exact.length).toBe(MiB);
    const ok = await runShim(cniEnv('ADD'), exact);
    expect(ok).toMatchObject({ code: 0, stdout: '{}' });
    expect(JSON.parse(agent.requests[0].body).config).toBe(exact);
    const big = await runShim(cniEnv('ADD'), exact + ' ');
    const e = cniError(big);
    expect(e.code).toBe(7);
    expect(e.msg).toContain('over 1 MiB');
    expect(agent.requests).toHaveLength(1);
  });

  it('reports bad invocations itself: codes 4, 6 and 7', async () => {
    const run = tempRunDir();
    const agent = await startAgent(run, () => ({ status: 200, exit: 0, body: '' }));
    const noCmd = cniError(await runShim({ CNI_CONTAINERID: 'x' }, conf(run)));
    expect(noCmd).toMatchObject({ cniVersion: '1.0.0', code: 4, msg: 'podwire: CNI_COMMAND is not set' });
    expect(cniError(await runShim(cniEnv('FROB'), conf(run)))).toMatchObject({ code: 4, msg: 'podwire: unknown CNI_COMMAND' });
    // The oversized variable first in the environment: CNI_COMMAND is still seen; VERSION still answers.
    const big = 'x'.repeat(64 * 1024 + 1);
    const { CNI_ARGS: _add, ...add } = cniEnv('ADD');
    const hugeArgs = cniError(await runShim({ CNI_ARGS: big, ...add }, conf(run)));
    expect(hugeArgs).toMatchObject({ cniVersion: '1.0.0', code: 4, msg: 'podwire: invalid CNI environment variable' });
    expect(hugeArgs.details).toContain('CNI_ARGS is 65537 bytes');
    const { CNI_ARGS: _version, ...version } = cniEnv('VERSION');
    expect((await runShim({ CNI_ARGS: big, ...version }, '')).stdout).toBe(VERSION_REPLY);
    const bad = cniError(await runShim(cniEnv('ADD'), '{"cniVersion":"1.0.0",'));
    expect(bad).toMatchObject({ cniVersion: '1.1.0', code: 6 });
    expect(bad.details).toContain('not valid JSON');
    expect(cniError(await runShim(cniEnv('DEL'), '')).code).toBe(6);
    const shape = cniError(await runShim(cniEnv('ADD'), conf(run, { agent_wait_ms: 'soon' })));
    expect(shape.code).toBe(7);
    expect(shape.details).toContain('agent_wait_ms');
    expect(cniError(await runShim(cniEnv('ADD'), '[]')).code).toBe(6);  // JSON, but not a configuration: as the agent
    expect(agent.requests).toHaveLength(0);
  });

  it('retries until the socket appears (300 ms after the start)', async () => {
    const run = tempRunDir();
    const pending = runShim(cniEnv('ADD'), conf(run, { agent_wait_ms: 5000 }));
    let agent: Agent | undefined;
    await new Promise((r) => setTimeout(r, 300));
    agent = await startAgent(run, () => ({ status: 200, exit: 0, body: '{"cniVersion":"1.0.0"}' }));
    const r = await pending;
    expect(r).toMatchObject({ code: 0, stdout: '{"cniVersion":"1.0.0"}' });
    expect(r.ms).toBeGreaterThanOrEqual(300);
    expect(agent.requests).toHaveLength(1);
  });

  it('retries a 503 (not ready) and takes the 200 that follows', async () => {
    const run = tempRunDir();
    const agent = await startAgent(run, (_req, n) => (n < 2
      ? { status: 503, body: 'node agent not ready\n' } : { status: 200, exit: 0, body: '{"cniVersion":"1.0.0"}' }));
    const r = await runShim(cniEnv('ADD'), conf(run, { agent_wait_ms: 5000 }));
    expect(r).toMatchObject({ code: 0, stdout: '{"cniVersion":"1.0.0"}' });
    expect(agent.requests).toHaveLength(3);
    expect(r.ms).toBeGreaterThanOrEqual(200);  // two 100 ms pauses
    expect(new Set(agent.requests.map((q) => q.body)).size).toBe(1);  // the same request each time
  });

  it('works with the agent\'s real endpoint (lib/cni/endpoint.ts), 503 included', async () => {
    const run = tempRunDir();
    let calls = 0;
    const seen: string[] = [];
    const ep: CniEndpoint = await startCniEndpoint({
      runDir: run,
      onCmdAdd: async () => {},
      onCni: async (body) => {
        if (calls++ === 0) return 'not-ready';
        const inv = JSON.parse(body.toString('utf8'));
        seen.push(inv.command);
        return { exitCode: inv.command === 'CHECK' ? 1 : 0, stdout: JSON.stringify({ cniVersion: '1.0.0', got: inv.env.CNI_CONTAINERID }) };
      },
    });
    closers.push(() => ep.close());
    const add = await runShim(cniEnv('ADD'), conf(run, { agent_wait_ms: 5000 }));
    expect(add).toMatchObject({ code: 0, stdout: '{"cniVersion":"1.0.0","got":"c0ffee01"}' });
    expect((await runShim(cniEnv('CHECK'), conf(run))).code).toBe(1);
    expect(seen).toEqual(['ADD', 'CHECK']);
  });

  // "At once" below: agent_wait_ms is 60 s and the test's own timeout 10 s, so passing at all
  // shows the shim did not wait for the agent (no timing assertion).
  describe('decided before the agent is contacted', () => {
    it('an excluded namespace, the agent\'s own pod and a non-Kubernetes ADD pass at once, even with an agent there', async () => {
      const run = tempRunDir();
      const agent = await startAgent(run, () => ({ status: 200, exit: 1, body: 'must not be asked' }));
      const stdin = JSON.stringify({ cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'istio-cni', cni_agent_run_dir: run, agent_wait_ms: 60000, exclude_namespaces: ['kube-system'], pod_namespace: 'istio-system', prevResult: PREV });
      const r = await runShim(cniEnv('ADD', { CNI_ARGS: 'K8S_POD_NAME=coredns-1;K8S_POD_NAMESPACE=kube-system' }), stdin);
      expect(r).toMatchObject({ code: 0, stdout: PREV_OUT });
      expect(r.stderr).toContain('exclude_namespaces');
      const own = await runShim(cniEnv('ADD', { CNI_ARGS: 'K8S_POD_NAMESPACE=istio-system;K8S_POD_NAME=istio-cni-node-x7k2p' }), stdin);
      expect(own).toMatchObject({ code: 0, stdout: PREV_OUT });
      expect(own.stderr).toContain('own pod');
      const plain = await runShim(cniEnv('ADD', { CNI_ARGS: '' }), conf(run, { agent_wait_ms: 60000 }));
      expect(plain).toMatchObject({ code: 0, stdout: '{\n    "cniVersion": "1.0.0"\n}' });  // upstream: no "dns":{} in 1.x
      expect(agent.requests).toHaveLength(0);
    }, 10_000);

    it('with no agent at all, the same at once; the pass-through is upstream\'s bytes in every version', async () => {
      const run = tempRunDir();
      const args = { CNI_ARGS: 'K8S_POD_NAME=coredns-1;K8S_POD_NAMESPACE=kube-system' };
      for (const v of SUPPORTED_VERSIONS) {
        const prev = v.startsWith('1.') ? { ...PREV, cniVersion: v } : { ...PREV, cniVersion: v, ips: [{ ...PREV.ips[0], version: '4' }] };
        for (const p of [undefined, prev]) {
          const r = await runShim(cniEnv('ADD', args), conf(run, { cniVersion: v, agent_wait_ms: 60000, exclude_namespaces: ['kube-system'], ...(p ? { prevResult: p } : {}) }));
          expect(r).toMatchObject({ code: 0, stdout: passThrough(p, v) });
        }
      }
      // A prevResult upstream could not decode (another version family): code 6, still at once.
      const bad = cniError(await runShim(cniEnv('ADD', args), conf(run, { agent_wait_ms: 60000, exclude_namespaces: ['kube-system'], prevResult: { cniVersion: '0.4.0' } })));
      expect(bad.code).toBe(6);
    }, 10_000);
  });

  describe('agent down: the decision file', () => {
    it('a plain pod passes at once; an opted-out pod in a mesh namespace too', async () => {
      const run = tempRunDir();
      writeDecisionFile(run);
      const c = conf(run, { agent_wait_ms: 60000, prevResult: PREV });
      for (const args of [podArgs('plain', 'app-0'), podArgs('plain', 'not-listed'), podArgs('other', 'x'), podArgs('shop', 'batch-1')]) {
        const r = await runShim(cniEnv('ADD', { CNI_ARGS: args }), c);
        expect(r).toMatchObject({ code: 0, stdout: PREV_OUT });
        expect(r.stderr).toContain('decision file generation 7');
      }
    }, 10_000);

    it('a plain pod passes at once while the agent answers 503 (starting)', async () => {
      const run = tempRunDir();
      writeDecisionFile(run);
      const agent = await startAgent(run, () => ({ status: 503, body: 'node agent not ready\n' }));
      const r = await runShim(cniEnv('ADD', { CNI_ARGS: podArgs('plain', 'app-0') }), conf(run, { agent_wait_ms: 60000, prevResult: PREV }));
      expect(r).toMatchObject({ code: 0, stdout: PREV_OUT });
      expect(agent.requests).toHaveLength(1);
    }, 10_000);

    it('pods that may need the mesh fail closed: code 11 after agent_wait_ms', async () => {
      const run = tempRunDir();
      writeDecisionFile(run);
      const cases: Array<[string, string, Record<string, unknown>?]> = [
        [podArgs('shop', 'web-0'), 'lists the pod as in the mesh'],
        [podArgs('shop', 'unknown-0'), 'its namespace may be in the mesh'],
        [podArgs('shop', 'old-0', 'uid-1'), 'its namespace may be in the mesh'],  // the entry is a previous pod (uid-old): ignored
        [podArgs('plain', 'side-0'), 'sidecar.istio.io/status', { runtimeConfig: { 'io.kubernetes.cri.pod-annotations': { 'sidecar.istio.io/status': '{}' } } }],
      ];
      for (const [args, why, extra] of cases) {
        const r = await runShim(cniEnv('ADD', { CNI_ARGS: args }), conf(run, { prevResult: PREV, ...extra }));
        const e = cniError(r);
        expect(e).toMatchObject({ code: 11, msg: `podwire: node agent not reachable at ${sock(run)}` });
        expect(e.details).toContain('agent_wait_ms 300');
        expect(e.details).toContain(why);
      }
    });

    it('a file that is not the agent\'s is no file: fail closed', async () => {
      const run = tempRunDir();
      const attempt = async () => cniError(await runShim(cniEnv('ADD', { CNI_ARGS: podArgs('plain', 'app-0') }), conf(run, { prevResult: PREV })));
      const path = join(run, DECISION_FILE);
      // Sanity: the good file passes.
      writeDecisionFile(run);
      expect((await runShim(cniEnv('ADD', { CNI_ARGS: podArgs('plain', 'app-0') }), conf(run))).code).toBe(0);
      const variants: Array<[string, () => void, string]> = [
        ['world-writable', () => writeDecisionFile(run, DECISIONS, 0o602), 'writable by group or others'],
        ['group-writable', () => writeDecisionFile(run, DECISIONS, 0o620), 'writable by group or others'],
        ['not root\'s', () => { writeDecisionFile(run); chownSync(path, 4242, 4242); }, 'owned by uid 4242'],
        ['a symlink', () => { const real = join(run, 'real.json'); writeFileSync(real, JSON.stringify(DECISIONS), { mode: 0o600 }); symlinkSync(real, path); }, 'a symlink'],
        ['oversized', () => writeDecisionFile(run, JSON.stringify(DECISIONS).replace('"node"', `${' '.repeat(MiB)}"node"`)), 'over 1048576 bytes'],
        ['another version', () => writeDecisionFile(run, { ...DECISIONS, version: 2 }), 'version is not 1'],
        ['an unknown key', () => writeDecisionFile(run, { ...DECISIONS, extra: true }), 'unknown key'],
        ['not JSON', () => writeDecisionFile(run, '{"version":1,'), 'not JSON'],
        ['missing', () => {}, 'No such file'],
      ];
      for (const [what, make, why] of variants) {
        rmSync(path, { force: true });
        make();
        const e = await attempt();
        expect(e.code, what).toBe(11);
        expect(e.details, what).toContain(why);
      }
    });
  });

  describe('an agent that dies mid-request is unreachable, not a protocol error', () => {
    const gone: Array<[string, string]> = [
      ['a close without an answer', ''],
      ['a truncated status line', 'HTTP/1.1 20'],
      ['truncated headers', 'HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Le'],
      ['a truncated body', 'HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Length: 100\r\n\r\n{"cniVersion"'],
    ];
    for (const [what, raw] of gone) {
      it(`${what}: ADD retries, then code 11 "not reachable"; a plain pod passes by the file; DEL is queued`, async () => {
        const run = tempRunDir();
        const agent = await startRawAgent(run, raw);
        const e = cniError(await runShim(cniEnv('ADD'), conf(run)));
        expect(e).toMatchObject({ code: 11, msg: `podwire: node agent not reachable at ${sock(run)}` });
        expect(e.details).toContain('the agent closed the connection');
        expect(agent.requests).toBeGreaterThan(1);  // retried like a missing socket
        const del = await runShim(cniEnv('DEL'), conf(run));
        expect(del).toMatchObject({ code: 0, stdout: '' });
        expect(readdirSync(join(run, 'cni-del-queue'))).toHaveLength(1);
        writeDecisionFile(run);
        const before = agent.requests;
        const plain = await runShim(cniEnv('ADD', { CNI_ARGS: podArgs('plain', 'app-0') }), conf(run, { agent_wait_ms: 60000, prevResult: PREV }));
        expect(plain).toMatchObject({ code: 0, stdout: PREV_OUT });
        expect(agent.requests).toBe(before + 1);
      }, 10_000);
    }
  });

  it('a stdin that is never closed: code 6 after 10 s, not a hang', async () => {
    const r = await runShim(cniEnv('ADD'), null);
    const e = cniError(r);
    expect(e).toMatchObject({ code: 6, msg: 'podwire: stdin was not closed in time' });
    expect(e.details).toContain('within 10000 ms');
  }, 20_000);

  describe('agent unreachable (agent_wait_ms 300)', () => {
    it('fails every other ADD with code 11 naming the socket, after agent_wait_ms', async () => {
      const run = tempRunDir();
      const r = await runShim(cniEnv('ADD'), conf(run, { exclude_namespaces: ['kube-system'] }));
      const e = cniError(r);
      expect(e).toMatchObject({ cniVersion: '1.0.0', code: 11, msg: `podwire: node agent not reachable at ${sock(run)}` });
      expect(e.details).toContain('No such file or directory');
      expect(e.details).toContain('agent_wait_ms 300');
      expect(r.ms).toBeGreaterThanOrEqual(290);
      expect(r.ms).toBeLessThan(5000);
      // Something that is not a listening socket at the path: refused, same answer.
      writeFileSync(sock(run), '');
      const refused = cniError(await runShim(cniEnv('ADD'), conf(run)));
      expect(refused.code).toBe(11);
      expect(refused.details).toContain('Connection refused');
    });

    it('DEL succeeds and leaves a queue record with the invocation\'s fields', async () => {
      const run = tempRunDir();
      const before = Date.now();
      const r = await runShim(cniEnv('DEL', { CNI_NETNS: '' }), conf(run));
      const after = Date.now();
      expect(r).toMatchObject({ code: 0, stdout: '' });
      const q = join(run, 'cni-del-queue');
      expect(statSync(q).mode & 0o777).toBe(0o700);
      const names = readdirSync(q);
      expect(names).toHaveLength(1);
      const m = /^(\d+)-c0ffee01\.json$/.exec(names[0]);
      expect(m).not.toBeNull();
      expect(statSync(join(q, names[0])).mode & 0o777).toBe(0o600);
      const rec = JSON.parse(readFileSync(join(q, names[0]), 'utf8'));
      expect(rec).toEqual({
        containerId: 'c0ffee01', netns: '', ifname: 'eth0', podNamespace: 'default', podName: 'web-0', podUid: 'uid-1',
        time: new Date(Number(m![1])).toISOString(),
      });
      expect(Number(m![1])).toBeGreaterThanOrEqual(before);
      expect(Number(m![1])).toBeLessThanOrEqual(after);
      expect(r.stderr).toContain(join(q, names[0]));
    });

    it('DEL writes no record beyond 4096 and still succeeds', async () => {
      const run = tempRunDir();
      const q = join(run, 'cni-del-queue');
      mkdirSync(q, { mode: 0o700 });
      for (let i = 0; i < 4096; i++) writeFileSync(join(q, `${1000 + i}-old${i}.json`), '{}');
      const r = await runShim(cniEnv('DEL'), conf(run));
      expect(r).toMatchObject({ code: 0, stdout: '' });
      expect(r.stderr).toContain('4096 records');
      expect(readdirSync(q)).toHaveLength(4096);
    });

    it('CHECK and GC fail with 11; STATUS with 50 unless status_always_ok', async () => {
      const run = tempRunDir();
      expect(cniError(await runShim(cniEnv('CHECK'), conf(run))).code).toBe(11);
      expect(cniError(await runShim({ CNI_COMMAND: 'GC', CNI_PATH: '/opt/cni/bin' }, conf(run))).code).toBe(11);
      const st = cniError(await runShim({ CNI_COMMAND: 'STATUS' }, conf(run)));
      expect(st).toMatchObject({ code: 50, msg: `podwire: node agent not reachable at ${sock(run)}` });
      const ok = await runShim({ CNI_COMMAND: 'STATUS' }, conf(run, { status_always_ok: true }));
      expect(ok).toMatchObject({ code: 0, stdout: '' });
    });

    it('an agent that never answers: agent_timeout_ms, then the same fallbacks', async () => {
      const run = tempRunDir();
      const agent = await startAgent(run, () => 'hang');
      const r = await runShim(cniEnv('ADD'), conf(run, { agent_timeout_ms: 300 }));
      const e = cniError(r);
      expect(e.code).toBe(11);
      expect(e.details).toContain('no complete answer within 300 ms (agent_timeout_ms)');
      expect(agent.requests).toHaveLength(1);  // not retried
      const del = await runShim(cniEnv('DEL'), conf(run, { agent_timeout_ms: 300 }));
      expect(del).toMatchObject({ code: 0, stdout: '' });
      expect(readdirSync(join(run, 'cni-del-queue'))).toHaveLength(1);
    });
  });

  describe('answers that break the protocol are code 11 naming the socket', () => {
    const cases: Array<[string, string | Buffer, string]> = [
      ['another status', 'HTTP/1.1 500 Internal Server Error\r\nContent-Length: 5\r\n\r\nboom\n', 'unexpected status "500 Internal Server Error"'],
      ['no exit header', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}', 'no X-Podwire-Cni-Exit header'],
      ['no Content-Length', 'HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\n\r\n{}', 'no Content-Length header'],
      ['chunked', 'HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n', 'Transfer-Encoding "chunked" is not accepted'],
      ['an oversized body', `HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Length: ${2 * MiB}\r\n\r\n`, 'over the 1048576-byte limit'],
      ['a bad exit code', 'HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 300\r\nContent-Length: 0\r\n\r\n', 'bad X-Podwire-Cni-Exit "300"'],
      ['garbage', 'hello there\r\n\r\n', 'bad status line "h"'],
      ['garbage, then a close', 'HTTP/1.1 2x', 'bad status line "HTTP/1.1 2x"'],
    ];
    for (const [what, raw, detail] of cases) {
      it(what, async () => {
        const run = tempRunDir();
        const agent = await startRawAgent(run, raw);
        const e = cniError(await runShim(cniEnv('ADD'), conf(run, { agent_wait_ms: 2000 })));
        expect(e).toMatchObject({ code: 11, msg: `podwire: invalid answer from the node agent at ${sock(run)}` });
        expect(e.details).toContain(detail);
        expect(agent.requests).toBe(1);  // a protocol error is not retried
      });
    }

    it('a body larger than 1 MiB that is actually sent, on a connection left open', async () => {
      const run = tempRunDir();
      const body = Buffer.alloc(MiB + 10, 'x');
      await startRawAgent(run, Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Length: ${body.length}\r\n\r\n`), body]), true);
      const e = cniError(await runShim(cniEnv('ADD'), conf(run)));
      expect(e.code).toBe(11);
      expect(e.details).toContain('over the 1048576-byte limit');
    });
  });
});
