"""A task whose metric no vetted one fits: the model answers ``"metric": "custom"`` and writes
utils/metric.py; the builder checks it in gym's confined grading process before the gate and
the baselines use it. A sound metric builds a package graded by it that validates; an unsound
or hostile one rejects the build at the ``metric`` stage with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from attrs import evolve
from tests.integration.builder._steps import build, validate

from openmle import ModelRequest, ModelResponse
from openmle.backends import OfflineModel
from openmle.builder import STAGES
from openmle.builder._spec import PURPOSE_KEY, PURPOSE_METRIC, PURPOSE_SPEC

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.needs("pandas", "sklearn")]

MEDIAN_ABS = """import numpy as np


class MedianAbsoluteErrorMetrics:
    higher_is_better = False

    def evaluate(self, y_true, y_pred):
        t = y_true.set_index("id")["target"].astype(float)
        p = y_pred.set_index("id")["target"].astype(float).reindex(t.index)
        return float(np.median(np.abs(t.to_numpy() - p.to_numpy())))
"""


class CustomMetricModel:
    """The offline model, except that its spec asks for a custom metric and it answers the
    metric request with ``metric_source``."""

    def __init__(self, metric_source: str) -> None:
        self.inner = OfflineModel()
        self.metric_source = metric_source
        self.asked: list[str] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        purpose = request.metadata.get(PURPOSE_KEY)
        self.asked.append(str(purpose))
        if purpose == PURPOSE_METRIC:
            return ModelResponse(text=f"```python\n{self.metric_source}```\n", model="scripted")
        response = await self.inner.complete(request)
        if purpose == PURPOSE_SPEC:
            spec = json.loads(response.text)
            spec.update(metric="custom", higher_is_better=False)
            return evolve(response, text=json.dumps(spec))
        return response


def _raw(root: Path, n: int = 150) -> Path:
    import numpy as np

    rng = np.random.default_rng(2)
    root.mkdir(parents=True)
    x = rng.normal(size=(n, 3))
    y = x @ [2.0, -1.0, 0.5] + rng.standard_t(2, size=n)  # heavy tails: a median metric
    lines = ["id,a,b,c,target"] + [
        f"{k},{r[0]:.4f},{r[1]:.4f},{r[2]:.4f},{t:.4f}"
        for k, (r, t) in enumerate(zip(x, y, strict=True))
    ]
    (root / "data.csv").write_text("\n".join(lines) + "\n")
    return root


def test_a_sound_custom_metric_builds_a_package_it_grades(tmp_path: Path) -> None:
    model = CustomMetricModel(MEDIAN_ABS)
    pkg = tmp_path / "pkg"
    result = build(_raw(tmp_path / "raw"), pkg, model)
    assert result.status == "built", result.reason
    assert PURPOSE_METRIC in model.asked
    assert "metric" in STAGES and result.record["metric"]["ok"] is True
    toml = (pkg / "task.toml").read_text()
    assert "metric =" not in toml and "higher_is_better = false" in toml
    assert (pkg / "utils" / "metric.py").read_text() == MEDIAN_ABS
    solv = result.record["solvability"]
    assert solv["model"]["score"] < solv["constant"]["score"]
    validate(pkg)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (
            MEDIAN_ABS.replace("return float(np.median", "return float('nan') + float(np.median"),
            "not a finite number",
        ),
        (
            MEDIAN_ABS.replace(
                "        t = ", "        open('/etc/hostname').read()\n        t = "
            ),
            "may not",
        ),
        (
            MEDIAN_ABS.replace("higher_is_better = False", "higher_is_better = True"),
            "does not order",
        ),
        ("no metric here\n", "SyntaxError"),
    ],
    ids=["nan", "reads-a-file", "wrong-direction", "not-python"],
)
def test_an_unsound_custom_metric_rejects_the_build_with_the_reason(
    tmp_path: Path, source: str, reason: str
) -> None:
    pkg = tmp_path / "pkg"
    result = build(_raw(tmp_path / "raw"), pkg, CustomMetricModel(source))
    assert (result.status, result.stage) == ("rejected", "metric"), result.reason
    assert reason in result.reason and result.findings == ("metric_rejected",)
    assert not pkg.exists()
