#!/usr/bin/env bash
# npm ci when node_modules is missing or older than the lockfile. Electron's binary download is
# skipped here (headless machines, CI); the desktop app uses `npm run desktop` which fetches it.
set -euo pipefail
cd "$(dirname "$0")/.."
export ELECTRON_SKIP_BINARY_DOWNLOAD="${ELECTRON_SKIP_BINARY_DOWNLOAD:-1}"
export ONNXRUNTIME_NODE_INSTALL=skip
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
