#!/usr/bin/env bash
# Builds the renderer (renderer/dist) when it is missing or older than its sources, so `mia serve`
# can serve the workstation UI. Used by demo.sh and test.sh; `npm run build:renderer` forces it.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=renderer/dist/index.html
if [ -f "$stamp" ] && [ -z "$(find renderer/src renderer/index.html renderer/vite.config.ts common -newer "$stamp" -print -quit)" ]; then
  exit 0
fi
echo "building the renderer (renderer/dist)"
npx vite build renderer --logLevel warn
