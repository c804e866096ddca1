"""The offline operator model: real programs, honest context, one change per Improve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from openmle import Message, ModelRequest, Operator, Outcome, Split
from openmle.backends import OfflineModel
from openmle.operators import ParentView, TaskBrief, build_request
from openmle.testing import ToyTask, check_operator_model


def ask(model: OfflineModel, op: Operator, text: str = "Task.", seed: int = 0) -> tuple[str, str]:
    """(plan, program) of one answer."""
    request = ModelRequest(messages=[Message(role="user", content=text)], operator=op, seed=seed)
    answer = anyio.run(model.complete, request).text
    plan, rest = answer.split("```python\n", 1)
    return plan.strip(), rest.rsplit("```", 1)[0]


def recipe_of(code: str) -> dict[str, Any]:
    """The recipe comment of a program."""
    first = code.splitlines()[0]
    assert first.startswith("# recipe: ")
    return json.loads(first[len("# recipe: ") :])  # type: ignore[no-any-return]


def parent_prompt(*codes: str, feedback: str = "Outcome: success") -> str:
    """A prompt that shows ``codes`` as parents with ``feedback``, via the operators."""
    views = [ParentView(node_id=f"n{i}", code=c, feedback=feedback) for i, c in enumerate(codes)]
    op = {0: Operator.DRAFT, 1: Operator.IMPROVE, 2: Operator.CROSSOVER}[len(codes)]
    req = build_request(
        op, task=TaskBrief(description="A task."), parents=views, execution_timeout_s=60
    )
    return "\n".join(m.content for m in req.messages)


@pytest.mark.anyio
async def test_conformance() -> None:
    """It keeps the OperatorModel contract."""
    await check_operator_model(OfflineModel())


def test_drafts_are_valid_python_with_a_recipe_and_deterministic() -> None:
    """Each draft compiles, carries its recipe, and the same seed gives the same program."""
    model = OfflineModel(sklearn=True)
    programs = {ask(model, Operator.DRAFT, seed=s)[1] for s in range(12)}
    assert len(programs) > 6
    for code in programs:
        compile(code, "<draft>", "exec")
        assert recipe_of(code)["models"]
        assert 'os.environ.get("DATA_DIR"' in code and "submission.csv" in code
    assert ask(model, Operator.DRAFT, seed=3) == ask(model, Operator.DRAFT, seed=3)


def test_numpy_only_without_sklearn() -> None:
    """With sklearn=False no program imports scikit-learn."""
    model = OfflineModel(sklearn=False)
    for s in range(10):
        code = ask(model, Operator.DRAFT, seed=s)[1]
        assert "sklearn" not in code
        assert {m["name"] for m in recipe_of(code)["models"]} <= {"ridge", "logreg", "knn"}


def _diff(a: dict[str, Any], b: dict[str, Any]) -> int:
    """Count elementary differences between two recipes."""
    n = int(sum(a[k] != b[k] for k in ("impute", "cat")))
    n += len(set(a["features"]) ^ set(b["features"]))
    for ma, mb in zip(a["models"], b["models"], strict=True):
        if ma["name"] != mb["name"]:
            n += 1
        else:
            n += int(sum(ma["params"][k] != mb["params"][k] for k in ma["params"]))
    return n


def test_improve_changes_exactly_one_thing_of_the_parent_it_reads() -> None:
    """Improve reads the parent's recipe from the prompt and changes one thing."""
    model = OfflineModel(sklearn=True)
    for s in range(15):
        parent = ask(model, Operator.DRAFT, seed=100 + s)[1]
        plan, child = ask(model, Operator.IMPROVE, parent_prompt(parent), seed=s)
        a, b = recipe_of(parent), recipe_of(child)
        assert plan.startswith("Improve:")
        changed = _diff(a, b)
        # One change; swapping in a scale-sensitive model also adds standardisation.
        assert changed == 1 or (changed == 2 and "replace" in plan), (plan, a, b)


def test_crossover_blends_both_parents() -> None:
    """Crossover keeps both parents' models and unites their features."""
    model = OfflineModel(sklearn=True)
    a = ask(model, Operator.DRAFT, seed=1)[1]
    b = ask(model, Operator.DRAFT, seed=2)[1]
    child = recipe_of(ask(model, Operator.CROSSOVER, parent_prompt(a, b), seed=0)[1])
    ra, rb = recipe_of(a), recipe_of(b)
    assert child["models"][0] == ra["models"][0]
    assert rb["models"][0] in child["models"]
    assert set(child["features"]) == set(ra["features"]) | set(rb["features"])


def _debug(parent: dict[str, Any], feedback: str) -> tuple[str, dict[str, Any]]:
    from openmle.backends._offline import render_program

    code = render_program(parent, "parent")
    views = [ParentView(node_id="n0", code=code, feedback=feedback)]
    req = build_request(
        Operator.DEBUG, task=TaskBrief(description="A task."), parents=views, execution_timeout_s=60
    )
    answer = anyio.run(OfflineModel(sklearn=True).complete, req).text
    plan, rest = answer.split("```python\n", 1)
    return plan, recipe_of(rest)


BASE: dict[str, Any] = {
    "models": [{"name": "knn", "params": {"k": 15, "weighted": True}}],
    "features": ["standardize"],
    "impute": "median",
    "cat": "onehot",
}


def test_debug_repairs_known_error_signatures_from_the_feedback() -> None:
    """NaN inputs get imputation, infinite logs get log1p, a missing module numpy models."""
    nan_parent = {**BASE, "impute": "none"}
    plan, fixed = _debug(nan_parent, "Error: ValueError: Input X contains NaN or infinity")
    assert fixed["impute"] == "median" and "median" in plan
    log_parent = {**BASE, "features": ["log", "standardize"]}
    plan, fixed = _debug(log_parent, "ValueError: Input X contains infinity or a value too large")
    assert "log" not in fixed["features"] and "log1p" in fixed["features"]
    sk_parent = {**BASE, "models": [{"name": "hgb", "params": {"max_iter": 100}}]}
    plan, fixed = _debug(sk_parent, "ModuleNotFoundError: No module named 'sklearn'")
    assert fixed["models"][0]["name"] in {"ridge", "knn", "logreg"}
    slow = {
        **BASE,
        "models": [{"name": "rf", "params": {"n_estimators": 200}}],
        "features": ["poly2"],
    }
    plan, fixed = _debug(slow, "Outcome: timeout\nDetail: killed at the wall-clock limit")
    assert fixed["models"][0]["params"]["n_estimators"] < 200 and "poly2" not in fixed["features"]


def test_debug_reads_only_the_feedback_not_the_checklist() -> None:
    """The submission checklist mentions infinite values; that alone triggers no NaN/log fix."""
    plan, fixed = _debug({**BASE, "impute": "none"}, "Error: KeyError: 'price'")
    assert "rewrite conservatively" in plan
    plan, fixed = _debug({**BASE, "features": ["log"]}, "Error: KeyError: 'price'")
    assert "rewrite conservatively" in plan and "log" not in fixed["features"]


@pytest.mark.slow
def test_programs_run_and_grade_on_a_real_task(tmp_path: Path) -> None:
    """Drafts (numpy only) run as real processes and write gradeable submissions."""
    task = ToyTask.create(tmp_path / "task", n=300)
    model = OfflineModel(sklearn=False, bug_rate=0.0)
    scores = []
    for s in range(4):
        code = ask(model, Operator.DRAFT, seed=s)[1]
        work = tmp_path / f"w{s}"
        work.mkdir()
        (work / "main.py").write_text(code)
        env = {**os.environ, "DATA_DIR": str(task.public_dir(Split.VALID))}
        proc = subprocess.run(
            [sys.executable, "main.py"], cwd=work, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        assert "Final Validation Score:" in proc.stdout
        grade = task.grade(work / "submission.csv", Split.VALID)
        assert grade.valid, grade.reason
        scores.append(grade.score)
    assert max(s for s in scores if s is not None) > 0.8


def _run_draft(code: str, data: Path, work: Path) -> list[list[str]]:
    """Run ``code`` in ``work`` on ``data``; the rows of the submission it wrote."""
    work.mkdir()
    (work / "main.py").write_text(code)
    env = {**os.environ, "DATA_DIR": str(data)}
    proc = subprocess.run(
        [sys.executable, "main.py"], cwd=work, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "Final Validation Score:" in proc.stdout
    return [ln.split(",") for ln in (work / "submission.csv").read_text().splitlines()]


def test_programs_fall_back_to_the_prior_without_a_tabular_layout(tmp_path: Path) -> None:
    """Without train.csv + test.csv (zipped images, JSON records) a draft fills the sample
    submission, whatever its name, with the training prior: mean or most frequent label."""
    code = ask(OfflineModel(sklearn=False, bug_rate=0.0), Operator.DRAFT)[1]
    images = tmp_path / "images"
    images.mkdir()
    (images / "train.csv").write_text("id,has_cactus\na.jpg,1\nb.jpg,1\nc.jpg,0\nd.jpg,1\n")
    (images / "train.zip").write_bytes(b"")
    (images / "sample_submission.csv").write_text("id,has_cactus\nx.jpg,0.5\ny.jpg,0.5\n")
    assert _run_draft(code, images, tmp_path / "w1") == [
        ["id", "has_cactus"],
        ["x.jpg", "0.750000"],
        ["y.jpg", "0.750000"],
    ]
    records = tmp_path / "records"
    records.mkdir()
    rows = [{"request_id": f"t{i}", "got": i % 4 == 0, "kind": "ab"[i % 3 == 0]} for i in range(8)]
    (records / "train.json").write_text(json.dumps(rows))
    (records / "sampleSubmission.csv").write_text("request_id,got,kind,other\nq1,0,a,7\n")
    assert _run_draft(code, records, tmp_path / "w2") == [
        ["request_id", "got", "kind", "other"],
        ["q1", "0.250000", "a", "7"],
    ]


def test_whole_number_classes_are_labels_when_the_description_md_scores_accuracy(
    tmp_path: Path,
) -> None:
    """MLE-bench's layout (description.md, no description.txt): a draft reads the description
    there, so a whole-number target scored by accuracy is predicted as labels, not numbers."""
    code = ask(OfflineModel(sklearn=False, bug_rate=0.0), Operator.DRAFT)[1]
    data = tmp_path / "data"
    data.mkdir()
    rows = [(i, i % 3, (i % 3) + 1) for i in range(60)]
    (data / "train.csv").write_text(
        "Id,x,Cover_Type\n" + "".join(f"{i},{x},{y}\n" for i, x, y in rows)
    )
    (data / "test.csv").write_text("Id,x\n" + "".join(f"{100 + i},{i % 3}\n" for i in range(6)))
    (data / "sample_submission.csv").write_text(
        "Id,Cover_Type\n" + "".join(f"{100 + i},2\n" for i in range(6))
    )
    (data / "description.md").write_text(
        "# Forest cover\n\nScored with multi-class-classification-accuracy.\n"
    )
    got = _run_draft(code, data, tmp_path / "w1")
    assert got[0] == ["Id", "Cover_Type"] and len(got) == 7
    assert {row[1] for row in got[1:]} <= {"1", "2", "3"}
    (data / "description.md").write_text("# Forest cover\n\nScored with RMSE.\n")
    numbers = _run_draft(code, data, tmp_path / "w2")
    assert any(row[1] not in {"1", "2", "3"} for row in numbers[1:])  # a regression's numbers


@pytest.mark.parametrize("classes", [3, 0])
def test_knn_asks_for_no_more_neighbours_than_training_rows(classes: int) -> None:
    """A miniature's five training rows and the recipe's k = 25: every row is a neighbour
    (numpy raised "kth(=25) out of bounds" before)."""
    import numpy as np

    from openmle._embedded import parts

    scope: dict[str, Any] = {"np": np, "K": classes}
    exec(parts("openmle.backends._offline_programs", "tabular_parts.py")["model:knn"], scope)
    x = np.arange(10.0).reshape(5, 2)
    y = np.array([0, 1, 2, 0, 1])
    got = scope["knn"](x, y, x[:2], 25, False)
    if classes:
        assert got.shape == (2, 3) and np.allclose(got.sum(axis=1), 1.0)
    else:
        assert np.allclose(got, y.mean())  # all five rows, equally weighted


@pytest.mark.anyio
async def test_offline_model_writes_node_summaries_for_the_summary_store() -> None:
    """Summary requests get the JSON SummaryStore asks for: the method from the program's
    recipe, the lesson from the scores in the prompt (or the failure)."""
    from openmle.search import Board, ExperienceCard, SummaryStore

    model = OfflineModel()
    draft = await model.complete(
        ModelRequest(
            messages=(Message(role="user", content="task"),), operator=Operator.DRAFT, seed=1
        )
    )
    code = draft.text.split("```python\n")[1].split("```")[0]
    rows = [  # node, operator, parents, outcome, score, plan
        ("a", Operator.DRAFT, (), Outcome.SUCCESS, 0.5, "p"),
        ("b", Operator.IMPROVE, ("a",), Outcome.SUCCESS, 0.6, "q"),
        ("c", Operator.IMPROVE, ("a",), Outcome.RUNTIME_ERROR, None, "r"),
    ]
    cards = [
        ExperienceCard(
            node_id=node,
            step=step,
            operator=op,
            parent_ids=parents,
            outcome=outcome,
            score=score,
            plan=plan,
        )
        for step, (node, op, parents, outcome, score, plan) in enumerate(rows)
    ]
    board = Board.from_cards(cards)
    store = SummaryStore(model=model)
    got = await store.ensure(board, ["a", "b", "c"], code_of=lambda n: code)
    assert store.failures == 0
    assert got["a"].startswith("Fits ") and "no scored parent" in got["a"]
    assert "against 0.5 for parent a (+0.1)" in got["b"]
    assert "did not produce a validation score (outcome runtime_error)" in got["c"]
