// Types of host-isolation.mjs.
export function hidingPlan(paths: string[]): { tmpfs: string[]; privatize: Map<string, Set<string>> };
export function shq(s: string): string;
export function hidingScript(paths: string[], stageDir: string, label?: string): string[];
export function resolveUnder(root: string, path: string): string;
export function cgroupMounts(): string[];
export function removeCgroupTree(path: string): void;
