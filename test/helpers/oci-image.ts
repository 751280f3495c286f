// Container images for the CRI tests: the builder lives in scripts/lib/oci-image.mjs (the real
// node of scripts/kube/ uses it too, from plain Node); this re-exports it with its types.
export * from '../../scripts/lib/oci-image.mjs';
