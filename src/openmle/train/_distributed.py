"""The few ``torch.distributed`` calls the trainers make, each a no-op in one process.

The trainers detect an initialised process group (``torchrun`` + ``init_process_group``, or
``torch.multiprocessing``) and then wrap the model in ``DistributedDataParallel``. Each rank
passes *its own shard* of the batch to ``step``; shards must have the same number of sequences
so every rank runs the same number of forward/backward passes. Counts used as loss denominators
are summed over ranks and the local loss is multiplied by the world size (DDP averages
gradients), so N ranks on N shards take exactly the step one process takes on the whole batch.

FSDP2: shard the model yourself (``torch.distributed.fsdp.fully_shard`` on each block, then on
the root) before building the trainer; the engine sees an FSDP2 model and adds no DDP wrapper.
The loss scaling above is the same (FSDP2 averages gradients like DDP), and ``save`` then writes
each rank's shard of the state dict (use ``torch.distributed.checkpoint`` to consolidate).
Tested with 2 CPU processes over gloo against one process on the whole batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.distributed as dist
from torch import Tensor, nn

__all__ = ["all_reduce_sum", "barrier", "is_distributed", "rank", "world_size", "wrap_ddp"]


def is_distributed() -> bool:
    """Whether a process group is initialised with more than one rank."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    """Number of ranks (1 without a process group)."""
    return dist.get_world_size() if is_distributed() else 1


def rank() -> int:
    """This process's rank (0 without a process group)."""
    return dist.get_rank() if is_distributed() else 0


def all_reduce_sum(values: Tensor) -> Tensor:
    """Sum ``values`` over ranks (in place; returned for chaining)."""
    if is_distributed():
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def barrier() -> None:
    """Wait for every rank."""
    if is_distributed():
        dist.barrier()


def wrap_ddp(model: nn.Module, device: torch.device) -> nn.Module:
    """``DistributedDataParallel(model)`` under a process group, else ``model`` itself."""
    if not is_distributed():
        return model
    from torch.nn.parallel import DistributedDataParallel

    if device.type == "cuda":
        ids: list[int] | None = [
            torch.cuda.current_device() if device.index is None else device.index
        ]
    else:
        ids = None
    return DistributedDataParallel(model, device_ids=ids)


@contextlib.contextmanager
def no_sync(model: nn.Module, enabled: bool) -> Iterator[None]:
    """Skip DDP's gradient all-reduce inside (for all but the last accumulation micro-step)."""
    sync_off = getattr(model, "no_sync", None)
    if enabled and callable(sync_off):
        with sync_off():
            yield
    else:
        yield
