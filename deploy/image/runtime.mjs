// How the image runs the agent: the environment and the one V8 flag podwire's measurements chose
// (docs/benchmarks.md, "Agent memory and start-up"). The chart's ConfigMap carries the same
// environment (templates/configmap.yaml; test/deploy/chart.test.ts holds the two together).

/**
 * The agent's memory settings, measured in docs/benchmarks.md ("Agent memory"): V8's young
 * generation capped at 2 MB per semi-space (the default grows to 16 MB and stays committed after
 * the first burst of enrollments; 1 MB held no less after a restart and took ~10% longer to
 * restart) and at most 2 glibc malloc arenas (each job thread otherwise gets its own, kept after a
 * restart's burst of verifies). A pod's env (the chart's `env`) overrides both.
 */
export const RUNTIME_ENV = ['NODE_OPTIONS=--max-semi-space-size=2', 'MALLOC_ARENA_MAX=2'];
/**
 * The V8 flag the entrypoint runs node with, on the bundle's `#!` line (Node refuses it in
 * NODE_OPTIONS, and V8 cannot take it once running): garbage collection on the JS thread only. V8's
 * helper threads cost more than they save on a heap of 20-30 MB, and each keeps memory of its own:
 * about 8 MiB less RSS after a restart over 1,000 pods and ~8% shorter restart, measured in one run
 * (docs/benchmarks.md). Linux passes the rest of a `#!` line as one argument: one flag only.
 */
export const NODE_FLAG = '--single-threaded-gc';
