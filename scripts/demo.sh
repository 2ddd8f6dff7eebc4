#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, prepares a demo data folder, then
# opens the desktop app on it where Electron's binary is installed and a display exists;
# otherwise issues an admin key for this session (printed once, never written to disk) and
# serves the API with the workstation UI on 127.0.0.1 for a browser. Re-running reuses the folder.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/node-deps.sh
bash scripts/build-renderer.sh
DATA="${MIA_DEMO_DATA:-$PWD/demo-data}"
PORT="${MIA_PORT:-8484}"
mkdir -p "$DATA"

if [ -z "${MIA_HEADLESS:-}" ] && [ -f node_modules/electron/path.txt ] && { [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] || [ "$(uname)" != Linux ]; }; then
  echo "starting the desktop app on $DATA"
  MIA_DATA="$DATA" exec npm run desktop
fi

KEY=$(node bin/mia.js keys create --role admin --email admin@demo.local --name "demo session" --data "$DATA" | tail -n 1)
echo "demo data folder: $DATA"
echo "admin key for this session (shown once): $KEY"
echo "workstation UI: open http://127.0.0.1:$PORT/ in a browser and paste the key"
echo "API: curl -H 'Authorization: Bearer $KEY' http://127.0.0.1:$PORT/v1/auth/me"
exec node bin/mia.js serve --data "$DATA" --port "$PORT"
