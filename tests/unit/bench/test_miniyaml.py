"""The reader of the YAML subset MLE-bench's registry files use: PyYAML's results on every
shape those files have, refusal (not misreading) outside the subset, and the registry read
without PyYAML.

At development time it was also run on all 82 ``config.yaml`` and 82 ``checksums.yaml`` of
openai/mle-bench (commit 783b15a): identical to ``yaml.safe_load`` on every file.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from openmle.bench import LITE_IDS, MLEBench, build_miniature
from openmle.bench._miniyaml import load

CONFIG = """\
id: dogs-vs-cats-redux-kernels-edition
name: "Dogs vs. Cats Redux: Kernels Edition"
competition_type: code
awards_medals: true
prizes:
  - position: 1
    value: 25000
  - position: Visualization Prospect
    value: 500
description: mlebench/competitions/x/description.md

dataset:
  answers: x/prepared/private/answers.csv
  gold_submission: x/prepared/private/gold_submission.csv
  sample_submission: x/prepared/public/sample_submission.csv

grader:
  name: log-loss # a comment
  grade_fn: mlebench.competitions.x.grade:grade

preparer: mlebench.competitions.x.prepare:prepare
"""

CHECKSUMS = """\
private:
  test.csv: ebdb02d62dbaf60270a9b3a8617840af
public:
  sample_submission.csv: 14c675bde0de98994efafac8e008277e
zip: 72018554bfbb009f2145f56121380078
"""

SCALARS = """\
a: 1_000
b: 0x1f
c: 1.5
d: 1e3
e: yes
f: n
g: ~
h: '#x'
i: a # c
j: .inf
k: 012
l: []
m:
- 1
- x: 2
  y: 'it''s'
-
  - 3
n: "tab\\there"
o: -7
p: Name: With Colon
"""


def test_the_registry_shapes_read_as_expected() -> None:
    cfg = load(CONFIG)
    assert cfg["name"] == "Dogs vs. Cats Redux: Kernels Edition"
    assert cfg["awards_medals"] is True
    assert cfg["prizes"] == [
        {"position": 1, "value": 25000},
        {"position": "Visualization Prospect", "value": 500},
    ]
    assert cfg["grader"] == {
        "name": "log-loss",
        "grade_fn": "mlebench.competitions.x.grade:grade",
    }
    assert load(CHECKSUMS)["public"] == {
        "sample_submission.csv": "14c675bde0de98994efafac8e008277e"
    }
    assert load("prizes: null\n") == {"prizes": None}


def test_scalars_resolve_like_yaml_1_1() -> None:
    out = load(SCALARS.replace("p: Name: With Colon\n", ""))
    assert out["a"] == 1000 and out["b"] == 31 and out["c"] == 1.5 and out["d"] == "1e3"
    assert out["e"] is True and out["f"] == "n" and out["g"] is None and out["h"] == "#x"
    assert out["i"] == "a" and out["j"] == math.inf and out["k"] == 10 and out["l"] == []
    assert out["m"] == [1, {"x": 2, "y": "it's"}, [3]] and out["n"] == "tab\there"
    assert out["o"] == -7


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\n",
        "a: *x\n",
        "a: !!str 1\n",
        "a: |\n  text\n",
        "a: [1, 2]\n",
        "a: {b: 1}\n",
        "a: 1\na: 2\n",
        "a:\n  b: 1\n    c: 2\n",
        "a: 'open\n",
        "p: Name: With Colon\n",
        "z: -\n",
        "- - 3\n",
    ],
)
def test_outside_the_subset_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="line"):
        load(text)


def test_identical_to_pyyaml_on_every_registry_file(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    registry, _ = build_miniature(tmp_path / "m", LITE_IDS)
    texts = [p.read_text() for p in sorted(registry.rglob("config.yaml"))]
    assert len(texts) == len(LITE_IDS)
    for text in [*texts, CONFIG, CHECKSUMS, SCALARS.replace("p: Name: With Colon\n", "")]:
        assert load(text) == yaml.safe_load(text)


def test_registry_reads_without_pyyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry, data = build_miniature(tmp_path / "m", ["random-acts-of-pizza"])
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml -> ImportError
    comp = MLEBench.locate(registry, data).competition("random-acts-of-pizza")
    assert comp.name == "Random Acts of Pizza"
    assert comp.sample_submission.endswith("prepared/public/sampleSubmission.csv")
    assert comp.grade_fn == "mlebench.competitions.random-acts-of-pizza.grade:grade"
