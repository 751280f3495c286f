// Types of images.mjs.
import type { BuiltImage } from '../lib/oci-image.mjs';

export const VERSION: string;
export const PODWIRE_IMAGE: string;
export function podwireImage(): BuiltImage;
export function clusterImages(): { images: BuiltImage[]; sandboxImage: string };
