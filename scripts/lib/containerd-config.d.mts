// Types of containerd-config.mjs.
export function containerdConfigToml(o: {
  root: string; state: string; temp: string; opt: string; socket: string; sandboxImage: string;
  cniBinDir: string; cniConfDir: string; logLevel?: string;
}): string;
