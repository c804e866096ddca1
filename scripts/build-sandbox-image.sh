#!/usr/bin/env bash
# Build a sandbox image without a registry: a Debian bookworm minbase root filesystem
# (debootstrap), imported as an image. Skips the build when the image already exists.
#
#   scripts/build-sandbox-image.sh [podman|docker]        localhost/openmle-sandbox:bookworm
#       python3 and numpy (about a minute, 175 MB)
#   scripts/build-sandbox-image.sh --ml [podman|docker]   localhost/openmle-sandbox-ml:bookworm
#       the ML stack of MLE-bench's agent environment, from scripts/sandbox-ml-requirements.txt
#       in a venv at /opt/ml (first on PATH): torch, torchvision, torchaudio, timm, transformers,
#       lightgbm, xgboost, catboost, scikit-learn, pandas, albumentations, librosa, ... Size and
#       build time: docs/how-to/run-mle-bench.md. PyPI's torch wheels are CUDA builds; for a
#       CPU-only image set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu.
# Environment: OPENMLE_SANDBOX_IMAGE (the image name), OPENMLE_DEBIAN_MIRROR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ml=0
if [ "${1:-}" = "--ml" ]; then
    ml=1
    shift
fi
engine="${1:-podman}"
if [ "$ml" = 1 ]; then
    image="${OPENMLE_SANDBOX_IMAGE:-localhost/openmle-sandbox-ml:bookworm}"
    include=python3-minimal,python3-venv,python3-numpy,ca-certificates,libgomp1,libsndfile1
else
    image="${OPENMLE_SANDBOX_IMAGE:-localhost/openmle-sandbox:bookworm}"
    include=python3-minimal,python3-numpy
fi
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
trap 'rm -rf "$root" "$root.log"' EXIT
echo "build-sandbox-image: debootstrap into $root (about a minute)"
debootstrap --variant=minbase --include="$include" bookworm "$root" "$mirror" \
    >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
extra=()
if [ "$ml" = 1 ]; then
    echo "build-sandbox-image: the ML stack into /opt/ml (several GB from PyPI)"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    cp "$here/sandbox-ml-requirements.txt" "$root/tmp/requirements.txt"
    # Behind a TLS-inspecting proxy the host's CA bundle (PIP_CERT or SSL_CERT_FILE) is needed
    # to reach the index; it is used for the build only and not left in the image.
    ca="${PIP_CERT:-${SSL_CERT_FILE:-}}"
    cert=()
    if [ -n "$ca" ] && [ -f "$ca" ]; then
        cp "$ca" "$root/tmp/host-ca.pem"
        cert=(PIP_CERT=/tmp/host-ca.pem)
    fi
    chroot "$root" /usr/bin/python3 -m venv /opt/ml
    chroot "$root" /usr/bin/env -i PATH="$path" HOME=/root "${cert[@]}" \
        PIP_EXTRA_INDEX_URL="${PIP_EXTRA_INDEX_URL:-}" \
        /opt/ml/bin/pip install --no-cache-dir --disable-pip-version-check --only-binary=:all: \
        -r /tmp/requirements.txt >"$root.log" 2>&1 || { tail -20 "$root.log" >&2; exit 1; }
    chroot "$root" /usr/bin/env -i PATH="$path" NO_ALBUMENTATIONS_UPDATE=1 /opt/ml/bin/python \
        -c "import torch, sklearn, lightgbm, xgboost, catboost, timm, transformers, pandas, librosa, albumentations" \
        || { echo "build-sandbox-image: the ML stack does not import" >&2; exit 1; }
    rm -f "$root/tmp/requirements.txt" "$root/tmp/host-ca.pem" "$root/etc/resolv.conf"
    path="/opt/ml/bin:$path"
    # albumentations asks the network for its latest version at import unless told not to
    extra=(--change 'ENV NO_ALBUMENTATIONS_UPDATE=1')
fi
# Smaller image: package caches and docs are not needed to run programs.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc \
    "$root"/usr/share/man "$root"/usr/share/locale
quiet=(); [ "$engine" = podman ] && quiet=(--quiet)
tar -C "$root" -c . | "$engine" import "${quiet[@]}" \
    --change 'CMD ["python3"]' --change 'ENV PYTHONUNBUFFERED=1' --change "ENV PATH=$path" "${extra[@]}" \
    - "$image" >/dev/null
echo "build-sandbox-image: imported $image into $engine"
