"""Fixed compute on the real local sandbox: 1, 2 and 4 workers running short sleep programs
on one ``sandbox_s`` budget spend the same sandbox seconds within one job's duration (plus
the spread of the durations the machine gave the jobs)."""

from __future__ import annotations

import pytest

from openmle.backends import LocalSandbox
from openmle.search import Budget, SearchConfig, SearchSpec, run_search
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
    """A step is proposed only while the spent compute plus the jobs in flight times the mean
    committed job is under the cap, so a run of ``w`` workers ends past the cap by less than
    ``longest + (w - 1) * (longest - shortest)`` of its own jobs: one job's duration when
    the jobs take equal time (a quiet machine), wider by exactly the spread a loaded machine
    gives the real runs, never by the machine's luck. (A run of at most ``w`` jobs proposed
    them all before any had a duration: it can only be bounded by their sum.)"""
    spent: dict[int, float] = {}
    longest = 0.0
    bound = 0.0
    for workers in (1, 2, 4):
        result = run_search(
            SearchSpec(
                task="tabular-binary",
                model=ScriptedModel(lambda _req: PROGRAM),
                sandbox=LocalSandbox(max_concurrency=4),
                selector=FunctionSelector(lambda c: 1.0),
                budget=Budget(sandbox_s=CAP),
                config=SearchConfig(initial_drafts=2, seed=0, timeout_s=60),
                workers=workers,
                final_test=False,
            )
        )
        assert result.stop_reason == "sandbox_s"
        assert all(n.ok for n in result.nodes), [n.detail for n in result.nodes]
        spent[workers] = result.spent["sandbox_s"]
        durations = [n.used.sandbox_s for n in result.nodes]
        longest = max([longest, *durations])
        if len(durations) > workers:
            over = max(durations) + (workers - 1) * (max(durations) - min(durations))
        else:
            over = sum(durations)
        bound = max(bound, over)
        assert CAP <= spent[workers] <= CAP + over, (workers, spent, durations)
    assert max(spent.values()) - min(spent.values()) <= bound, (spent, longest, bound)
