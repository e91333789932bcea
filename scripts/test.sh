#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up, then lint, format check, type check and the infrastructure checks
# beside pytest, whose tests run in parallel workers (pytest-xdist). Each stage's output is printed whole, pytest's as
# it runs and the others' after it, then one line per stage; any failing stage fails the run.
# Extra arguments go to pytest (e.g. scripts/test.sh -k engine -x).
#   PYTEST_WORKERS=N   how many pytest workers (default 6; the tests mostly wait on subprocesses and sockets)
#   scripts/test.sh -n 0   pytest in one process, in file order (for debugging)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
began=$(date +%s)

# The static stages one after another in the background (about a minute of one core together): pytest's workers spend
# most of their time waiting, so this costs the tests little.
stage() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  if "$@" >"$logs/$name.log" 2>&1; then rc=0; else rc=$?; fi
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t0))" >>"$logs/status"
}
(
  stage "ruff (lint)" .venv/bin/ruff check .
  stage "ruff (format)" .venv/bin/ruff format --check .
  stage "mypy" .venv/bin/mypy
  stage "infra (Bicep parse, checkov)" bash scripts/check_infra.sh
) &
static=$!

workers=${PYTEST_WORKERS:-6}
echo "== pytest ($workers workers; ruff, mypy and the infra checks run beside it and are reported after it)"
t0=$(date +%s)
set +e
.venv/bin/python -m pytest -n "$workers" --dist loadgroup "$@" 2>&1 | tee "$logs/pytest.log"
rc=${PIPESTATUS[0]}
set -e
pytest_seconds=$(($(date +%s) - t0))
wait "$static"

failed=0
while IFS=$'\t' read -r name code seconds; do
  echo "== $name"
  cat "$logs/$name.log"
done <"$logs/status"

echo "== summary"
while IFS=$'\t' read -r name code seconds; do
  if [ "$code" -eq 0 ]; then verdict=ok; else verdict="FAILED (exit $code)"; failed=1; fi
  printf '  %-30s %-18s %4ss\n' "$name" "$verdict" "$seconds"
done <"$logs/status"
if [ "$rc" -eq 0 ]; then verdict=ok; else verdict="FAILED (exit $rc)"; fi
printf '  %-30s %-18s %4ss\n' "pytest" "$verdict" "$pytest_seconds"
echo "  total $(($(date +%s) - began))s (after set-up)"
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here." >&2
  rc=1
fi
# pytest's closing line last, as it printed it (what a reader of the tail looks for).
grep -E '^=+ .* in [0-9.]+s' "$logs/pytest.log" | tail -n 1 || true
if [ "$rc" -ne 0 ]; then exit "$rc"; fi
exit "$failed"
