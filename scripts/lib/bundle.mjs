// The `podwire` CLI as one ES module (esbuild), for the image's entrypoint: a process that loads
// one file instead of ~200 modules starts about 80 ms sooner and holds about 2 MB less
// (docs/benchmarks.md, "Agent memory and start-up"). Built from the compiled JS (dist/, or the
// benches' dist-bench/), never from lib/ directly, so it is exactly the code the tests ran.
//
// Where it may be written: the modules find the package by paths relative to their own URL
// (lib/install/config.ts: ../../build/Release/podwire-cni; lib/cli/version.ts: ../../package.json;
// lib/native.ts: the nearest podwire package.json above), and every module of dist/ is two levels
// below the package root. In a bundle all of them share the bundle's URL, so it must be too:
// `<package root>/<dir>/<dir>/<name>.mjs`. bundleCli refuses any other place.
//
// Left out (loaded at run time from node_modules, as before): the native addon and node-gyp-build
// (found through createRequire), and @kubernetes/client-node (only KubeClient.core/apps load it,
// which the CLI never calls).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The package root a bundle at `outfile` resolves its paths against (two levels up). */
export function bundleRoot(outfile) {
  return dirname(dirname(dirname(outfile)));
}

/**
 * Bundles `entry` (a compiled CLI entry: bin/podwire.js or bench/lib/podwire-bin.js of dist-bench)
 * into `outfile`, executable with its `#!/usr/bin/env node`, or `#!<interpreter>` when given (the
 * image's: node's path and one V8 flag). Resolves to the bundle's size in bytes.
 */
export async function bundleCli({ entry, outfile, interpreter }) {
  if (interpreter !== undefined && !/^\/\S+( -{1,2}[a-z][a-z0-9-]*)?$/.test(interpreter)) {
    throw new Error(`bundle ${outfile}: interpreter must be an absolute path and at most one flag (Linux passes the rest of a #! line as one argument), got ${JSON.stringify(interpreter)}`);
  }
  const root = bundleRoot(outfile);
  const pkg = join(root, 'package.json');
  if (!existsSync(pkg) || JSON.parse(readFileSync(pkg, 'utf8')).name !== 'podwire') {
    throw new Error(`bundle ${outfile}: must be two directories below the podwire package root (${pkg} is not podwire's package.json)`);
  }
  const { build } = await import('esbuild');
  const r = await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: ['@kubernetes/client-node', '*.node'],
    // CommonJS dependencies (prom-client, js-yaml's helpers) call require(): give the module one.
    banner: { js: "import { createRequire as __podwireCreateRequire } from 'node:module';\nconst require = __podwireCreateRequire(import.meta.url);" },
    legalComments: 'eof',
    logLevel: 'warning',
    metafile: true,
  });
  if (interpreter !== undefined) {
    const text = readFileSync(outfile, 'utf8');
    if (!text.startsWith('#!')) throw new Error(`bundle ${outfile}: no #! line to replace`);
    writeFileSync(outfile, `#!${interpreter}${text.slice(text.indexOf('\n'))}`);
  }
  return Object.values(r.metafile.outputs)[0].bytes;
}
