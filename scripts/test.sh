#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set-up, lint, format check, type check, tests.
# Extra arguments go to pytest (e.g. scripts/test.sh -k engine -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

echo "== ruff (lint)";   .venv/bin/ruff check .
echo "== ruff (format)"; .venv/bin/ruff format --check .
echo "== mypy";          .venv/bin/mypy
echo "== infra (Bicep parse, checkov)"; bash scripts/check_infra.sh
echo "== pytest"
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: that is a failure here." >&2
  exit 1
fi
exit "$rc"
