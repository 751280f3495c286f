// Types of netfilter-tools.mjs.
export declare class HostToolsError extends Error {
  readonly code: 'ERR_HOST_TOOLS';
}
export declare function which(tool: string): string | undefined;
export declare function inImage(p: string): string;
export declare const MERGED_USR_LINKS: Record<string, string>;
export declare function sharedLibs(file: string): string[];
export declare const NETFILTER_TOOLS: Record<string, string>;
export interface NetfilterBinary { src: string; dst: string; category: string }
export declare function netfilterTools(found?: Record<string, string | undefined>): { binaries: NetfilterBinary[]; links: Record<string, string>; libCategory: string };
export declare function withSharedLibs(binaries: Array<{ src: string; dst: string }>): Array<{ src: string; dst: string }>;
