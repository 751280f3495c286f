// One fuzz target in a worker thread (started by scripts/fuzz-js.mjs): mutate,
// decode, keep inputs with new outcome signatures, save findings. Before each
// input it publishes the bytes and bumps a counter in shared memory, so the
// runner's watchdog can save the input and stop the worker when one input hangs.
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';

import { saveArtifact } from './artifacts.js';
import { Mutator, Rng } from './mutate.js';
import { allTargets, Finding, type Modules } from './targets.js';

export interface WorkerInput {
  target: string;
  modulePaths: Record<keyof Modules, string>;
  fixturesDir: string;
  seconds: number;
  seed: number;
  artifactsDir: string;
  /** An input that takes longer than this (but finishes) is a finding. */
  slowMs: number;
  maxFindings: number;
  /** [0] = inputs started, [1] = current input's length; then its bytes. */
  shared: SharedArrayBuffer;
  /** Replay these files instead of fuzzing. */
  replay?: string[];
}

export interface FindingReport {
  kind: string;
  message: string;
  file: string;
  hex: string;
  stack: string;
}

export interface WorkerResult {
  execs: number;
  corpus: number;
  signatures: number;
  findings: FindingReport[];
  slowestMs: number;
}

const CORPUS_MAX = 2000;

async function main(): Promise<void> {
  const w = workerData as WorkerInput;
  const mods = {} as Record<string, unknown>;
  for (const [k, p] of Object.entries(w.modulePaths)) mods[k] = await import(pathToFileURL(p).href);
  const target = allTargets(mods as unknown as Modules, w.fixturesDir).find((t) => t.name === w.target);
  if (!target) throw new Error(`no fuzz target ${w.target}`);
  const ctl = new Int32Array(w.shared, 0, 2);
  const window = new Uint8Array(w.shared, 8);
  const rng = new Rng(w.seed);
  const mutator = new Mutator(target.mutator);
  const findings: FindingReport[] = [];
  const seen = new Set<string>();
  let slowestMs = 0;

  const exec = (data: Buffer, how: string): string | undefined => {
    const n = Math.min(data.length, window.length);
    window.set(data.subarray(0, n));
    Atomics.store(ctl, 1, n);
    Atomics.add(ctl, 0, 1);
    const t0 = performance.now();
    let sig: string | undefined;
    let finding: Finding | undefined;
    try {
      sig = target.run(data);
    } catch (e) {
      finding = e instanceof Finding ? e : new Finding('harness-error', `the harness itself threw: ${(e as Error)?.message}`, e);
    }
    const dt = performance.now() - t0;
    slowestMs = Math.max(slowestMs, dt);
    if (!finding && dt > w.slowMs) finding = new Finding('slow', `one input took ${dt.toFixed(0)} ms (budget ${w.slowMs} ms)`);
    if (finding) {
      const key = `${finding.kind}:${finding.message.replace(/\d+/g, 'N').slice(0, 80)}`;
      if (!seen.has(key)) {
        seen.add(key);
        const orig = finding.original as Error | undefined;
        const stack = orig?.stack ?? finding.stack ?? '';
        const hex = data.toString('hex');
        const file = saveArtifact(w.artifactsDir, target.name, finding.kind, data,
          `${finding.kind}: ${finding.message}\nmutations: ${how}\ninput (${data.length} bytes): ${hex}\n\n${stack}\n`);
        findings.push({ kind: finding.kind, message: finding.message, file, hex, stack });
      }
      return undefined;
    }
    return sig;
  };

  const corpus: Buffer[] = [];
  const sigs = new Set<string>();
  let execs = 0;
  if (w.replay) {
    const { readFileSync } = await import('node:fs');
    for (const f of w.replay) {
      const sig = exec(readFileSync(f), `replay of ${f}`);
      console.log(`${f}: ${sig ?? 'FINDING'}`);
      execs++;
    }
  } else {
    for (const s of target.seeds()) {
      const sig = exec(s, 'seed');
      execs++;
      corpus.push(s);
      if (sig !== undefined) sigs.add(sig);
    }
    const end = performance.now() + w.seconds * 1000;
    while (findings.length < w.maxFindings) {
      if ((execs & 63) === 0 && performance.now() >= end) break;
      const base = corpus[rng.below(corpus.length)]!;
      const other = corpus[rng.below(corpus.length)]!;
      const { data, applied } = mutator.mutate(base, other, rng);
      const sig = exec(data, applied.join(','));
      execs++;
      if (sig !== undefined && !sigs.has(sig)) {
        sigs.add(sig);
        if (corpus.length < CORPUS_MAX) corpus.push(data);
        else corpus[rng.below(CORPUS_MAX)] = data;
      }
    }
  }
  const result: WorkerResult = { execs, corpus: corpus.length, signatures: sigs.size, findings, slowestMs };
  parentPort!.postMessage(result);
}

main().catch((e: unknown) => {
  parentPort!.postMessage({ fatal: (e as Error)?.stack ?? String(e) });
});
