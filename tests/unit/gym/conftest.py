"""Fixtures for the gym tests: a small task-package builder (the private cache is the
session's, from ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests._files import write_csv

__all__ = ["PackageBuilder", "make_package", "write_csv"]

PackageBuilder = Callable[..., Path]


@pytest.fixture
def make_package(tmp_path: Path) -> PackageBuilder:
    """Build a small regression package (task.toml with metric rmse) and return its root."""

    def build(
        name: str = "pkg", *, n_train: int = 40, n_test: int = 10, toml: str | None = None
    ) -> Path:
        root = tmp_path / name
        rows = [
            [i, round(i * 0.5, 2), i % 3, round(2.0 * i + 1.0, 3)] for i in range(n_train + n_test)
        ]
        train, test = rows[:n_train], rows[n_train:]
        pub, priv = root / "data" / "public", root / "data" / "private"
        write_csv(pub / "train.csv", ["id", "x", "k", "y"], train)
        write_csv(pub / "test.csv", ["id", "x", "k"], [r[:3] for r in test])
        write_csv(pub / "sample_submission.csv", ["id", "y"], [[r[0], 0.0] for r in test])
        write_csv(priv / "test_answer.csv", ["id", "y"], [[r[0], r[3]] for r in test])
        (pub / "description.txt").write_text("Predict y from x and k. RMSE. Columns id,y.\n")
        (root / "task.toml").write_text(
            toml if toml is not None else f'name = "{name}"\nmetric = "rmse"\n'
        )
        return root

    return build
