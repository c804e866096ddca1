"""The DDP phase of ``_dist_worker.py`` (``test_gspo_distributed.py``): GSPO steps under
torchrun (DDP, gloo) or alone, and the batches and the rank's end that every phase shares.

:func:`run` on a rank of ``torchrun --nproc_per_node=2`` trains on this rank's shard of each
global batch; with ``single`` one process trains on the whole batch, ordered so its k-th
mini-batch is the union of the ranks' k-th mini-batches. Each run saves its final parameters to
``OUT/params-<rank or single>.pt`` and a checkpoint to ``OUT/ck``; then one SFT step on the
answers of the first batch saves ``OUT/sft-params-<rank or single>.pt``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist

from openmle.train import (
    GSPOConfig,
    GSPOTrainer,
    RolloutBatch,
    SFTBatch,
    SFTConfig,
    SFTTrainer,
    TinyCausalLM,
    TinyLMConfig,
)

WORLD, PER_RANK, STEPS = 2, 4, 2
# adam_eps well above gradient noise: Adam's near-sign first step would otherwise amplify the
# float rounding of gradients that are analytically zero (e.g. attention key biases).
CONFIG = GSPOConfig(lr=1e-2, adam_eps=1e-3, steps_per_batch=STEPS, micro_batch_size=1)


def global_batch(seed: int) -> RolloutBatch:
    """WORLD * PER_RANK sequences with ragged prompts/responses and rollout log-probs."""
    gen = torch.Generator().manual_seed(seed)
    prompts, responses, logps = [], [], []
    for _ in range(WORLD * PER_RANK):
        p, r = (int(x) for x in torch.randint(2, 6, (2,), generator=gen))
        prompts.append(torch.randint(0, 32, (p,), generator=gen).tolist())
        responses.append(torch.randint(0, 32, (r,), generator=gen).tolist())
        logps.append((-4 * torch.rand(r, generator=gen)).tolist())
    adv = torch.randn(WORLD * PER_RANK, generator=gen).tolist()
    return RolloutBatch.from_sequences(
        prompts, responses, adv, pad_token_id=0, rollout_logprobs=logps
    )


def shard(batch: RolloutBatch, rank: int) -> RolloutBatch:
    """Rows of ``rank``."""
    return batch.select(slice(rank * PER_RANK, (rank + 1) * PER_RANK))


def single_order(batch: RolloutBatch) -> RolloutBatch:
    """The whole batch ordered mini-batch by mini-batch: [r0 m0, r1 m0, r0 m1, r1 m1]."""
    per_mini = PER_RANK // STEPS
    rows = [
        rank * PER_RANK + k * per_mini + i
        for k in range(STEPS)
        for rank in range(WORLD)
        for i in range(per_mini)
    ]
    return batch.select(torch.tensor(rows))


def finish() -> NoReturn:
    """End a rank: every rank past its last collective, the process group destroyed, then exit
    without interpreter finalization.

    The barrier: gloo aborts a rank whose peer hangs up mid-exchange. ``os._exit``: gloo's
    worker threads can still hold tensors at finalization, whose release then takes the GIL of
    an interpreter being torn down and aborts the rank ("terminate called without an active
    exception", SIGABRT; seen in CI under FSDP2 after ``destroy_process_group``; pytorch#179291).
    Everything a rank writes is saved (``torch.save`` closes its file) before this.
    """
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run(out: Path, single: bool) -> None:
    """The DDP phase (on a rank, the process group is initialised already)."""
    model = TinyCausalLM(TinyLMConfig(vocab_size=32, dim=32, n_layers=1, n_heads=2, seed=0))
    tag = "single" if single else str(dist.get_rank())
    trainer = GSPOTrainer(model, config=CONFIG)
    for seed in range(2):
        batch = global_batch(seed)
        trainer.step(single_order(batch) if single else shard(batch, dist.get_rank()))
    torch.save([p.detach() for p in model.parameters()], out / f"params-{tag}.pt")
    trainer.save(out / ("ck-single" if single else "ck"))

    # SFT: one step on the answer tokens of batch 0 (its rank shard, or the whole batch)
    sft_model = TinyCausalLM(TinyLMConfig(vocab_size=32, dim=32, n_layers=1, n_heads=2, seed=1))
    sft = SFTTrainer(sft_model, config=SFTConfig(lr=1e-2, adam_eps=1e-3, micro_batch_size=1))
    rb = global_batch(0) if single else shard(global_batch(0), dist.get_rank())
    sft.step(
        SFTBatch(
            input_ids=rb.input_ids, attention_mask=rb.attention_mask, loss_mask=rb.response_mask
        )
    )
    torch.save([p.detach() for p in sft_model.parameters()], out / f"sft-params-{tag}.pt")
