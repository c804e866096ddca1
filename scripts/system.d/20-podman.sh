#!/usr/bin/env bash
# Podman serving the Docker Engine API, and the sandbox image the Docker tests run.
#
# Installs Debian's podman with runc as its runtime, lowers the default container ulimits to
# values this kind of machine can grant (it cannot raise rlimits), and builds the small image
# `localhost/openmle-sandbox:bookworm` (debootstrap minbase + python3 + numpy; no registry is
# needed) once. The tests start `podman system service` themselves on a private socket
# (tests/_docker_engine.py). Idempotent; needs root and apt-get. With a real
# Docker daemon answering (DOCKER_HOST or /var/run/docker.sock) nothing is installed: the
# tests use that daemon and the image is built into it by scripts/build-sandbox-image.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "20-podman: not root or no apt-get; the Docker tests will say why they cannot run" >&2
    exit 0
fi

if command -v docker >/dev/null && docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
    echo "20-podman: a Docker daemon answers; using it instead of podman"
    scripts/build-sandbox-image.sh docker
    exit 0
fi

need=()
for pkg in podman runc conmon debootstrap uidmap slirp4netns fuse-overlayfs; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "20-podman: installing ${need[*]}"
    [ -e /tmp/.openmle-apt-updated ] || { apt-get update -qq && touch /tmp/.openmle-apt-updated; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

conf=/etc/containers/containers.conf
if ! grep -q "openmle: podman settings" "$conf" 2>/dev/null; then
    mkdir -p /etc/containers
    if [ -s "$conf" ]; then
        cp "$conf" "$conf.openmle-backup"
    fi
    cat >"$conf" <<'CONF'
# openmle: podman settings for the Docker sandbox tests (scripts/system.d/20-podman.sh).
[containers]
# This machine cannot raise rlimits: ask containers for no more than it already grants.
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
CONF
    echo "20-podman: wrote $conf"
fi

scripts/build-sandbox-image.sh podman
