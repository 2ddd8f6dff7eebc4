#!/usr/bin/env node
'use strict';
// CommonJS on purpose (bin/package.json): libuv's thread pool is sized once, when it starts, and
// Node's ES module loader starts it (reading the entry file) before an ES module's first line
// runs, so an ES entry could not size it. Imports and the DICOM receiver fsync every archived
// file on that pool, and concurrent fsyncs share the disk's journal commits: with Node's 4
// threads, 2,000 files took 3.1-3.3 s where each fsync waits 2 ms more than here and 9.5 s at
// 8 ms (a disk or SAN slower than this machine's), against 1.6-2.1 s and 2.4 s with 32.
if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = '32';

// The CLI is TypeScript; it runs compiled (bin/compiled-cli.mjs: built at the first start after a
// change, no build step to run) or, failing that, through tsx, so `npx mia` works right after `npm ci`.
import('./compiled-cli.mjs')
  .then(({ loadCli }) => loadCli())
  .then(async ({ main }) => {
    process.exitCode = await main(process.argv.slice(2));
  });
