import { configDefaults, defineConfig } from 'vitest/config';

/** Real server processes fed hostile files, and faults (kill -9, full disk, I/O errors, power
 * cuts) that run processes for minutes: their own groups, after the fast suites. */
const HOSTILE = 'test/hostile/**/*.test.ts';
const FAULTS = 'test/faults/**/*.test.ts';

export default defineConfig({
  test: {
    // Each HTTP test file starts its own server on its own temporary SQLite file.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // `npx vitest run` runs all three, in this order; `--project NAME` runs one.
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, HOSTILE, FAULTS], sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'hostile', include: [HOSTILE], testTimeout: 120_000, sequence: { groupOrder: 1 } } },
      { extends: true, test: { name: 'faults', include: [FAULTS], testTimeout: 300_000, sequence: { groupOrder: 2 } } },
    ],
  },
});
