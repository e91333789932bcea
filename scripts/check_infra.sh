#!/usr/bin/env bash
# The deployment template, checked without Azure (docs/deploy.md, What is checked here): every .bicep file parses
# (pycep-parser, with the module-parameter and unused-parameter rules of az bicep build), and checkov's Bicep policies
# pass, each waived one with its reason in the file, plus the repository's CKV_UAL_1 (the app settings the collector
# requires on Azure). Both run, and either failing fails the script. The settings-drift test runs with pytest
# (tests/collector/test_infra.py). Usage: scripts/check_infra.sh [folder, default infra]
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
folder="${1:-$repo/infra}"
rc=0
"$repo/.venv-iac/bin/python" "$repo/infra/checks/parse_bicep.py" "$folder" || rc=1
"$repo/.venv-iac/bin/checkov" -d "$folder" --framework bicep --quiet --compact --skip-download \
  --external-checks-dir "$repo/infra/checks/checkov" || rc=1
exit "$rc"
