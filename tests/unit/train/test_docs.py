"""The laptop example of docs/how-to/train-operators.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

pytestmark = pytest.mark.torch

DOC = Path(__file__).parents[3] / "docs" / "how-to" / "train-operators.md"


def test_laptop_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first Python block trains SFT then GSPO and writes both checkpoints."""
    block = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(block, str(DOC), "exec"), {"__name__": "docs_example"})
    for name in ("sft", "gspo"):
        assert (tmp_path / "checkpoints" / name / "trainer.json").is_file()
