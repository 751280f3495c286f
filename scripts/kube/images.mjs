// The images every node of the real cluster (cluster.mjs) runs, imported into its runtime —
// nothing is pulled: pause (the sandbox), busybox (the test apps) and podwire's own image
// (deploy/image/build.mjs --reuse: rebuilt only when its inputs changed).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { busyboxImage, pauseImage } from '../lib/oci-image.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const VERSION = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version;
export const PODWIRE_IMAGE = `localhost/podwire:${VERSION}`;

/** podwire's image as an OCI archive under build/image/. */
export function podwireImage() {
  const tarball = join(root, 'build', 'image', `podwire-${VERSION}.oci.tar`);
  execFileSync(process.execPath, [join(root, 'deploy/image/build.mjs'), '--reuse', '--out', tarball, '--tag', PODWIRE_IMAGE],
    { stdio: ['ignore', 'ignore', 'inherit'], timeout: 600_000 });
  return { ref: PODWIRE_IMAGE, tarball };
}

/** { images, sandboxImage } for startCluster. */
export function clusterImages() {
  const pause = pauseImage();
  return { images: [pause, busyboxImage(), podwireImage()], sandboxImage: pause.ref };
}
