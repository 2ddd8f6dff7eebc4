#!/usr/bin/env node
// The CLI is TypeScript; it runs compiled (bin/compiled-cli.js: built at the first start after a
// change, no build step to run) or, failing that, through tsx, so `npx mia` works right after `npm ci`.

// Imports fsync every archived file; concurrent fsyncs are what keeps that fast (the journal
// commits them together), and they run on libuv's pool, which is sized once, at first use.
process.env.UV_THREADPOOL_SIZE ??= '32';

const { loadCli } = await import('./compiled-cli.js');
const { main } = await loadCli();
process.exitCode = await main(process.argv.slice(2));
