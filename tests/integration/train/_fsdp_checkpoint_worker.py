"""The checkpoint phase of ``_dist_worker.py`` (``test_gspo_distributed.py``): an FSDP2
checkpoint saved by two processes.

:func:`run` on a rank of ``torchrun --nproc_per_node=2`` shards the tiny model with
``fully_shard``, takes a GSPO step on this rank's shard of global batch 0, saves a
checkpoint to ``OUT/ck-fsdp`` (every rank: the full tensors are gathered), then steps on batch 1
and writes that step's metrics to ``OUT/fsdp-continue-<rank>.json`` and the gathered parameters
to ``OUT/fsdp-continue-params-<rank>.pt``. With ``single`` one process builds the plain model,
loads ``OUT/ck-fsdp``, steps on the whole batch 1 and writes ``OUT/fsdp-continue-single.json``
and ``OUT/fsdp-continue-params-single.pt``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.distributed as dist
from _gspo_ddp_worker import (  # type: ignore[import-not-found]
    CONFIG,
    global_batch,
    shard,
    single_order,
)
from _gspo_fsdp_worker import full, sharded  # type: ignore[import-not-found]

from openmle.train import GSPOTrainer, TinyCausalLM, TinyLMConfig


def run(out: Path, single: bool) -> None:
    """The checkpoint phase (on a rank, the process group is initialised already; ``single``
    runs after the ranks, on their checkpoint)."""
    if single:
        model = TinyCausalLM(TinyLMConfig(vocab_size=32, dim=32, n_layers=1, n_heads=2, seed=7))
        trainer = GSPOTrainer(model, config=CONFIG)
        trainer.load(out / "ck-fsdp")  # the seed-7 weights are replaced by the checkpoint's
        metrics = trainer.step(single_order(global_batch(1)))
        params = [p.detach() for p in model.parameters()]
        tag = "single"
    else:
        rank = dist.get_rank()
        model = sharded(0)
        trainer = GSPOTrainer(model, config=CONFIG)
        trainer.step(shard(global_batch(0), rank))
        trainer.save(out / "ck-fsdp")
        metrics = trainer.step(shard(global_batch(1), rank))
        params = full(model)
        tag = str(rank)
    (out / f"fsdp-continue-{tag}.json").write_text(json.dumps(metrics, sort_keys=True))
    torch.save(params, out / f"fsdp-continue-params-{tag}.pt")
