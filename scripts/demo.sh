#!/usr/bin/env bash
# The main job on a fresh machine: installs what is missing, prepares a demo data folder, then
# opens the desktop app on it where Electron's binary is installed and a display exists;
# otherwise issues an admin key for this session (printed once, never written to disk) and
# serves the API with the workstation UI on 127.0.0.1 for a browser. Re-running reuses the folder.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/node-deps.sh
bash scripts/system-deps.sh demo || echo "demo: continuing without the Debian packages that generate phantoms"
bash scripts/build-renderer.sh
DATA="${MIA_DEMO_DATA:-$PWD/demo-data}"
PORT="${MIA_PORT:-8484}"

# A new demo folder gets synthetic phantom series (NOT patient data: models/mia-phantom-detector),
# imported and analysed by the bundled model, so the worklist opens with results to review.
if [ ! -e "$DATA/mia.sqlite" ]; then
  mkdir -p "$DATA"
  PHANTOMS=$(mktemp -d)
  echo "new demo folder: generating, importing and analysing synthetic phantom series"
  # Each lesion kind the model knows on a CT and an MR series, plus two lesion-free series
  # (left to chance, a third of phantoms would have no lesion at all).
  phantoms() { /usr/bin/python3 models/mia-phantom-detector/phantoms.py --out "$PHANTOMS/$1" --series 2 --seed "$2" --modality both --kinds "$3" >/dev/null; }
  if phantoms tumor 20009000 tumor && phantoms hemorrhage 20009010 hemorrhage && phantoms infarct 20009020 infarct &&
    phantoms clean 20009100 none; then
    node bin/mia.js import "$PHANTOMS" --data "$DATA" >/dev/null || echo "demo: import of the phantoms reported problems"
    node bin/mia.js analyze --all --data "$DATA" || echo "demo: analysis reported problems"
  else
    echo "demo: could not generate phantoms (needs Debian python3-numpy and python3-pydicom); starting empty"
  fi
  rm -rf "$PHANTOMS"
fi
mkdir -p "$DATA"

if [ -z "${MIA_HEADLESS:-}" ] && [ -f node_modules/electron/path.txt ] && { [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] || [ "$(uname)" != Linux ]; }; then
  echo "starting the desktop app on $DATA"
  MIA_DATA="$DATA" exec npm run desktop
fi

# One live demo key at a time: the previous session's key stops working now.
KEY=$(node bin/mia.js keys create --role admin --email admin@demo.local --name "demo session" --replace --data "$DATA" | tail -n 1)
echo "demo data folder: $DATA"
echo "admin key for this session (shown once): $KEY"
echo "workstation UI: open http://127.0.0.1:$PORT/ in a browser and paste the key"
echo "API: curl -H 'Authorization: Bearer $KEY' http://127.0.0.1:$PORT/v1/auth/me"
exec node bin/mia.js serve --data "$DATA" --port "$PORT"
