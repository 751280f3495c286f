// Privileged tests need root and the real tools. Outside CI they are skipped
// loudly when a prerequisite is missing; with CI=true a missing prerequisite
// fails the run instead (no silently skipped privileged tests in CI).
import { execFileSync } from 'node:child_process';

const inCI = process.env.CI === 'true' || process.env.CI === '1';

function missing(tools: string[]): string[] {
  const out: string[] = [];
  if (process.getuid?.() !== 0) out.push('root');
  for (const t of tools) {
    try {
      execFileSync('sh', ['-c', 'command -v "$1"', 'sh', t], { stdio: 'ignore' });
    } catch {
      out.push(t);
    }
  }
  return out;
}

/**
 * Returns true when the privileged suite can run. In CI a missing
 * prerequisite throws (the file fails); elsewhere it warns and returns false
 * (use with `describe.skipIf(!privileged(...))`).
 */
export function privileged(...tools: string[]): boolean {
  const gone = missing(['ip', ...tools]);
  if (gone.length === 0) return true;
  const msg = `privileged tests need: ${gone.join(', ')}`;
  if (inCI) throw new Error(`${msg} (CI=true: refusing to skip)`);
  process.stderr.write(`SKIPPING privileged tests: ${msg}\n`);
  return false;
}
