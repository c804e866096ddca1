"""A tiny, honest :class:`~openmle._task_protocol.TaskHandle` for testing sandboxes.

It writes a binary-classification task to disk in the package layout (``data/public``,
``data/private``) plus a deterministic validation view (``valid/public``, ``valid/private``),
and grades submissions by accuracy in a separate Python process, so sandbox backends can be
tested without ``openmle.gym``.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import final

import numpy as np
from attrs import define, frozen

from openmle._task_protocol import TaskHandle, TaskResolver
from openmle._types import Split
from openmle.errors import InvalidArgument

__all__ = ["ToyGrade", "ToyTask"]

# Runs in its own process: reads answers and a submission, prints {"score", "valid", "reason"}.
_GRADER = Path(__file__).with_name("_toy_grader.py")
"""The grader program (a real module, run as a script in an isolated interpreter)."""


@frozen(kw_only=True)
class ToyGrade:
    """Accuracy grade of a toy-task submission."""

    score: float | None
    valid: bool
    reason: str


def _write(path: Path, header: list[str], rows: Sequence[Sequence[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


@final
@define(eq=False)
class ToyTask(TaskHandle):
    """A generated toy task rooted at ``root``; create one with :meth:`create`."""

    root: Path
    name: str = "toy"

    @classmethod
    def create(cls, root: Path, *, name: str = "toy", n: int = 60, seed: int = 0) -> ToyTask:
        """Write the task under ``root`` (deterministic for a given ``seed``) and return it."""
        if n < 20:
            raise InvalidArgument(f"Expected n >= 20 but got n={n}")
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(n, 2)).round(4)
        y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)
        rows = [
            [i, float(a), float(b), int(t)] for i, ((a, b), t) in enumerate(zip(x, y, strict=True))
        ]
        n_test = n // 5
        train, test = rows[:-n_test], rows[-n_test:]
        for view, (tr, te) in {
            "data": (train, test),
            "valid": (train[: -len(train) // 5], train[-len(train) // 5 :]),
        }.items():
            pub, priv = root / view / "public", root / view / "private"
            _write(pub / "train.csv", ["id", "x1", "x2", "target"], tr)
            _write(pub / "test.csv", ["id", "x1", "x2"], [r[:3] for r in te])
            _write(pub / "sample_submission.csv", ["id", "target"], [[r[0], 0] for r in te])
            _write(priv / "answers.csv", ["id", "target"], [[r[0], r[3]] for r in te])
            (pub / "description.txt").write_text(
                "Predict target (0/1) for each id in test.csv; accuracy; write submission.csv "
                "with columns id,target.\n"
            )
        return cls(root=root, name=name)

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """Both private answer directories."""
        return (self.root / "data" / "private", self.root / "valid" / "private")

    def public_dir(self, split: Split) -> Path:
        """``valid/public`` for VALID, ``data/public`` for TEST."""
        return self.root / ("valid" if split is Split.VALID else "data") / "public"

    def grade(self, submission: Path, split: Split) -> ToyGrade:
        """Accuracy of ``submission`` against ``split``'s answers, computed in a child process."""
        answers = self.root / ("valid" if split is Split.VALID else "data") / "private"
        proc = subprocess.run(
            [sys.executable, "-I", str(_GRADER), str(answers / "answers.csv"), str(submission)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            return ToyGrade(score=None, valid=False, reason="grader crashed")
        data = json.loads(proc.stdout)
        return ToyGrade(score=data["score"], valid=bool(data["valid"]), reason=data["reason"])

    @staticmethod
    def resolver(tasks: Mapping[str, ToyTask]) -> TaskResolver:
        """A resolver mapping task names (and root paths) to these tasks."""
        table: dict[str, TaskHandle] = {}
        for key, task in tasks.items():
            table[key] = task
            table[str(task.root)] = task

        def resolve(ref: str) -> TaskHandle:
            try:
                return table[ref]
            except KeyError:
                raise InvalidArgument(f"Unknown task {ref!r}; known: {sorted(tasks)}") from None

        return resolve


SOLUTION = """
import csv, os
data = os.environ["DATA_DIR"]
with open(os.path.join(data, "test.csv")) as f:
    rows = list(csv.DictReader(f))
with open("submission.csv", "w") as f:
    f.write("id,target\\n")
    for r in rows:
        f.write(f"{r['id']},{int(float(r['x1']) + 0.5 * float(r['x2']) > 0)}\\n")
print("Final Validation Score: 1.0")
"""
"""A program that solves the toy task perfectly (accuracy 1.0)."""
