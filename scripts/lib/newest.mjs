// The newest modification time (ms) of the files under `dir` whose names end in one of `exts`:
// what the build scripts compare outputs against to tell a stale build.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export function newest(dir, exts) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) t = Math.max(t, newest(p, exts));
    else if (exts.some((x) => e.name.endsWith(x))) t = Math.max(t, statSync(p).mtimeMs);
  }
  return t;
}
