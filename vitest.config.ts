import { defineConfig } from 'vitest/config';

// Privileged tests make their own netns (pwt-<pid>-<n>) and remove them in
// teardown; test/helpers/global-teardown.ts sweeps leftovers of crashed runs.
// Forks isolate the native addon per test file.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // Two files at a time (vitest's default here is cores - 1 = 1): the real-cluster files
    // (test/e2e) spend most of their minutes waiting on kubelets and rollouts, so one of them
    // beside the rest roughly halves the run on this 2-core machine.
    maxWorkers: 2,
    globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/kube-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: '.vitest-results.json' }]],
  },
});
