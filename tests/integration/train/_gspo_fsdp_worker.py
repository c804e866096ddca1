"""The FSDP2 phase of ``_dist_worker.py`` (``test_gspo_distributed.py``): GSPO and SFT steps
on a model under FSDP2.

:func:`run` on a rank of ``torchrun --nproc_per_node=2`` shards the model with
``torch.distributed.fsdp.fully_shard`` (each block, then the root), trains on this rank's shard
of the same global batches as the DDP phase and saves the gathered full parameters to
``OUT/fsdp-params-<rank>.pt`` (and ``OUT/fsdp-sft-params-<rank>.pt`` after one SFT step); the
single-process reference is the DDP phase's ``single`` run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from _gspo_ddp_worker import CONFIG, global_batch, shard  # type: ignore[import-not-found]
from torch.distributed.fsdp import fully_shard

from openmle.train import (
    GSPOTrainer,
    SFTBatch,
    SFTConfig,
    SFTTrainer,
    TinyCausalLM,
    TinyLMConfig,
)


def sharded(seed: int) -> TinyCausalLM:
    """The tiny model of the DDP test, each block and then the root under ``fully_shard``."""
    model = TinyCausalLM(TinyLMConfig(vocab_size=32, dim=32, n_layers=1, n_heads=2, seed=seed))
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def full(model: TinyCausalLM) -> list[Any]:
    """Every parameter gathered from its shards (a plain tensor on every rank)."""
    return [p.full_tensor().detach() for p in model.parameters()]  # type: ignore[attr-defined]


def run(out: Path) -> None:
    """The FSDP2 phase (on a rank; the process group is initialised already)."""
    rank = dist.get_rank()
    model = sharded(0)
    trainer = GSPOTrainer(model, config=CONFIG)  # FSDP2 model: no DDP wrapper added
    for seed in range(2):
        trainer.step(shard(global_batch(seed), rank))
    torch.save(full(model), out / f"fsdp-params-{rank}.pt")

    sft_model = sharded(1)
    sft = SFTTrainer(sft_model, config=SFTConfig(lr=1e-2, adam_eps=1e-3, micro_batch_size=1))
    rb = shard(global_batch(0), rank)
    sft.step(
        SFTBatch(
            input_ids=rb.input_ids, attention_mask=rb.attention_mask, loss_mask=rb.response_mask
        )
    )
    torch.save(full(sft_model), out / f"fsdp-sft-params-{rank}.pt")
