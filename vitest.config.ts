import { configDefaults, defineConfig } from 'vitest/config';

/** The fault suite (kill -9, full disk, I/O errors) runs real processes for minutes: its own group. */
const FAULTS = 'test/faults/**/*.test.ts';

export default defineConfig({
  test: {
    // Each HTTP test file starts its own server on its own temporary SQLite file.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // `npx vitest run` runs both; `--project main` or `--project faults` runs one.
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, FAULTS] } },
      { extends: true, test: { name: 'faults', include: [FAULTS], testTimeout: 300_000 } },
    ],
  },
});
