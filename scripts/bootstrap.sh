#!/usr/bin/env bash
# Idempotent set-up on a fresh machine (Python 3.11+ and Node.js present, nothing else):
#   .venv with requirements-dev.txt (which includes the app's requirements.txt),
#   .venv-iac with requirements-iac.txt (checkov and pycep-parser, for the infrastructure checks),
#   Azurite from npm into tools/azurite/node_modules,
#   Debian's chromium + chromium-driver for the live-page browser tests (apt-get, as root or with passwordless sudo;
#   never a browser download),
#   PowerShell 7.6.10 for the PowerShell hook tests, as a .NET tool from NuGet where a .NET SDK exists (from apt when
#   the machine's package lists carry one; Debian 12's do not, and there the tests skip and say why).
# Re-running is cheap: it skips what is already installed and up to date.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
  echo "bootstrap: Python 3.11 or newer is required (found: $("$PYTHON" --version 2>&1))." >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv"
  "$PYTHON" -m venv .venv
fi

stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "bootstrap: installing Python requirements"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
  echo "$want" > "$stamp"
fi

# The infrastructure checks' tools in a venv of their own (requirements-iac.txt): checkov's dependencies would
# otherwise pin the app's. SKIP_IAC=1 skips them (run-local does).
if [ "${SKIP_IAC:-0}" != "1" ]; then
  if [ ! -x .venv-iac/bin/python ]; then
    echo "bootstrap: creating .venv-iac (infrastructure checks)"
    "$PYTHON" -m venv .venv-iac
  fi
  iac_stamp=.venv-iac/.requirements.sha256
  iac_want=$(sha256sum requirements-iac.txt | cut -d' ' -f1)
  if [ ! -f "$iac_stamp" ] || [ "$(cat "$iac_stamp")" != "$iac_want" ]; then
    echo "bootstrap: installing the infrastructure checks (checkov, pycep-parser)"
    .venv-iac/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-iac.txt
    echo "$iac_want" > "$iac_stamp"
  fi
fi

if [ "${SKIP_AZURITE:-0}" != "1" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "bootstrap: npm (Node.js) is required to install Azurite; install Node.js 18+ and re-run." >&2
    exit 1
  fi
  if [ ! -x tools/azurite/node_modules/.bin/azurite-blob ]; then
    echo "bootstrap: installing Azurite into tools/azurite"
    (cd tools/azurite && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi

if [ "${SKIP_CHROMIUM:-0}" != "1" ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = "0" ]; then
    apt_get="env DEBIAN_FRONTEND=noninteractive apt-get"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    apt_get="sudo env DEBIAN_FRONTEND=noninteractive apt-get"
  else
    apt_get=""
  fi
  if [ -n "$apt_get" ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing chromium and chromium-driver (Debian packages) for the browser tests"
    $apt_get update -qq
    $apt_get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "bootstrap: the browser tests need Chromium; install it with:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y chromium chromium-driver" >&2
  fi
fi

# PowerShell 7 runs the .ps1 hooks' tests (tests/deploy). It comes as a .NET tool from NuGet (never a download of its
# own); a .NET SDK comes from apt only when the machine's package lists have one. SKIP_PWSH=1 skips this.
pwsh_tool="$HOME/.dotnet/tools/pwsh"
if [ "${SKIP_PWSH:-0}" != "1" ] && ! command -v pwsh >/dev/null 2>&1 && [ ! -x "$pwsh_tool" ]; then
  if ! command -v dotnet >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-cache >/dev/null 2>&1; then
    sdk=$(apt-cache search --names-only '^dotnet-sdk-[0-9.]+$' 2>/dev/null | cut -d' ' -f1 | sort -V | tail -n 1)
    if [ -n "$sdk" ]; then
      echo "bootstrap: installing $sdk (Debian package) for PowerShell"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$sdk" >/dev/null || true
    fi
  fi
  if command -v dotnet >/dev/null 2>&1; then
    echo "bootstrap: installing PowerShell 7.6.10 (dotnet tool) for the PowerShell hook tests"
    dotnet tool install --global PowerShell --version 7.6.10 >/dev/null \
      || echo "bootstrap: PowerShell did not install; the .ps1 hook tests will fail until it does" >&2
  fi
fi
