"""GPU leases compose with an inherited CUDA_VISIBLE_DEVICES and are released on every path."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from openmle import Resources
from openmle.backends import gpu_models, visible_gpus
from openmle.backends._gpu import GpuPool
from openmle.errors import InvalidArgument

pytestmark = pytest.mark.anyio


def test_visible_gpus_follow_cuda_rules() -> None:
    """Entries are read in order and stop at the first invalid one, as CUDA does."""
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "4, 6"}) == ("4", "6")
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-ab12,1"}) == ("GPU-ab12", "1")
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,-1,3"}) == ("2",)
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == ()


def test_spec_selects_from_visible() -> None:
    """gpus=n takes the first n visible; gpus=[i] indexes the visible list; bad specs raise."""
    env = {"CUDA_VISIBLE_DEVICES": "4,6,7"}
    assert GpuPool.from_spec(None, env).devices == ("4", "6", "7")
    assert GpuPool.from_spec(2, env).devices == ("4", "6")
    assert GpuPool.from_spec([2, 0], env).devices == ("7", "4")
    with pytest.raises(InvalidArgument, match="gpus=4"):
        GpuPool.from_spec(4, env)
    with pytest.raises(InvalidArgument, match=r"\[0, 3\)"):
        GpuPool.from_spec([3], env)
    with pytest.raises(InvalidArgument, match="distinct"):
        GpuPool.from_spec([1, 1], env)


async def test_lease_by_id_composes_with_inherited_mask() -> None:
    """Job GPU 1 under CUDA_VISIBLE_DEVICES=4,6 is physical device 6."""
    pool = GpuPool.from_spec(None, {"CUDA_VISIBLE_DEVICES": "4,6"})
    async with pool.lease(Resources(gpu_ids=(1,))) as got:
        assert got == ("6",)
        assert pool.in_use == 1
    assert pool.in_use == 0


async def test_lease_waits_and_is_released_on_error_and_cancel() -> None:
    """A second lease waits for the first; errors and cancellation release the GPUs."""
    pool = GpuPool(devices=("0", "1"))
    order: list[str] = []

    async def holder() -> None:
        async with pool.lease(Resources(gpus=2)):
            order.append("first")
            await anyio.sleep(0.2)

    async def waiter() -> None:
        await anyio.sleep(0.05)
        async with pool.lease(Resources(gpus=1)) as got:
            order.append(f"second:{got}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        tg.start_soon(waiter)
    assert order == ["first", "second:('0',)"]

    with pytest.raises(RuntimeError):
        async with pool.lease(Resources(gpus=2)):
            raise RuntimeError("boom")
    assert pool.in_use == 0

    with anyio.move_on_after(0.05):
        async with pool.lease(Resources(gpus=1)):
            await anyio.sleep(10)
    assert pool.in_use == 0


async def test_impossible_request_is_refused() -> None:
    """Asking for more GPUs than the pool has, or an unknown id, is an InvalidArgument."""
    pool = GpuPool(devices=("0",))
    assert pool.problem(Resources(gpus=2)) is not None
    assert pool.problem(Resources(gpu_ids=(1,))) is not None
    assert pool.problem(Resources(gpus=1)) is None
    with pytest.raises(InvalidArgument, match="gpus=2"):
        async with pool.lease(Resources(gpus=2)):
            pass


def _fake_smi(bin_dir: Path, script: str) -> None:
    """An ``nvidia-smi`` on PATH that answers like the real one (``--query-gpu=FIELDS``)."""
    bin_dir.mkdir(exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + script)
    smi.chmod(0o755)


def test_gpus_come_from_nvidia_smi_when_cuda_visible_devices_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_smi(
        tmp_path,
        'case "$1" in\n'
        '  --query-gpu=index) printf "0\\n1\\n" ;;\n'
        "  --query-gpu=name,memory.total)\n"
        '    printf "NVIDIA H200, 143771 MiB\\nNVIDIA H200, 143771 MiB\\n" ;;\n'
        "esac\n",
    )
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert visible_gpus({}) == ("0", "1")
    assert gpu_models() == ("NVIDIA H200, 143771 MiB",) * 2


def test_a_failing_nvidia_smi_lists_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a loaded driver nvidia-smi prints its error on standard output and exits 9: that
    line is not a GPU."""
    _fake_smi(
        tmp_path,
        'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\n'
        "exit 9\n",
    )
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert visible_gpus({}) == ()
    assert gpu_models() == ()
