#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, prepares a demo data folder, issues
# an admin key for this session (printed once, never written to disk) and serves the API on
# 127.0.0.1. Re-running reuses the folder.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/node-deps.sh
bash scripts/build-renderer.sh
DATA="${MIA_DEMO_DATA:-$PWD/demo-data}"
PORT="${MIA_PORT:-8484}"
mkdir -p "$DATA"

KEY=$(node bin/mia.js keys create --role admin --email admin@demo.local --name "demo session" --data "$DATA" | tail -n 1)
echo "demo data folder: $DATA"
echo "admin key for this session (shown once): $KEY"
echo "try: curl -H 'Authorization: Bearer $KEY' http://127.0.0.1:$PORT/v1/auth/me"
exec node bin/mia.js serve --data "$DATA" --port "$PORT"
