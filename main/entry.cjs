'use strict';
// The desktop app's entry (package.json "main"; main/build.ts copies it to dist-desktop/main.cjs).
// CommonJS on purpose, as bin/mia.js: libuv's thread pool is sized once, when it starts, and
// the ES module loader starts it (reading the entry file) before an ES module's first line runs.
// Imports fsync every archived file on that pool, and with Node's 4 threads a disk slower than a
// laptop SSD (a network share, a SAN) makes them wait in line: 2,000 files took 3.1-3.3 s where
// each fsync waits 2 ms longer than on the disk they were measured on, against 1.6-2.1 s with 32.
if (!process.env.UV_THREADPOOL_SIZE) process.env.UV_THREADPOOL_SIZE = '32';
import('./main.mjs');
