"""The end-to-end steps the builder's integration tests share: build with the offline model,
``openmle task validate``, and a short offline search that must beat the constant baseline."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from openmle import ModelRequest, ModelResponse
from openmle._cli import main
from openmle.backends import LocalSandbox, OfflineModel
from openmle.builder import PURPOSE_KEY, PURPOSE_PREPARE, BuildOptions, BuildResult, build_task
from openmle.search import Budget, SearchSpec, run_search


def build(raw: Path, out: Path, model: Any = None, **opts: Any) -> BuildResult:
    """``build_task`` of ``raw`` into ``out`` with ``model`` (the offline model by default) and
    ``BuildOptions(**opts)``."""

    async def main() -> BuildResult:
        chosen = OfflineModel() if model is None else model
        return await build_task(raw, out, chosen, options=BuildOptions(**opts))

    return anyio.run(main)


class Mutant:
    """The offline model with its prepare.py rewritten by ``mutate`` (which must change it)."""

    def __init__(self, mutate: Callable[[str], str]) -> None:
        self.inner = OfflineModel()
        self.mutate = mutate

    async def complete(self, request: ModelRequest) -> ModelResponse:
        answer = await self.inner.complete(request)
        if request.metadata.get(PURPOSE_KEY) == PURPOSE_PREPARE:
            mutated = self.mutate(answer.text)
            assert mutated != answer.text, "the mutation did not apply"
            return ModelResponse(text=mutated)
        return answer


def replace(old: str, new: str) -> Callable[[str], str]:
    """A mutation: ``old`` replaced by ``new`` in prepare.py's text."""
    return lambda text: text.replace(old, new)


def write_sklearn(name: str, raw: Path) -> None:
    """scikit-learn's on-disk dataset ``load_<name>`` as ``raw/<name>.csv`` (a new folder)."""
    from sklearn import datasets

    frame = getattr(datasets, f"load_{name}")(as_frame=True).frame
    raw.mkdir(parents=True)
    frame.to_csv(raw / f"{name}.csv", index=False)


def validate(pkg: Path) -> None:
    """``openmle task validate PKG --json`` exits 0 and says ok.

    The command line runs in this process (its ``main``, stdout and stderr captured): the same
    command and exit code as ``python -m openmle``, without an interpreter and openmle start-up
    per package (the builder's tests validate about twenty).
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["task", "validate", str(pkg), "--json"])
    assert code == 0, out.getvalue() + err.getvalue()
    assert json.loads(out.getvalue())["ok"] is True


def search_beats_constant(pkg: Path, result: BuildResult, *, steps: int) -> None:
    """A ``steps``-step offline search of ``pkg`` scores better on validation than the constant
    baseline of the solvability stage (the same validation split), and never worse than its
    first node."""
    solv = result.record["solvability"]
    constant, hib = solv["constant"]["score"], solv["higher_is_better"]
    found = run_search(
        SearchSpec(
            task=str(pkg),
            model=OfflineModel(),
            sandbox=LocalSandbox(max_concurrency=1),
            budget=Budget(steps=steps),
            workers=1,
            final_test=False,
        )
    )
    best = found.best_valid_score
    assert best is not None, [n.outcome for n in found.nodes]
    assert (best > constant) if hib else (best < constant), (best, constant)
    first = found.nodes[0].score
    assert first is None or ((best >= first) if hib else (best <= first))
