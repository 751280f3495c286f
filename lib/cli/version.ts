// `podwire --version` / `podwire agent --version`: the version of the installed
// package, read from its package.json (dist/cli/ and lib/cli/ are both two levels
// below it), so an image or a node can say which podwire it runs.
import { readFileSync } from 'node:fs';

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  if (typeof pkg.version !== 'string' || pkg.version === '') throw new Error('package.json has no version');
  return pkg.version;
}
