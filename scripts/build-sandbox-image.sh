#!/usr/bin/env bash
# Build the sandbox image `localhost/openmle-sandbox:bookworm` without a registry: a Debian
# bookworm minbase root filesystem with python3 and numpy (debootstrap, about a minute), imported
# as an image. Skips the build when the image already exists.
# Usage: scripts/build-sandbox-image.sh [podman|docker]   (default: podman)
set -euo pipefail
engine="${1:-podman}"
image="${OPENMLE_SANDBOX_IMAGE:-localhost/openmle-sandbox:bookworm}"
mirror="${OPENMLE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if "$engine" image inspect "$image" >/dev/null 2>&1; then
    echo "build-sandbox-image: $image already in $engine"
    exit 0
fi
command -v debootstrap >/dev/null || {
    echo "build-sandbox-image: debootstrap is missing (apt-get install debootstrap)" >&2
    exit 1
}
root="$(mktemp -d /tmp/openmle-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
echo "build-sandbox-image: debootstrap into $root (about a minute)"
debootstrap --variant=minbase --include=python3-minimal,python3-numpy bookworm "$root" "$mirror" \
    >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# Smaller image: package caches and docs are not needed to run programs.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc \
    "$root"/usr/share/man "$root"/usr/share/locale
quiet=(); [ "$engine" = podman ] && quiet=(--quiet)
tar -C "$root" -c . | "$engine" import "${quiet[@]}" \
    --change 'CMD ["python3"]' --change 'ENV PYTHONUNBUFFERED=1' - "$image" >/dev/null
echo "build-sandbox-image: imported $image into $engine"
