import { defineConfig } from 'vitest/config';

// Privileged tests make their own netns (pwt-<pid>-<n>) and remove them in
// teardown; test/helpers/global-teardown.ts sweeps leftovers of crashed runs.
// Forks isolate the native addon per test file.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/kube-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: '.vitest-results.json' }]],
  },
});
