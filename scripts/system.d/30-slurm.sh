#!/usr/bin/env bash
# A single-node Slurm for the launcher tests (tests/integration/bench/_slurm.py starts its own
# munged, slurmctld and slurmd, in the foreground, with a private configuration): Debian's
# slurm-wlm (slurmctld, slurmd, the client commands) and munge with its key.
set -euo pipefail
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup-system: not root or no apt-get; skipping Slurm" >&2
    exit 0
fi
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v munged >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key 2>/dev/null || true
    chmod 0400 /etc/munge/munge.key
fi
