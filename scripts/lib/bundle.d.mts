export function bundleRoot(outfile: string): string;
export function bundleCli(opts: { entry: string; outfile: string }): Promise<number>;
