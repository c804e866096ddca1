#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine, then run all checks:
# ruff, mypy --strict, and every pytest suite (slow, integration, docker and ray included).
# Usage: scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${OPENMLE_VENV:-.venv}"

# System packages for the sandboxes' isolation and the container tests (root on Debian).
if [ -x scripts/setup-system.sh ]; then
    scripts/setup-system.sh
fi

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q -c constraints.txt -e '.[all,dev]'

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"
exec "$VENV/bin/python" -m pytest "$@"
