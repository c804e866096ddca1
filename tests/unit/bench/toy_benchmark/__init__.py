"""A toy benchmark: a third adapter written only against ``openmle.bench``'s protocol.

Everything the bench needs from it is in this folder: a registry (:class:`ToyBench`, ids and
suites from a JSON file), its tasks (:class:`ToyTask`: a description, a direction, resources,
a time limit, a leaderboard, public data, a grader) and its registration
(:data:`KIND`, :func:`openmle.bench.register_benchmark`). Importing this package registers
``toy``; nothing in ``src/openmle`` names it.

A competition's answer is a number ``a``; a submission is a file holding one number ``x``;
the score is ``1 - |x - a|`` (higher is better), graded in-process (a toy: nothing untrusted
runs here).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from openmle import Resources, Split
from openmle.bench import (
    BenchConfig,
    BenchmarkKind,
    Leaderboard,
    register_benchmark,
)
from openmle.errors import InvalidArgument

__all__ = ["KIND", "ToyBench", "ToyGrade", "ToyTask", "make_toy"]


@frozen
class ToyGrade:
    """What a toy grade reports (the bench's sandbox needs score, valid and reason)."""

    score: float | None
    valid: bool
    reason: str = ""


@frozen
class ToyTask:
    """One toy competition."""

    root: Path
    cid: str
    answer: float
    board: tuple[float, ...]
    limit_s: float
    cpus: int

    @property
    def name(self) -> str:
        return self.cid

    @property
    def description(self) -> str:
        return f"Write one number to submission.csv; the answer of {self.cid} is near 1."

    @property
    def higher_is_better(self) -> bool:
        return True

    @property
    def resources(self) -> Resources:
        return Resources(cpus=self.cpus)

    @property
    def time_limit_s(self) -> float:
        return self.limit_s

    @property
    def leaderboard(self) -> Leaderboard:
        return Leaderboard(scores=self.board)

    @property
    def known_names(self) -> tuple[str, ...]:
        return (f"The {self.cid} challenge",)

    @property
    def grades_kept_copy(self) -> bool:
        return False

    @property
    def private_paths(self) -> tuple[Path, ...]:
        return (self.root / "answers.json",)

    def public_dir(self, split: Split) -> Path:
        return self.root / "public"

    def grade(self, submission: Path, split: Split, *, timeout_s: float | None = None) -> ToyGrade:
        try:
            x = float(Path(submission).read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return ToyGrade(score=None, valid=False, reason="submission.csv holds no number")
        return ToyGrade(score=1.0 - abs(x - self.answer), valid=True)

    def preflight(self) -> str | None:
        return None if (self.root / "public").is_dir() else "cannot be prepared (no public/)"


@frozen
class ToyBench:
    """A toy registry: ``ROOT/toy.json`` = ``{"suites": {...}, "tasks": {cid: answer}}``."""

    root: Path
    limit_s: float = 60.0
    cpus: int = 1

    def _index(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.root / "toy.json").read_text(encoding="utf-8"))
        return data

    def ids(self) -> list[str]:
        return sorted(self._index()["tasks"])

    def suite(self, spec: str | Sequence[str]) -> list[str]:
        suites = self._index()["suites"]
        ids = list(suites[spec]) if isinstance(spec, str) and spec in suites else list(spec)
        unknown = sorted(set(ids) - set(self.ids()))
        if unknown or not ids:
            raise InvalidArgument(f"Unknown toy competitions {unknown} (or an empty suite)")
        return ids

    def task(self, cid: str) -> ToyTask:
        tasks = self._index()["tasks"]
        if cid not in tasks:
            raise InvalidArgument(f"No toy competition {cid!r}")
        return ToyTask(
            root=self.root / cid,
            cid=cid,
            answer=float(tasks[cid]),
            board=(0.99, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2),
            limit_s=self.limit_s,
            cpus=self.cpus,
        )

    def manifest_entries(self, competitions: Sequence[str]) -> dict[str, Any]:
        return {"toy": {"root": str(self.root), "commit": "toy-1", "n": len(competitions)}}


def _open(config: BenchConfig, path: Path) -> ToyBench:
    return ToyBench(
        Path(config.data_dir),
        limit_s=config.time_limit_s,
        cpus=max(1, round(config.resources.cpus)),
    )


KIND = BenchmarkKind(name="toy", title="ToyBench", open=_open, leaderboards=True)
register_benchmark(KIND)


def make_toy(root: Path, answers: dict[str, float]) -> Path:
    """Write a toy benchmark checkout under ``root`` (one ``public/`` folder per competition)."""
    root.mkdir(parents=True, exist_ok=True)
    for cid, answer in answers.items():
        (root / cid / "public").mkdir(parents=True, exist_ok=True)
        (root / cid / "public" / "hint.txt").write_text("about one\n", encoding="utf-8")
        (root / cid / "answers.json").write_text(json.dumps(answer), encoding="utf-8")
    index = {"suites": {"toy-all": sorted(answers)}, "tasks": answers}
    (root / "toy.json").write_text(json.dumps(index), encoding="utf-8")
    return root
