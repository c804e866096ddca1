"""The bench and priors: a competition in the priors' provenance is refused (naming the task
and the prior's source), and the 2 x 2 ablation's arms are well formed."""

from __future__ import annotations

import pytest

from openmle.bench import Arm, BenchConfig, check_priors_clean, priors_ablation
from openmle.errors import InvalidArgument
from openmle.gym._decontam import Exclusions
from openmle.priors import Prior, PriorLibrary


def _lib(*ids: str) -> PriorLibrary:
    return PriorLibrary(
        [
            Prior(prior_id="a", kind="method", text="t", source="write-up X", source_ids=["other"]),
            Prior(prior_id="b", kind="trick", text="t", source="openmle run Y", source_ids=ids),
        ]
    )


@pytest.mark.parametrize(
    "ids", [("spaceship-titanic",), ("Spaceship Titanic",), ("spaceship-titanic@seed-3",)]
)
def test_a_task_in_the_provenance_is_refused_naming_task_and_source(ids: tuple[str]) -> None:
    with pytest.raises(InvalidArgument) as err:
        check_priors_clean(_lib(*ids), ["aerial-cactus", "spaceship-titanic"])
    msg = str(err.value)
    assert "'spaceship-titanic'" in msg and "openmle run Y" in msg and "'b'" in msg


def test_clean_libraries_pass() -> None:
    check_priors_clean(_lib("titanic", "spaceship"), ["spaceship-titanic"])
    check_priors_clean(PriorLibrary([]), ["spaceship-titanic"])


SPOOKY = Exclusions(
    names=["Spooky Author Identification"], data_hashes=["ab" * 32, "md5:" + "cd" * 16]
)


def _one(**kw: object) -> PriorLibrary:
    fields: dict[str, object] = {"prior_id": "w", "kind": "trick", "text": "t", "source": "s"}
    return PriorLibrary([Prior(**(fields | kw))])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kw",
    [
        {"source": "1st place - Spooky Author Identification", "source_ids": ["kaggle-123"]},
        {"source_ids": ["spooky author identification"]},
        {"text": "On Spooky Author Identification, stack NB features."},
        {"source_ids": ["AB" * 32]},
        {"source_ids": ["sha256:" + "ab" * 32]},
        {"source_ids": ["MD5:" + "CD" * 16]},
    ],
)
def test_a_prior_naming_the_competition_or_its_data_is_refused(kw: dict[str, object]) -> None:
    """By the human name (not the id), as whole words, or by a data hash of the competition."""
    with pytest.raises(InvalidArgument, match=r"'spooky-author'.*'w'"):
        check_priors_clean(_one(**kw), ["spooky-author"], known={"spooky-author": SPOOKY})


def test_an_unrelated_prior_passes_the_shared_rule() -> None:
    for kw in (
        {"source": "myspooky author identifications blog", "source_ids": ["other"]},
        {"source_ids": ["cd" * 32, "spooky"]},
        {"text": "author identification tasks like TF-IDF"},
    ):
        check_priors_clean(_one(**kw), ["spooky-author"], known={"spooky-author": SPOOKY})


def _config(**kw: object) -> BenchConfig:
    base: dict[str, object] = {
        "suite": "custom",
        "competitions": ["c"],
        "seeds": [0, 1],
        "model": "offline",
        "data_dir": "/nowhere",
        "budget": {"sandbox_s": 60.0},
    }
    return BenchConfig(**(base | kw))  # type: ignore[arg-type]


def test_the_ablation_arms_and_their_checks() -> None:
    arms = priors_ablation(4)
    assert [(a.name, a.priors, a.workers) for a in arms] == [
        ("base", False, 1),
        ("priors", True, 1),
        ("parallel", False, 4),
        ("priors+parallel", True, 4),
    ]
    cfg = _config(arms=arms, priors="/lib.jsonl")
    again = BenchConfig.from_dict(cfg.to_dict())
    assert again == cfg and again.arms == arms
    with pytest.raises(InvalidArgument, match="no prior library"):
        _config(arms=arms)
    with pytest.raises(InvalidArgument, match="sandbox_s"):
        _config(arms=arms, priors="/lib.jsonl", budget={"steps": 10})
    with pytest.raises(InvalidArgument, match="sandbox_s"):  # the CLI's budget: every key
        _config(arms=arms, priors="/lib.jsonl", budget={"steps": 10, "sandbox_s": None})
    with pytest.raises(InvalidArgument, match="distinct arm names"):
        _config(arms=[Arm(name="x"), Arm(name="x")])
    with pytest.raises(InvalidArgument, match=r"Arm\.name"):
        Arm(name="../up")
    with pytest.raises(InvalidArgument, match="workers >= 2"):
        priors_ablation(1)
    # A plain bench's manifest is unchanged by the new fields.
    assert set(_config().to_dict()) == {
        "suite", "competitions", "seeds", "model", "sandbox", "budget", "data_dir",
        "registry", "resources", "time_limit_s", "concurrency", "workers",
    }  # fmt: skip
