"""Decontamination: suite ids, names, data hashes and user exclusions; the runner's check."""

from __future__ import annotations

import pytest

from openmle.bench import LITE_IDS
from openmle.priors import (
    ContaminatedTask,
    Exclusions,
    Prior,
    PriorLibrary,
    check_task_not_in_priors,
    default_exclusions,
)


def test_default_exclusions_refuse_by_id_name_and_mention() -> None:
    """MLE-bench Lite ids match by id, by spaced name in a title, and by mention in the text."""
    ex = default_exclusions()
    assert len(LITE_IDS) == 22 and all(ex.match(source_id=i) for i in LITE_IDS)
    assert ex.match(source_id="spooky-author-identification") is not None
    assert ex.match(name="1st place - Spooky Author Identification") is not None
    assert ex.match(name="notes", text="we reused our leaf classification pipeline") is not None
    assert ex.match(name="Titanic write-up", text="gradient boosting on passengers") is None
    # substrings of longer words do not match
    assert ex.match(name="leaf-classification-extended-notes-x", text="") is not None
    assert ex.match(name="myleaf classificationx") is None


def test_user_exclusions_and_data_hashes() -> None:
    """A user's ids and data hashes are refused too, combined with the suite."""
    ex = default_exclusions(extra=Exclusions(ids=["My Holdout"], data_hashes=["ABC123"]))
    assert ex.match(related_ids=["my_holdout"]) is not None
    assert ex.match(name="x", data_hashes=["abc123"]) is not None
    assert ex.match(name="x", data_hashes=["def"]) is None
    assert "user" in ex.suite and "mle-bench" in ex.suite


def test_runner_refuses_task_in_provenance() -> None:
    """A task named in a prior's provenance cannot be evaluated with that library."""
    lib = PriorLibrary(
        [
            Prior(
                prior_id="a",
                kind="trick",
                text="Clip predictions.",
                source="w",
                source_ids=["House Prices", "deadbeef"],
            )
        ]
    )
    with pytest.raises(ContaminatedTask, match="house-prices"):
        check_task_not_in_priors(lib, task_id="house-prices")
    with pytest.raises(ContaminatedTask):
        check_task_not_in_priors(lib, task_id="other", data_hash="DEADBEEF")
    check_task_not_in_priors(lib, task_id="titanic", names=["Titanic"])
