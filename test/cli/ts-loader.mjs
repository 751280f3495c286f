// Lets a child `node` run the CLI straight from lib/*.ts (tests that need a
// real process: kill -9, stdin from a pipe, memory limits):
// `node test/cli/ts-loader.mjs ARGV...` is `podwire ARGV...` on the sources.
// It registers itself as a module hook: `.js` specifiers of .ts files resolve
// to the .ts file, which TypeScript transpiles (no type check).
import { readFile } from 'node:fs/promises';
import { register } from 'node:module';
import { fileURLToPath } from 'node:url';
import { isMainThread } from 'node:worker_threads';

if (isMainThread) {
  register(import.meta.url);
  if (process.argv[1] === fileURLToPath(import.meta.url)) {
    const { main } = await import('../../lib/cli/main.ts');
    process.exitCode = await main(process.argv.slice(2));
  }
}

let ts;

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (err) {
    if (specifier.endsWith('.js') && context.parentURL?.endsWith('.ts')) return next(`${specifier.slice(0, -3)}.ts`, context);
    throw err;
  }
}

export async function load(url, context, next) {
  if (!url.endsWith('.ts')) return next(url, context);
  ts ??= (await import('typescript')).default;
  const source = await readFile(fileURLToPath(url), 'utf8');
  const out = ts.transpileModule(source, {
    fileName: fileURLToPath(url),
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, sourceMap: false },
  });
  return { format: 'module', source: out.outputText, shortCircuit: true };
}
