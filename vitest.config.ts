import { configDefaults, defineConfig } from 'vitest/config';

/** Real server processes fed hostile files, and faults (kill -9, full disk, I/O errors, power
 * cuts) that run processes for minutes: their own groups, after the fast suites. */
const HOSTILE = 'test/hostile/**/*.test.ts';
const FAULTS = 'test/faults/**/*.test.ts';
const POSTGRES_API_SUITE = 'test/http/**/*.test.ts';
const HUB = 'test/hub/**/*.test.ts';
const SYNC = 'test/sync/**/*.test.ts';
/** mia against real DICOM peers (Orthanc, dcmtk's network tools) as processes (issue 14). */
const DICOM_NET = 'test/dicom-net/**/*.test.ts';
/** The model on the held-out phantom family, small (issue 16; `npm run eval` runs it in full). */
const EVAL = 'test/eval/**/*.test.ts';

export default defineConfig({
  test: {
    // Each HTTP test file starts its own server on its own temporary SQLite file.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // `npx vitest run` runs them all, in this order; `--project NAME` runs one.
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, HOSTILE, FAULTS, HUB, SYNC, DICOM_NET, EVAL], sequence: { groupOrder: 0 } } },
      // The API suite again with every server on PostgreSQL (issue 12: both backends).
      {
        extends: true,
        test: {
          name: 'postgres',
          include: [POSTGRES_API_SUITE],
          env: { MIA_TEST_BACKEND: 'postgres' },
          globalSetup: ['test/helpers/postgres-global-setup.ts'],
          sequence: { groupOrder: 1 },
        },
      },
      // Three `mia serve --hub` processes on one PostgreSQL, one of them killed (minutes).
      {
        extends: true,
        test: { name: 'hub', include: [HUB], testTimeout: 400_000, globalSetup: ['test/helpers/postgres-global-setup.ts'], sequence: { groupOrder: 2 } },
      },
      // Workstations and a hub as processes, through a fault proxy (issue 13).
      { extends: true, test: { name: 'sync', include: [SYNC], testTimeout: 400_000, sequence: { groupOrder: 5 } } },
      // The same, with the hub on PostgreSQL.
      {
        extends: true,
        test: {
          name: 'sync-postgres',
          include: [SYNC],
          testTimeout: 400_000,
          env: { MIA_TEST_BACKEND: 'postgres' },
          globalSetup: ['test/helpers/postgres-global-setup.ts'],
          sequence: { groupOrder: 6 },
        },
      },
      { extends: true, test: { name: 'dicom-net', include: [DICOM_NET], testTimeout: 120_000, sequence: { groupOrder: 7 } } },
      { extends: true, test: { name: 'hostile', include: [HOSTILE], testTimeout: 120_000, sequence: { groupOrder: 3 } } },
      { extends: true, test: { name: 'faults', include: [FAULTS], testTimeout: 300_000, sequence: { groupOrder: 4 } } },
      { extends: true, test: { name: 'eval', include: [EVAL], testTimeout: 600_000, hookTimeout: 600_000, sequence: { groupOrder: 8 } } },
    ],
  },
});
