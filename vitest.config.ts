import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/longest-first.ts';

// Integration suites start their own servers; two cores here, so at most two files at once.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    pool: 'forks',
    maxWorkers: 2,
    fileParallelism: true,
    isolate: false,
    reporters: ['default'],
    sequence: { sequencer: LongestFirst },
  },
});
