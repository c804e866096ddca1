#!/usr/bin/env bash
# Refresh apt's lists once so later steps can install packages.
set -euo pipefail
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup-system: not root or no apt-get; skipping system packages" >&2
    exit 0
fi
stamp=/tmp/.openmle-apt-updated
if [ ! -e "$stamp" ]; then
    apt-get update -qq && touch "$stamp"
fi
