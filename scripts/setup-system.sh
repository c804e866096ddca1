#!/usr/bin/env bash
# Install and start the system pieces the tests need (Debian, as root): each file in
# scripts/system.d/ handles one piece and is idempotent. Without root or apt it warns and
# leaves the tests that need the piece to report why they cannot run.
set -euo pipefail
cd "$(dirname "$0")/.."
for step in scripts/system.d/*.sh; do
    [ -e "$step" ] || continue
    echo "setup-system: $step"
    bash "$step"
done
