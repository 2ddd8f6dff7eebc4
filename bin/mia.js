#!/usr/bin/env node
// The CLI is TypeScript run through tsx, so `npx mia` works right after `npm ci` with no build step.

// Imports fsync every archived file; concurrent fsyncs are what keeps that fast (the journal
// commits them together), and they run on libuv's pool, which is sized once, at first use.
process.env.UV_THREADPOOL_SIZE ??= '32';

const { register } = await import('tsx/esm/api');
register();
const { main } = await import('../server/cli/main.ts');
process.exitCode = await main(process.argv.slice(2));
