export const RUNTIME_ENV: readonly string[];
export const NODE_FLAG: string;
