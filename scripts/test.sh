#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine, then run all checks:
# ruff, mypy --strict, every pytest suite (slow, integration, docker and ray included) with
# coverage printed, and then the fast core suite again in a core-only install (no extras).
# Both pytest runs use parallel workers (pytest-xdist, `--dist loadgroup`: the tests of one
# Docker engine or Ray cluster stay on one worker, see tests/conftest.py): the full run three
# (OPENMLE_TEST_WORKERS; on 2 cores a third worker runs while the others' tests wait on
# containers, servers and timeouts: 571 -> 507 s measured), the core-only run two (its fast
# tests keep the CPUs busy); `-n 0` runs serially.
# Usage: scripts/test.sh [extra pytest args]   (passed to both pytest runs)
set -euo pipefail
cd "$(dirname "$0")/.."
# Python caches the bytecode it compiles (in __pycache__, ignored by git): uv installs none, and
# with PYTHONDONTWRITEBYTECODE set (as on some CI images) every process of the suite compiled
# torch, ray, openai and the tests from source again (collecting took 26 s of CPU per pytest
# worker, 13 s with the cache; `import torch` 3.8 -> 1.9 s). Sandboxed programs keep theirs off.
unset PYTHONDONTWRITEBYTECODE
VENV="${OPENMLE_VENV:-.venv}"
CORE_VENV="${OPENMLE_CORE_VENV:-.venv-core}"

# System packages for the sandboxes' isolation and the container tests (root on Debian).
if [ -x scripts/setup-system.sh ]; then
    scripts/setup-system.sh
fi

# Installs go through uv (`uv pip install`, in the dev extra): it fetches and links in parallel,
# about 1 min for '.[all,dev]' from a cold cache where pip took 4 (measured on 2 cores), and the
# core venv below then links from its cache. uv reads no pip configuration: pip's find-links
# (PIP_FIND_LINKS, e.g. a CPU-only torch wheel) is passed on; SSL_CERT_FILE (a TLS-inspecting
# proxy's CA bundle) reaches it as is. Where uv cannot be installed or fails, pip installs.
if [ -n "${PIP_FIND_LINKS:-}" ] && [ -z "${UV_FIND_LINKS:-}" ]; then
    export UV_FIND_LINKS="$PIP_FIND_LINKS"
fi
install() {  # install VENV REQUIREMENT...: into VENV, honouring constraints.txt
    local venv=$1
    shift
    if [ -x "$VENV/bin/uv" ] \
        || "$VENV/bin/python" -m pip install -q -c constraints.txt 'uv>=0.9'; then
        if "$VENV/bin/uv" pip install -q --python "$venv/bin/python" -c constraints.txt "$@"; then
            return
        fi
        echo "test.sh: uv pip install failed; installing with pip" >&2
    fi
    "$venv/bin/python" -m pip install -q -c constraints.txt "$@"
}

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
install "$VENV" -e '.[all,dev]'
# Bytecode for the libraries the suite's sandboxed programs import: they run with
# PYTHONDONTWRITEBYTECODE on a read-only site-packages, so each one compiled them from source
# (`import pandas, sklearn.ensemble`: 3.5 s of CPU, 1.5 s with bytecode). compileall exits 1 on
# the few files of a library's own test data that are not valid Python: that is ignored.
"$VENV/bin/python" -m compileall -q -j 0 $("$VENV/bin/python" -c '
import importlib.util
for name in ("numpy", "pandas", "scipy", "sklearn", "joblib", "threadpoolctl"):
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.submodule_search_locations:
        print(list(spec.submodule_search_locations)[0])
') > /dev/null || true

"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"

# Every suite, with line coverage of the pytest process (report only, no threshold).
echo "== full install: every suite, with coverage"
"$VENV/bin/python" -m pytest -n "${OPENMLE_TEST_WORKERS:-3}" --dist loadgroup --cov \
    --cov-report=term "$@"

# The core install (`pip install openmle` without extras): the fast suites must pass there,
# and every test that needs an extra reports why it skipped. The property tests run at 10
# examples each here: the full run above has just tried them at their own counts.
echo "== core-only install: the fast suites (not slow, not integration)"
if [ ! -x "$CORE_VENV/bin/python" ]; then
    python3 -m venv "$CORE_VENV"
fi
install "$CORE_VENV" -e . 'pytest>=8.2' 'pytest-timeout>=2.3' 'pytest-xdist>=3.6' 'hypothesis>=6.100'
OPENMLE_HYPOTHESIS_MAX_EXAMPLES="${OPENMLE_HYPOTHESIS_MAX_EXAMPLES:-10}" \
    exec "$CORE_VENV/bin/python" -m pytest -n 2 --dist loadgroup \
    -m "not slow and not integration" "$@"
