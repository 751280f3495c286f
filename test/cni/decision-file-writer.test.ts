// DecisionFileWriter (lib/cni/decision-file.ts): against the real kube-apiserver through the real
// informers, with real files in a temp dir: written only after start(), rewritten when a
// namespace is labelled ambient, left in place by stop(); root-owned, 0600, a regular file; a
// symlink at its path replaced (its target untouched), leftover temporaries harmless, a failed
// write retried. The debounce is checked with an event source the test drives, so it is exact.
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PatchStrategy, type V1Namespace, type V1Pod } from '@kubernetes/client-node';
import { DecisionFileWriter } from '../../lib/cni/decision-file.js';
import type { Informer } from '../../lib/kube/informer.js';
import { namespaceInformer, podInformer } from '../../lib/kube/resources.js';
import { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from '../../lib/mesh/enablement.js';
import type { SelectionPolicy } from '../../lib/mesh/decision.js';
import { adminClient, agentClient, createPod, describeKube, freshNamespace, until } from '../helpers/kube.js';

const policy: SelectionPolicy = {
  selectors: compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS),
  excludeNamespaces: new Set(['kube-system']),
  systemNamespace: 'istio-system',
  podNamespace: 'istio-system',
};

interface FileShape {
  version: number; generation: number; writtenAtMs: number; node: string;
  excludeNamespaces: string[]; meshNamespaces: string[];
  pods: Array<{ namespace: string; name: string; uid: string; mesh: boolean }>;
}

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'pwt-decisions-'));
  cleanups.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

interface Logged { level: string; msg: string }
function logger(lines: Logged[] = []) {
  const at = (level: string) => (msg: string) => { lines.push({ level, msg }); };
  return { lines, log: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

const read = (path: string) => JSON.parse(readFileSync(path, 'utf8')) as FileShape;
const tryRead = (path: string) => { try { return read(path); } catch { return undefined; } };

let nodeSeq = 0;

/** Real informers (as the agent's ServiceAccount) for a node of the test's own; stopped after the test. */
async function informers() {
  const client = agentClient();
  const node = `pwt-${process.pid}-dec${++nodeSeq}`;
  const pods = podInformer(client, { nodeName: node });
  const namespaces = namespaceInformer(client);
  cleanups.push(async () => {
    await Promise.all([pods.stop(), namespaces.stop()]);
    client.close();
  });
  await Promise.all([pods.start().synced, namespaces.start().synced]);
  return { node, pods, namespaces };
}

function writer(o: { pods: DecisionFileWriterPods; namespaces: DecisionFileWriterNamespaces; node: string; runDir: string; debounceMs?: number; retryMs?: number }, log = logger()) {
  const w = new DecisionFileWriter({
    pods: o.pods, namespaces: o.namespaces, policy, nodeName: o.node, runDir: o.runDir, log: log.log,
    ...(o.debounceMs !== undefined ? { debounceMs: o.debounceMs } : {}), ...(o.retryMs !== undefined ? { retryMs: o.retryMs } : {}),
  });
  cleanups.push(() => w.stop());
  return w;
}
type DecisionFileWriterPods = Pick<Informer<V1Pod>, 'on' | 'list'>;
type DecisionFileWriterNamespaces = Pick<Informer<V1Namespace>, 'on' | 'list' | 'get'>;

async function setNamespaceLabel(name: string, value: string | null): Promise<void> {
  const admin = adminClient();
  await admin.call({ verb: 'patch', resource: 'namespaces', name },
    (o) => admin.core.patchNamespace({ name, body: { metadata: { labels: { 'istio.io/dataplane-mode': value } } } }, o),
    { contentType: PatchStrategy.MergePatch });
}

describeKube('DecisionFileWriter with the real informers', () => {
  it('writes only after start(); labelling the namespace ambient rewrites it; stop() leaves it; root, 0600, regular', async () => {
    const admin = adminClient();
    const ns = await freshNamespace(admin);
    const inf = await informers();
    const runDir = tempDir();
    const path = join(runDir, 'cni-decisions.json');
    await createPod(admin, ns, 'web-0', inf.node);
    await createPod(admin, ns, 'opted-out', inf.node, { 'istio.io/dataplane-mode': 'none' });
    await until('both pods in the cache', () => inf.pods.list().filter((p) => p.metadata?.namespace === ns).length === 2);

    const w = writer({ pods: inf.pods, namespaces: inf.namespaces, node: inf.node, runDir, debounceMs: 50 });
    await createPod(admin, ns, 'web-1', inf.node);
    await until('web-1 in the cache', () => inf.pods.get('web-1', ns));
    expect(readdirSync(runDir)).toEqual([]);  // events before start() write nothing

    w.start();
    const first = read(path);
    expect(first).toMatchObject({ version: 1, generation: 1, node: inf.node, excludeNamespaces: ['kube-system'] });
    expect(first.meshNamespaces).not.toContain(ns);
    const mine = (f: FileShape) => f.pods.filter((p) => p.namespace === ns).map((p) => [p.name, p.mesh]);
    expect(mine(first)).toEqual([['opted-out', false], ['web-0', false], ['web-1', false]]);
    expect(first.pods.find((p) => p.name === 'web-0')!.uid).toBe(inf.pods.get('web-0', ns)!.metadata!.uid);

    const st = lstatSync(path);
    expect(st.isFile()).toBe(true);
    expect(st.mode & 0o7777).toBe(0o600);
    expect(st.uid).toBe(0);

    await setNamespaceLabel(ns, 'ambient');
    const labelled = await until('the file lists the ambient namespace', () => {
      const f = tryRead(path);
      return f && f.meshNamespaces.includes(ns) ? f : undefined;
    });
    expect(mine(labelled)).toEqual([['opted-out', false], ['web-0', true], ['web-1', true]]);
    expect(labelled.generation).toBeGreaterThan(first.generation);
    expect(labelled.generation).toBe(w.generation);
    expect(lstatSync(path).mode & 0o7777).toBe(0o600);

    w.stop();
    const kept = readFileSync(path, 'utf8');
    // After stop, a change the informers see is not written, and the file stays.
    await setNamespaceLabel(ns, null);
    await until('the informer saw the unlabel', () => inf.namespaces.get(ns)?.metadata?.labels?.['istio.io/dataplane-mode'] === undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(readFileSync(path, 'utf8')).toBe(kept);
    expect(w.stats.failures).toBe(0);
  });

  it('a symlink planted at the final path is replaced, never followed; leftover temporaries do not break writing', async () => {
    const inf = await informers();
    const runDir = tempDir();
    const elsewhere = tempDir();
    const target = join(elsewhere, 'precious');
    writeFileSync(target, 'keep me', { mode: 0o644 });
    const path = join(runDir, 'cni-decisions.json');
    symlinkSync(target, path);
    // What an interrupted write of an earlier agent leaves, one a link to the target; and one that cannot be removed.
    const leftover = join(runDir, '.cni-decisions.json.0123456789abcdef.tmp');
    writeFileSync(leftover, '{"half":');
    symlinkSync(target, join(runDir, '.cni-decisions.json.fedcba9876543210.tmp'));
    mkdirSync(join(runDir, '.cni-decisions.json.00000000000000aa.tmp'));
    const w = writer({ pods: inf.pods, namespaces: inf.namespaces, node: inf.node, runDir });
    w.start();
    expect(lstatSync(path).isFile()).toBe(true);
    expect(read(path)).toMatchObject({ version: 1, generation: 1, node: inf.node });
    expect(readFileSync(target, 'utf8')).toBe('keep me');
    expect(statSync(target).mode & 0o777).toBe(0o644);
    // The file-like leftovers are gone (the link itself, not its target); the directory stays and did no harm.
    expect(readdirSync(runDir).sort()).toEqual(['.cni-decisions.json.00000000000000aa.tmp', 'cni-decisions.json']);
    expect(w.stats).toMatchObject({ writes: 1, failures: 0 });
  });

  it('a failed write is logged and retried until it succeeds (never thrown into the informer)', async () => {
    const inf = await informers();
    const runDir = tempDir();
    const path = join(runDir, 'cni-decisions.json');
    mkdirSync(path);  // rename over a directory fails
    writeFileSync(join(path, 'x'), '');
    const log = logger();
    const w = writer({ pods: inf.pods, namespaces: inf.namespaces, node: inf.node, runDir, retryMs: 20 }, log);
    w.start();
    expect(w.stats.failures).toBe(1);
    expect(log.lines.find((l) => l.level === 'warn')?.msg).toMatch(/^decision file: writing failed \((EISDIR|ENOTEMPTY|EEXIST)\)/);
    expect(readdirSync(runDir)).toEqual(['cni-decisions.json']);  // the temporary was removed
    rmSync(path, { recursive: true });
    await until('written by a retry', () => tryRead(path));
    expect(lstatSync(path).isFile()).toBe(true);
    expect(read(path).generation).toBe(1);  // generations count writes, not attempts
    expect(log.lines.some((l) => l.level === 'info' && l.msg.startsWith('decision file written again'))).toBe(true);
  });
});

/** An event source the test drives: the informer's interface, its cache a Map. */
class Source<T extends { metadata?: { name?: string; namespace?: string } }> {
  readonly items = new Map<string, T>();
  private readonly fns: Record<string, Array<(a: T, b?: T) => void>> = { add: [], update: [], delete: [], error: [] };
  on(event: string, fn: (a: T, b?: T) => void): () => void {
    this.fns[event]!.push(fn);
    return () => undefined;
  }
  list(): T[] { return [...this.items.values()]; }
  get(name: string, namespace?: string): T | undefined { return this.items.get(namespace ? `${namespace}/${name}` : name); }
  put(o: T): void {
    const k = o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : `${o.metadata?.name}`;
    const old = this.items.get(k);
    this.items.set(k, o);
    for (const fn of this.fns[old ? 'update' : 'add']!) fn(o, old);
  }
}

describe('DecisionFileWriter: debounce', () => {
  it('a burst of a thousand pod events is one write; changes that leave the content alone are not written', async () => {
    const pods = new Source<V1Pod>();
    const namespaces = new Source<V1Namespace>();
    namespaces.put({ metadata: { name: 'apps', labels: { 'istio.io/dataplane-mode': 'ambient' } } });
    const runDir = tempDir();
    const path = join(runDir, 'cni-decisions.json');
    const w = writer({ pods: pods as unknown as DecisionFileWriterPods, namespaces: namespaces as unknown as DecisionFileWriterNamespaces, node: 'n', runDir, debounceMs: 30 });
    w.start();
    expect(w.stats).toMatchObject({ renders: 1, writes: 1 });
    for (let i = 0; i < 1000; i++) pods.put({ metadata: { namespace: 'apps', name: `p-${i}`, uid: `u-${i}`, resourceVersion: '1' }, status: { phase: 'Pending' } });
    expect(w.stats.renders).toBe(1);  // nothing rendered synchronously per event
    expect(w.pending).toBe(true);
    await until('the burst written', () => w.stats.writes === 2);
    expect(w.stats.renders).toBe(2);
    expect(read(path).pods).toHaveLength(1000);
    expect(read(path).generation).toBe(2);

    // Status churn: no entry changes, nothing even scheduled.
    const ino = statSync(path).ino;
    for (let i = 0; i < 1000; i++) pods.put({ metadata: { namespace: 'apps', name: `p-${i}`, uid: `u-${i}`, resourceVersion: '2' }, status: { phase: 'Running' } });
    expect(w.pending).toBe(false);
    // A namespace the file does not list: rendered, found unchanged, not rewritten.
    namespaces.put({ metadata: { name: 'plain' } });
    expect(w.pending).toBe(true);
    await until('the namespace add rendered', () => w.stats.renders === 3);
    expect(w.stats.writes).toBe(2);
    expect(statSync(path).ino).toBe(ino);

    // An opt-out is a change.
    pods.put({ metadata: { namespace: 'apps', name: 'p-7', uid: 'u-7', resourceVersion: '3', labels: { 'istio.io/dataplane-mode': 'none' } }, status: { phase: 'Running' } });
    await until('the opt-out written', () => w.stats.writes === 3);
    expect(read(path).pods.find((p) => p.name === 'p-7')).toMatchObject({ mesh: false, uid: 'u-7' });
    expect(w.stats.renders).toBe(4);
  });

  it('stop() writes a change still waiting for its timer, then nothing more', async () => {
    const pods = new Source<V1Pod>();
    const namespaces = new Source<V1Namespace>();
    namespaces.put({ metadata: { name: 'apps' } });
    const runDir = tempDir();
    const path = join(runDir, 'cni-decisions.json');
    const w = writer({ pods: pods as unknown as DecisionFileWriterPods, namespaces: namespaces as unknown as DecisionFileWriterNamespaces, node: 'n', runDir, debounceMs: 60_000 });
    w.start();
    expect(read(path).meshNamespaces).toEqual([]);
    namespaces.put({ metadata: { name: 'apps', labels: { 'istio.io/dataplane-mode': 'ambient' } } });
    expect(w.pending).toBe(true);
    w.stop();
    expect(w.pending).toBe(false);
    expect(read(path)).toMatchObject({ generation: 2, meshNamespaces: ['apps'] });
    namespaces.put({ metadata: { name: 'other', labels: { 'istio.io/dataplane-mode': 'ambient' } } });
    expect(w.pending).toBe(false);
    expect(read(path).meshNamespaces).toEqual(['apps']);
  });
});
