#!/usr/bin/env bash
# bubblewrap gives LocalSandbox its full isolation (namespaces, no network, read-only runtime).
# Without it the sandbox falls back to its weaker Landlock mode and warns.
set -euo pipefail
if command -v bwrap >/dev/null; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup-system: bubblewrap missing and cannot install it (need root and apt-get)" >&2
    exit 0
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap
