"""Core values: validation with clear messages, JSON round trips, enum helpers."""

from __future__ import annotations

import json
import math
import re

import pytest

from openmle import Job, Operator, Outcome, Resources, RunResult, Selection, Split, TaskMeta
from openmle._types import env_problem
from openmle.errors import InvalidArgument, InvalidArgumentType


def test_operator_parents() -> None:
    """Each operator knows how many parents it takes."""
    assert [o.n_parents for o in Operator] == [0, 1, 1, 2]


def test_outcome_classes() -> None:
    """SUCCESS, INFRA_ERROR and program failures are told apart."""
    assert Outcome.SUCCESS.is_success and not Outcome.SUCCESS.is_program_failure
    assert Outcome.INFRA_ERROR.is_infra and not Outcome.INFRA_ERROR.is_program_failure
    failures = {o for o in Outcome if o.is_program_failure}
    assert failures == set(Outcome) - {Outcome.SUCCESS, Outcome.INFRA_ERROR}


def test_taskmeta_from_mapping_golden_keys() -> None:
    """Golden-file keys map onto TaskMeta; extra keys are ignored; no direction means higher."""
    meta = TaskMeta.from_mapping(
        {
            "theoretical_min": 0,
            "theoretical_max": 1,
            "leaderboard_min": 0.2,
            "leaderboard_max": 0.9,
            "task_name": "t",
            "dynamic_bound_best_signed": 3.0,
        }
    )
    assert meta == TaskMeta(
        higher_is_better=True,
        theoretical_min=0.0,
        theoretical_max=1.0,
        leaderboard_min=0.2,
        leaderboard_max=0.9,
        name="t",
    )
    assert TaskMeta.from_mapping({"higher_is_better": None}).higher_is_better is True
    assert TaskMeta.from_mapping(meta.to_mapping()) == meta


@pytest.mark.parametrize(
    ("field", "lo", "hi"),
    [
        ("theoretical", 2.0, 1.0),
        ("leaderboard", 0.9, 0.1),
    ],
)
def test_taskmeta_min_above_max_names_field(field: str, lo: float, hi: float) -> None:
    """A min above its max is an InvalidArgument naming both fields."""
    with pytest.raises(InvalidArgument, match=f"{field}_min.*above.*{field}_max"):
        TaskMeta.from_mapping({f"{field}_min": lo, f"{field}_max": hi})


def test_taskmeta_rejects_nan_and_non_bool_direction() -> None:
    """NaN bounds and a non-bool direction are refused with the field name."""
    with pytest.raises(InvalidArgument, match="theoretical_max"):
        TaskMeta(theoretical_max=math.nan)
    with pytest.raises(InvalidArgumentType, match="higher_is_better"):
        TaskMeta.from_mapping({"higher_is_better": "yes"})
    with pytest.raises(InvalidArgumentType, match="leaderboard_min"):
        TaskMeta.from_mapping({"leaderboard_min": "0.1"})


def test_job_roundtrip_and_validation() -> None:
    """Jobs survive JSON and reject bad fields with their names."""
    job = Job(
        code="print(1)",
        task="tabular-binary",
        split="test",
        timeout_s=5,
        resources=Resources(cpus=2, gpu_ids=[0, 1], memory_mb=512),
        env={"B": "2", "A": "1"},
    )
    again = Job.from_dict(json.loads(json.dumps(job.to_dict())))
    assert again == job
    assert again.split is Split.TEST
    assert list(again.env) == ["A", "B"]
    assert job.resources.gpu_count == 2
    with pytest.raises(InvalidArgument, match="split"):
        Job(code="", task="t", split="train")
    with pytest.raises(InvalidArgument, match="timeout_s"):
        Job(code="", task="t", timeout_s=0)
    with pytest.raises(InvalidArgument, match="cpus"):
        Resources(cpus=-1)
    with pytest.raises(InvalidArgument, match="gpu_ids"):
        Resources(gpu_ids=[-1])
    with pytest.raises(InvalidArgument, match=r"env\['X'\]"):
        Job(code="", task="t", env={"X": 1})  # type: ignore[dict-item]


def test_runresult_roundtrip_and_score_rules() -> None:
    """RunResult round-trips; non-finite scores become None; scores need SUCCESS."""
    r = RunResult(outcome="success", score=0.5, logs="ok", runtime_s=1.5, artifacts=["a.csv"])
    assert RunResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert RunResult(outcome=Outcome.SUCCESS, score=math.nan).score is None
    with pytest.raises(InvalidArgument, match="score must be None"):
        RunResult(outcome=Outcome.TIMEOUT, score=0.1)
    with pytest.raises(InvalidArgument, match="outcome"):
        RunResult(outcome="exploded")
    infra = RunResult.infra_error("engine down", split="test")
    assert infra.outcome is Outcome.INFRA_ERROR and infra.score is None and infra.split == "test"


def test_selection_consistency() -> None:
    """A selection must give one probability per candidate and choose among them."""
    s = Selection(chosen=["b"], node_ids=["a", "b"], probabilities=[0.25, 0.75])
    assert s.probability_of("b") == 0.75
    with pytest.raises(InvalidArgument):
        Selection(chosen=["c"], node_ids=["a", "b"], probabilities=[0.5, 0.5])
    with pytest.raises(InvalidArgument):
        Selection(chosen=[], node_ids=["a", "b"], probabilities=[1.0])


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("LD_PRELOAD", "/dev/shm/x.so", "loader"),
        ("LD_LIBRARY_PATH", "/tmp", "loader"),
        ("LD_AUDIT", "/tmp/a.so", "loader"),
        ("GCONV_PATH", "/tmp", "loader"),
        ("GLIBC_TUNABLES", "glibc.malloc.check=1", "loader"),
        ("PYTHONPATH", "/tmp", "interpreter"),
        ("PYTHONHOME", "/tmp", "interpreter"),
        ("PYTHONSTARTUP", "/tmp/s.py", "interpreter"),
        ("PYTHONWARNINGS", "ignore::evil.Warning", "interpreter"),
        ("PYTHONNOUSERSITE", "", "interpreter"),
        ("A=B", "1", "'='"),
        ("A\0B", "1", "NUL"),
        ("A", "1\x002", "NUL"),
        ("", "1", "non-empty"),
        ("A", "\ud800", "surrogates"),
    ],
)
def test_job_env_refuses_loader_and_start_up_variables(key: str, value: str, why: str) -> None:
    """Variables that run code before the program (or cannot reach exec) are refused, by name."""
    with pytest.raises(InvalidArgument, match=rf"Job\.env\[{re.escape(repr(key))}\] .*{why}"):
        Job(code="", task="t", env={key: value})
    assert env_problem(key, value) is not None


def test_job_env_keeps_ordinary_and_harmless_python_variables() -> None:
    """Ordinary names and the allowed PYTHON* ones pass unchanged."""
    env = {"SEED": "3", "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1", "LDX": "ok", "TZ": "UTC"}
    assert dict(Job(code="", task="t", env=env).env) == dict(sorted(env.items()))


def test_task_meta_signs_scores_in_one_place() -> None:
    """TaskMeta.signed is the one direction flip; better compares through it."""
    up, down = TaskMeta(higher_is_better=True), TaskMeta(higher_is_better=False)
    assert up.signed(0.25) == 0.25 and down.signed(0.25) == -0.25
    assert up.better(0.3, 0.2) and not up.better(0.2, 0.3) and not up.better(0.2, 0.2)
    assert down.better(0.2, 0.3) and not down.better(0.3, 0.2)
