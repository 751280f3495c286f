// Where the JS fuzzers save an input that broke a decoder (the worker for
// findings, the runner for hangs): <dir>/<target>-<kind>-<sha1>.bin plus a .txt report.
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function saveArtifact(dir: string, target: string, kind: string, data: Uint8Array, text: string): string {
  mkdirSync(dir, { recursive: true });
  const hash = createHash('sha1').update(data).digest('hex').slice(0, 16);
  const file = join(dir, `${target}-${kind}-${hash}.bin`);
  writeFileSync(file, data);
  writeFileSync(`${file}.txt`, text);
  return file;
}
