"""The fast guard of the selection-quality comparison (``benchmarks/selection_quality.py``).

The comparison itself (three bundled tasks, 5 seeds per selector, 14 steps, three-factor against
greedy, uniform and best-of-N drafting) takes minutes and its margins are within about one
standard deviation, so it lives in ``benchmarks/``. What it rests on is checked here on one task
at a small budget, with real programs in the local sandbox: every arm searches and ends with a
score, and a seed's result does not depend on how many searches run side by side (ordered
commits), so the comparison measures the selectors and not the timing of a loaded machine.
"""

from __future__ import annotations

import math

import anyio
import pytest
from tests.quality._harness import DRAFTS_ONLY, SELECTORS, CachedSandbox, compare, table, wins

from openmle.backends import LocalSandbox

pytestmark = [pytest.mark.quality, pytest.mark.slow, pytest.mark.integration]

TASK = "tabular-regression"
HIB = {TASK: False}
SEEDS = (0, 1)


def test_every_arm_searches_and_the_result_does_not_depend_on_parallelism() -> None:
    """All searches side by side, then one at a time over the same recorded program results:
    the same best score for every (arm, seed), and the second pass runs no program the first did
    not (each search proposed the same programs); every arm ends with a finite score."""

    async def go() -> tuple[dict[str, dict[str, list[float]]], ...]:
        sandbox = CachedSandbox(LocalSandbox())

        async def comparison(parallel: int) -> dict[str, dict[str, list[float]]]:
            return await compare(
                [TASK], SEEDS, steps=5, initial_drafts=2, hib=HIB, drafts_only=True,
                parallel=parallel, sandbox=sandbox,
            )  # fmt: skip

        try:
            side_by_side = await comparison(8)
            ran = len(sandbox.cache)
            one_at_a_time = await comparison(1)
            assert len(sandbox.cache) == ran, "the second pass proposed other programs"
            assert sandbox.hits > 0
        finally:
            await sandbox.aclose()
        return side_by_side, one_at_a_time

    side_by_side, one_at_a_time = anyio.run(go)
    print("\n" + table(side_by_side, HIB))
    assert side_by_side == one_at_a_time
    scores = side_by_side[TASK]
    assert set(scores) == {*SELECTORS, DRAFTS_ONLY}
    assert all(len(v) == len(SEEDS) and all(math.isfinite(x) for x in v) for v in scores.values())
    assert set(wins(side_by_side, HIB)) == {TASK}  # the benchmark's summary reads these results
