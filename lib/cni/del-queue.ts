// DELs the shim could not hand to the agent (it was down): the shim left one
// record per DEL in `<run dir>/cni-del-queue/` (docs/cni-protocol.md). The
// agent drains them once at start, after its snapshot, so a sandbox torn
// down while it was away releases its netns handle and probe entries.
import { readdirSync, readFileSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';

export { DEL_QUEUE_DIR, DEL_QUEUE_MAX } from './constants.js';
import { DEL_QUEUE_DIR, DEL_QUEUE_MAX } from './constants.js';
const MAX_RECORD_BYTES = 64 * 1024;

export interface DelRecord {
  containerId: string;
  netns: string;
  ifname: string;
  podNamespace: string;
  podName: string;
  podUid: string;
  time: string;
}

export interface DrainReport {
  records: number;
  handled: number;
  /** Files that were not a record (removed, reported). */
  malformed: string[];
  failed: Array<{ file: string; error: string }>;
}

function parseRecord(text: string): DelRecord | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof doc !== 'object' || doc === null) return undefined;
  const d = doc as Record<string, unknown>;
  const keys = ['containerId', 'netns', 'ifname', 'podNamespace', 'podName', 'podUid', 'time'] as const;
  for (const k of keys) if (d[k] !== undefined && typeof d[k] !== 'string') return undefined;
  if (typeof d.containerId !== 'string' || d.containerId === '') return undefined;
  return Object.fromEntries(keys.map((k) => [k, (d[k] as string | undefined) ?? ''])) as unknown as DelRecord;
}

/**
 * Hands every queued record to `handle` (oldest first: names start with the
 * time) and removes it once handled; a record whose handler fails stays for
 * the next start. Missing dir = nothing queued.
 */
export async function drainDelQueue(runDir: string, handle: (r: DelRecord) => Promise<void>): Promise<DrainReport> {
  const dir = join(runDir, DEL_QUEUE_DIR);
  const report: DrainReport = { records: 0, handled: 0, malformed: [], failed: [] };
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json')).sort().slice(0, DEL_QUEUE_MAX);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return report;
    throw err;
  }
  for (const name of names) {
    const file = join(dir, name);
    let rec: DelRecord | undefined;
    try {
      const st = statSync(file);
      rec = st.isFile() && st.size <= MAX_RECORD_BYTES ? parseRecord(readFileSync(file, 'utf8')) : undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    if (!rec) {
      report.malformed.push(name);
      unlinkSync(file);
      continue;
    }
    report.records++;
    try {
      await handle(rec);
      unlinkSync(file);
      report.handled++;
    } catch (err) {
      report.failed.push({ file: name, error: (err as Error)?.message ?? String(err) });
    }
  }
  return report;
}
