#!/usr/bin/env bash
# Runs every test: bootstrap (packages, npm ci, native + TS build), the engine's ctest suite, then the tap suite.
# Ends with the plain line `N passed, N failed` counted from the real run; exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/bootstrap.sh || { echo "0 passed, 1 failed"; exit 1; }

mkdir -p build/test-logs
passed=0; failed=0; skipped=0

echo "== native engine tests (ctest)"
ctest --test-dir build/native --output-on-failure --timeout 600 2>&1 | tee build/test-logs/ctest.log
ctest_line=$(grep -aE "tests passed, [0-9]+ tests failed out of [0-9]+" build/test-logs/ctest.log | tail -1)
if [[ -n "$ctest_line" ]]; then
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$ctest_line")
  nfail=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$ctest_line")
  # A test that cannot run here (no GPU, say) exits 77 and ctest lists it under "did not run": a skip, not a pass.
  nskip=$(sed -n '/The following tests did not run/,/^$/p' build/test-logs/ctest.log | grep -c '(Skipped)' || true)
  passed=$((passed + total - nfail - nskip)); failed=$((failed + nfail)); skipped=$((skipped + nskip))
else
  echo "ctest printed no summary" >&2; failed=$((failed + 1))
fi

echo "== TypeScript tests (tap)"
mapfile -t files < <(find dist/test -name '*.test.js' | sort)
npx --no-install tap --disable-coverage --reporter=tap --timeout=600 --jobs=1 "${files[@]}" 2>&1 | tee build/test-logs/tap.log
tap_rc=${PIPESTATUS[0]}
# Leaf assertions only: subtest result lines carry "# time=".
tp=$(grep -aE '^\s*ok [0-9]+' build/test-logs/tap.log | grep -av '# time=' | grep -avc '# SKIP' || true)
tf=$(grep -aE '^\s*not ok [0-9]+' build/test-logs/tap.log | grep -av '# time=' | grep -avc '# TODO' || true)
ts=$(grep -aE '^\s*ok [0-9]+.*# SKIP' build/test-logs/tap.log | grep -avc '# time=' || true)
passed=$((passed + tp)); failed=$((failed + tf)); skipped=$((skipped + ts))
if [[ $tap_rc -ne 0 && $tf -eq 0 ]]; then
  echo "tap exited with $tap_rc without a failing assertion (a crashed or timed-out test file)" >&2
  failed=$((failed + 1))
fi

# What failed, again at the end: CI shows only the tail of this output.
if [[ $failed -ne 0 ]]; then
  echo "== what failed"
  sed -n '/The following tests FAILED/,/^$/p' build/test-logs/ctest.log
  # Each failing engine test's own output (ctest prints it after the test's result line), its first 40 lines.
  awk '/\*\*\*(Failed|Timeout|Exception)/ {on=1; n=0} /^ *Start +[0-9]+:/ {on=0}
       on && n < 40 {print; n++}' build/test-logs/ctest.log
  grep -aE '^(\s{4})?not ok [0-9]+' build/test-logs/tap.log | grep -a '# time=' || true
  # Each failing assertion with its diagnostic (tap's YAML block: what was found, what was wanted, where), 30 lines.
  awk '/^[ \t]*not ok [0-9]+/ && !/# time=/ {on=1; n=0} on && n < 30 {print; n++} on && /^[ \t]*\.\.\.$/ {on=0}' build/test-logs/tap.log
fi
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
[[ $failed -eq 0 ]]
