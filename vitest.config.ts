import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each HTTP test file starts its own server on its own temporary SQLite file.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
