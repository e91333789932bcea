#!/usr/bin/env bash
# The main job on the embedded default (local durable engine + host, Microsoft 365 audit API emulator, local
# output folder), from a fresh clone. Options: bash scripts/run-local.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
SKIP_AZURITE=1 SKIP_CHROMIUM=1 SKIP_IAC=1 bash scripts/bootstrap.sh >&2
exec .venv/bin/python -m collector_local "$@"
