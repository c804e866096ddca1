"""Property: concurrent GPU leases never share a device, respect the pool, and always release."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from openmle import Resources
from openmle.backends._gpu import GpuPool


@st.composite
def pool_and_requests(draw: st.DrawFn) -> tuple[int, list[Resources]]:
    n = draw(st.integers(min_value=1, max_value=4))
    by_count = st.builds(lambda k: Resources(gpus=k), st.integers(min_value=0, max_value=n))
    by_ids = st.builds(
        lambda ids: Resources(gpu_ids=tuple(ids)),
        st.lists(st.integers(min_value=0, max_value=n - 1), min_size=1, max_size=n, unique=True),
    )
    reqs = draw(st.lists(st.one_of(by_count, by_ids), min_size=1, max_size=8))
    return n, reqs


@settings(max_examples=60, deadline=None)
@given(pool_and_requests(), st.integers(min_value=0, max_value=2**16))
def test_leases_are_exclusive_and_released(case: tuple[int, list[Resources]], seed: int) -> None:
    """However requests interleave (some cancelled), no device is held twice; all are freed."""
    n, requests = case
    pool = GpuPool(devices=tuple(str(10 + i) for i in range(n)))
    held: set[str] = set()
    granted: list[tuple[str, ...]] = []

    async def one(i: int, res: Resources) -> None:
        with anyio.move_on_after(0.05 if (seed >> i) & 1 else 10):
            async with pool.lease(res) as got:
                assert not held.intersection(got), (held, got)
                assert len(got) == res.gpu_count
                if res.gpu_ids is not None:
                    assert got == tuple(pool.devices[j] for j in res.gpu_ids)
                held.update(got)
                granted.append(got)
                try:
                    await anyio.sleep(0.001 * ((seed + i) % 5))
                finally:  # a lease cancelled while held is released too
                    held.difference_update(got)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for i, res in enumerate(requests):
                tg.start_soon(one, i, res)

    anyio.run(main)
    assert pool.in_use == 0
    assert held == set()
