export function bundleRoot(outfile: string): string;
/** `interpreter`: the bundle's `#!` line instead of `/usr/bin/env node` (an absolute path and at most one flag). */
export function bundleCli(opts: { entry: string; outfile: string; interpreter?: string }): Promise<number>;
