"""Fixed compute on the real local sandbox: 1, 2 and 4 workers running short sleep programs
on one ``sandbox_s`` budget spend the same sandbox seconds within one job's duration."""

from __future__ import annotations

import pytest

from openmle.backends import LocalSandbox
from openmle.search import Budget, SearchConfig, run_search
from openmle.testing import FunctionSelector, ScriptedModel

pytestmark = pytest.mark.integration

PROGRAM = """```python
import os, shutil, time
time.sleep(0.3)
shutil.copy(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"), "submission.csv")
print("Final Validation Score: 0.5")
```"""

CAP = 5.0


def test_local_sleep_programs_spend_the_same_compute_with_more_workers() -> None:
    spent: dict[int, float] = {}
    longest = 0.0
    for workers in (1, 2, 4):
        result = run_search(
            "tabular-binary",
            model=ScriptedModel(lambda _req: PROGRAM),
            sandbox=LocalSandbox(max_concurrency=4),
            selector=FunctionSelector(lambda c: 1.0),
            budget=Budget(sandbox_s=CAP),
            config=SearchConfig(initial_drafts=2, seed=0, timeout_s=60),
            workers=workers,
            final_test=False,
        )
        assert result.stop_reason == "sandbox_s"
        assert all(n.ok for n in result.nodes), [n.detail for n in result.nodes]
        spent[workers] = result.spent["sandbox_s"]
        longest = max([longest, *(n.used.sandbox_s for n in result.nodes)])
        assert spent[workers] >= CAP
    assert max(spent.values()) - min(spent.values()) <= longest, (spent, longest)
