#!/usr/bin/env bash
# The one gate: system packages, npm packages, typecheck, lint, all tests. Ends with the line
# "N passed, M failed" (typecheck and lint count as one check each).
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/system-deps.sh || exit 1
bash scripts/node-deps.sh || exit 1

failed_checks=0
passed_checks=0
step() {
  local name=$1; shift
  echo "== $name"
  if "$@"; then passed_checks=$((passed_checks + 1)); else echo "!! $name failed"; failed_checks=$((failed_checks + 1)); fi
}

step typecheck npx tsc -p tsconfig.json --noEmit
step typecheck-renderer npx tsc -p renderer --noEmit
step typecheck-main npx tsc -p main --noEmit
step lint npx eslint . --max-warnings 0

# The UI tests drive the built renderer in Chromium.
bash scripts/build-renderer.sh || exit 1

mkdir -p test-results
rm -f test-results/vitest.json
npx vitest run --reporter=default --reporter=json --outputFile.json=test-results/vitest.json
vitest_status=$?

read -r passed failed < <(node -e '
  const fs = require("fs");
  try {
    const r = JSON.parse(fs.readFileSync("test-results/vitest.json", "utf8"));
    // Files that failed to load count as one failure each.
    const broken = r.testResults.filter((f) => f.status === "failed" && f.assertionResults.length === 0).length;
    console.log(r.numPassedTests, r.numFailedTests + broken);
  } catch { console.log(0, 1); }
')
if [ "$vitest_status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi

total_passed=$((passed + passed_checks))
total_failed=$((failed + failed_checks))
echo
echo "${total_passed} passed, ${total_failed} failed"
[ "$total_failed" -eq 0 ]
