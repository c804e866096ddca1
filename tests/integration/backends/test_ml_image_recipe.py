"""The ML-stack sandbox image recipe (``scripts/build-sandbox-image.sh --ml``).

The recipe installs ``scripts/sandbox-ml-requirements.txt`` into the image's Python 3.11. Its
content is checked offline (every line an exact pin, the stack MLE-bench's agent environment
offers is there, the script installs that file and nothing else from PyPI); the resolution
check asks PyPI, through uv's resolver, whether that exact set resolves for the image's Python
and platform with no package missing (a lock that a build would have to complete is a broken
lock). Building the image itself (several GB) is the user's step; its size and time are in
docs/how-to/run-mle-bench.md.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
RECIPE = REPO / "scripts" / "sandbox-ml-requirements.txt"
SCRIPT = REPO / "scripts" / "build-sandbox-image.sh"
STACK = (
    "torch", "torchvision", "torchaudio", "timm", "transformers", "lightgbm", "xgboost",
    "catboost", "scikit-learn", "pandas", "numpy", "scipy", "albumentations", "librosa",
    "pillow", "opencv-python-headless",
)  # fmt: skip
PIN = re.compile(r"^([a-z0-9][a-z0-9._-]*)==([0-9][0-9a-z.+!-]*)$")


def pins() -> dict[str, str]:
    out: dict[str, str] = {}
    for line in RECIPE.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = PIN.match(line.strip())
        assert m, f"not an exact pin: {line!r}"
        assert m[1] not in out, f"pinned twice: {m[1]}"
        out[m[1]] = m[2]
    return out


def test_the_recipe_pins_the_ml_stack_exactly() -> None:
    got = pins()
    assert set(STACK) <= set(got), sorted(set(STACK) - set(got))
    # torch and its companions move together (torchvision/torchaudio are built per torch)
    major_minor = ".".join(got["torch"].split(".")[:2])
    assert got["torchaudio"].startswith(major_minor)
    script = SCRIPT.read_text(encoding="utf-8")
    assert "sandbox-ml-requirements.txt" in script and "--only-binary=:all:" in script


def _pypi_reachable() -> bool:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            return True
    except OSError:
        return False


@pytest.mark.integration
@pytest.mark.slow
def test_the_recipe_resolves_for_the_images_python(tmp_path: Path) -> None:
    """uv resolves the pinned set for CPython 3.11 on manylinux x86_64 (the image's Python) to
    exactly itself: nothing missing, nothing conflicting."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is missing: install the dev extra (pip install -e '.[dev]')")
    if not _pypi_reachable():
        pytest.skip("PyPI cannot be reached from here; the resolution check needs the index")
    out = tmp_path / "resolved.txt"
    target = ["--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28"]
    flags = ["--only-binary", ":all:", "--no-header", "--no-annotate", "--no-config"]
    proc = subprocess.run(
        [uv, "pip", "compile", str(RECIPE), *target, *flags, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        # the machine's own certificates and proxy settings reach the index as pip's do
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    resolved = dict(line.split("==", 1) for line in out.read_text().split() if "==" in line)
    assert resolved == pins()
