"""Task.description reads data/public/description.txt as a regular file of at most 16 MiB,
never through a link (a link to a private file would reach the model's prompt)."""

from __future__ import annotations

import os

from openmle.gym import load_task

from .conftest import PackageBuilder


def test_a_description_that_is_a_link_is_not_followed(make_package: PackageBuilder) -> None:
    root = make_package()
    secret = root.parent / "id_rsa"
    secret.write_text("-----BEGIN PRIVATE KEY----- SECRET\n")
    desc = root / "data" / "public" / "description.txt"
    desc.unlink()
    desc.symlink_to(secret)
    assert load_task(root).description == ""


def test_a_description_over_16_mib_is_not_read(make_package: PackageBuilder) -> None:
    root = make_package()
    desc = root / "data" / "public" / "description.txt"
    with desc.open("r+b") as f:  # sparse: "Predict y ..." then zeros
        os.truncate(f.fileno(), (16 << 20) + 1)
    assert load_task(root).description == ""
    with desc.open("r+b") as f:
        os.truncate(f.fileno(), 16 << 20)
    text = load_task(root).description
    assert text.startswith("Predict y from x and k.") and len(text) == 16 << 20
