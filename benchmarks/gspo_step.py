"""Training-step time: ``GSPOTrainer`` against TRL's ``GRPOTrainer`` (sequence-level IS).

Both sides train the same tiny Llama (built from a config, no download) on the same rollout
batch: prompt + completion ids, old log-probs, rollout log-probs (truncated IS on [0, 2]) and
one advantage per sequence, with AdamW (lr 1e-6, weight decay 0.1, betas 0.9/0.98), gradient
clipping at 1.0 and one optimiser step.

What is timed, and why that is the fair side by side: generation is outside both (TRL's
``train()`` interleaves vLLM/transformers generation with the update; ours takes rollouts from
any producer), so the TRL step is its public training path for a prepared batch —
``compute_loss`` (forward, per-token log-probs and entropies, the GRPO loss with
``importance_sampling_level="sequence"``, metric logging), ``backward``, gradient clipping and
``optimizer.step`` of the optimiser TRL builds (``create_optimizer``). Ours is
``GSPOTrainer.step`` on the same batch. The loss values are printed to show both computed the
same objective. CPU only here; the figures are medians of repeated steps, run side by side.

Shape: the default tiny model has width 128 and a vocabulary of 8,192, a vocabulary-to-width
ratio of 64 (Qwen2.5-0.5B: 151,936 / 896 = 170), so the output layer weighs in the step as it
does in real operator models. That is where the two differ: TRL's fused LM head (on the CPU, or
any device without Triton) scores every position, prompt included, computes entropies and
recomputes the logits in the backward pass to save memory; ours projects only the response
positions, chunk by chunk (``chunk_logprobs``, the default: 64 MiB of float32 logits per chunk,
recomputed in the backward pass) and skips entropies unless the entropy term is on
(``--no-chunk``: ours with full logits). The transformer body costs the same on both sides, so
with a toy vocabulary (``--vocab 512``) the gap narrows.

Memory (``--long``): 4,096 response tokens after a 64-token prompt, a 32,768-token vocabulary,
batch 2 (TRL's minimum group), width 64, one layer. Each side takes one step in a fresh process;
the script prints the RSS high-water mark (``getrusage``) and its rise over the RSS before the
step, which is the compared figure (setup and imports are the same on both sides).

Measured on a shared 2-core CPU (torch 2.13, transformers 5.24, TRL 1.16), median of 9
interleaved steps: default shape 631 ms vs 1,705 ms (0.37x); ``--vocab 512`` 421 ms vs 856 ms
(0.49x). Under heavy load from other processes single runs ranged from 0.44x to 0.70x at the
default shape and 0.49x to 1.37x at ``--vocab 512``: read the ratio of a quiet machine.

With chunked log-probs (torch 2.13 CPU, 2 cores shared with ~8 other jobs, load average 6 to
37, so every step ran 15 to 40 times slower than on a quiet machine), default shape, median of
5 interleaved steps, three runs: 19.6 s vs 28.7 s (0.684x), 24.1 s vs 38.4 s (0.628x), 16.2 s
vs 26.2 s (0.617x); ``--no-chunk`` in the same conditions 18.3 s vs 31.4 s (0.581x): chunking
costs one extra output-layer matmul.
``--long``: TRL's step rose 4,459 MiB above its 534 MiB baseline (peak 4,994 MiB), ours 406 MiB
(peak 940 MiB): 0.091x the step's rise, 0.19x the peak; the same loss on both sides.
Rerun for issue 30 (same conditions, load average about 15): ``--batch 8 --completion 96
--repeats 3`` 8.05 s vs 10.63 s (0.758x); ``--long`` TRL's step rose 4,442 MiB, ours 417 MiB
(0.094x the rise; peaks 4,980 vs 953 MiB, 0.19x); the same loss on both sides.

Usage: ``python benchmarks/gspo_step.py [--vocab 8192 --batch 16 --prompt 64 --completion 192]``
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import logging
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "src")]

from benchmarks._common import emit, median_seconds  # noqa: E402


def _setup(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    datasets: Any = importlib.import_module("datasets")
    tokenizers: Any = importlib.import_module("tokenizers")
    transformers: Any = importlib.import_module("transformers")
    trl: Any = importlib.import_module("trl")

    from openmle.train import GSPOConfig, GSPOTrainer, RolloutBatch
    from openmle.train._loss import token_logprobs

    torch.manual_seed(0)
    vocab = args.vocab
    cfg = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=args.hidden, intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=args.prompt + args.completion,
    )  # fmt: skip
    tmp = Path(tempfile.mkdtemp())
    transformers.LlamaForCausalLM(cfg).save_pretrained(tmp / "model")
    base = transformers.LlamaForCausalLM.from_pretrained(tmp / "model")

    raw = tokenizers.Tokenizer(
        tokenizers.models.WordLevel(vocab={f"t{i}": i for i in range(vocab)}, unk_token="t2")
    )
    raw.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="t0", eos_token="t1", unk_token="t2"
    )
    b, p, c = args.batch, args.prompt, args.completion
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(3, vocab, (b, p), generator=gen)
    completion = torch.randint(3, vocab, (b, c), generator=gen)
    lengths = torch.randint(c // 2, c + 1, (b,), generator=gen)
    cmask = (torch.arange(c)[None] < lengths[:, None]).long()
    ids = torch.cat([prompt, completion], 1)
    if args.synthetic_logprobs:  # long sequences: no full-logits forward in the setup
        old = -math.log(vocab) + 0.1 * torch.randn(b, c, generator=gen)
    else:
        with torch.no_grad():
            old = token_logprobs(base(input_ids=ids).logits, ids)[:, p:]
    rollout = old + 0.1 * torch.randn(b, c, generator=gen)
    adv = torch.randn(b, generator=gen)

    trl_model = copy.deepcopy(base)
    logging.getLogger("trl").setLevel(logging.ERROR)
    trl_args = trl.GRPOConfig(
        output_dir=str(tmp / "trl"), importance_sampling_level="sequence", loss_type="grpo",
        beta=0.0, epsilon=3.5e-4, learning_rate=1e-6, weight_decay=0.1, adam_beta1=0.9,
        adam_beta2=0.98, max_grad_norm=1.0, per_device_train_batch_size=b, num_generations=b,
        max_completion_length=c, report_to="none", use_cpu=True, bf16=False,
        activation_checkpointing=False, vllm_importance_sampling_correction=True,
        vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_min=0.0,
        vllm_importance_sampling_clip_max=2.0,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=trl_model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=trl_args, processing_class=tok,
        train_dataset=datasets.Dataset.from_dict({"prompt": ["t3"] * b}),
    )  # fmt: skip
    trainer.use_vllm = True  # apply the IS ratio carried by the batch (TRL's vLLM path)
    trainer.current_gradient_accumulation_steps = 1  # what train() sets with no accumulation
    optimizer = trainer.create_optimizer()
    trl_inputs = {
        "prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
        "completion_mask": cmask, "advantages": adv, "old_per_token_logps": old,
        "importance_sampling_ratio": (old - rollout).exp().clamp(0, 2),
        "num_items_in_batch": cmask.sum(),
    }  # fmt: skip

    def trl_step() -> float:
        trl_model.train()
        loss = trainer.compute_loss(trl_model, trl_inputs)
        torch.autograd.backward(loss)
        torch.nn.utils.clip_grad_norm_(trl_model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    pad = torch.zeros(b, p)
    batch = RolloutBatch(
        input_ids=ids, attention_mask=torch.ones_like(ids),
        response_mask=torch.cat([pad.bool(), cmask.bool()], 1), advantages=adv,
        old_logprobs=torch.cat([pad, old], 1), rollout_logprobs=torch.cat([pad, rollout], 1),
    )  # fmt: skip
    ours = GSPOTrainer(copy.deepcopy(base), config=GSPOConfig(chunk_logprobs=not args.no_chunk))

    def our_step() -> float:
        return ours.step(batch)["loss"]

    return {"trl": trl_step, "ours": our_step, "torch": torch}


def _rss_mb() -> float:
    """This process's resident set size now, in MiB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _one_side(args: argparse.Namespace) -> None:
    """Child process of ``--long``: set up, take one step of one side, print its memory."""
    s = _setup(args)
    s["torch"].set_num_threads(args.threads)
    before = _rss_mb()
    before_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    loss = s[args.side]()
    step_s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({
        "side": args.side, "loss": loss, "step_s": step_s, "rss_before_mb": before,
        "peak_before_mb": before_peak, "peak_mb": peak, "step_peak_mb": peak - before,
    }))  # fmt: skip


def _long(args: argparse.Namespace) -> None:
    """Peak memory of one step, each side in a fresh process (RSS high-water mark)."""
    sides = {}
    for side in ("trl", "ours"):
        cmd = [sys.executable, __file__, "--side", side, "--synthetic-logprobs"]
        for name in ("batch", "prompt", "completion", "vocab", "hidden", "layers", "threads"):
            cmd += [f"--{name}", str(getattr(args, name))]
        cmd += ["--no-chunk"] if args.no_chunk else []
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{side} side failed:\n{proc.stderr[-3000:]}")
        sides[side] = json.loads(proc.stdout.strip().splitlines()[-1])
    trl, ours = sides["trl"], sides["ours"]
    for name, r in (("TRL GRPOTrainer", trl), ("openmle GSPOTrainer", ours)):
        print(
            f"{name:22s} peak RSS {r['peak_mb']:8.1f} MiB (step adds {r['step_peak_mb']:8.1f}"
            f" MiB over {r['rss_before_mb']:7.1f} MiB before), one step {r['step_s']:.2f} s"
        )
    ratio = ours["step_peak_mb"] / trl["step_peak_mb"]
    print(f"step peak ratio ours/TRL: {ratio:.3f} (target <= 0.5)")
    emit(
        "gspo_step_long",
        {
            "batch": args.batch, "prompt_tokens": args.prompt, "completion_tokens": args.completion,
            "vocab": args.vocab, "hidden": args.hidden, "layers": args.layers,
            "trl_peak_mb": round(trl["peak_mb"], 1), "ours_peak_mb": round(ours["peak_mb"], 1),
            "trl_step_peak_mb": round(trl["step_peak_mb"], 1),
            "ours_step_peak_mb": round(ours["step_peak_mb"], 1),
            "trl_step_s": round(trl["step_s"], 3), "ours_step_s": round(ours["step_s"], 3),
            "peak_ratio": round(ratio, 3), "target_peak_ratio": 0.5,
            "chunk_logprobs": not args.no_chunk,
            "trl_loss": trl["loss"], "ours_loss": ours["loss"],
        },
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--completion", type=int, default=None)
    parser.add_argument("--vocab", type=int, default=None)
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--long", action="store_true", help="the long-sequence memory case")
    parser.add_argument(
        "--no-chunk", action="store_true", help="ours without chunked log-probs (full logits)"
    )
    parser.add_argument("--side", choices=("trl", "ours"), help=argparse.SUPPRESS)
    parser.add_argument("--synthetic-logprobs", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # the long case: 4k response tokens, 32k vocabulary, a narrow model that fits CPU memory
    short = {"batch": 16, "completion": 192, "vocab": 8192, "hidden": 128, "layers": 2}
    long = {"batch": 2, "completion": 4096, "vocab": 32768, "hidden": 64, "layers": 1}
    for name, value in (long if args.long else short).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    warnings.filterwarnings("ignore", category=FutureWarning)
    if args.side is not None:
        _one_side(args)
        return
    if args.long:
        _long(args)
        return
    s = _setup(args)
    s["torch"].set_num_threads(args.threads)
    trl_loss, our_loss = s["trl"](), s["ours"]()
    print(f"first-step loss: TRL {trl_loss:.8f}  ours {our_loss:.8f}")
    # interleave the repeats so background load hits both sides alike
    t_trl, t_ours = [], []
    for _ in range(args.repeats):
        t_trl.append(median_seconds(s["trl"], repeats=1, warmup=0))
        t_ours.append(median_seconds(s["ours"], repeats=1, warmup=0))
    trl_s, ours_s = sorted(t_trl)[len(t_trl) // 2], sorted(t_ours)[len(t_ours) // 2]
    ratio = ours_s / trl_s
    print(f"TRL GRPOTrainer (sequence IS): {trl_s * 1e3:8.1f} ms/step")
    print(f"openmle GSPOTrainer:           {ours_s * 1e3:8.1f} ms/step")
    print(f"ratio ours/TRL: {ratio:.3f} (target <= 0.8)")
    emit(
        "gspo_step",
        {
            "batch": args.batch, "prompt_tokens": args.prompt, "completion_tokens": args.completion,
            "vocab": args.vocab, "hidden": args.hidden, "layers": args.layers,
            "trl_s": round(trl_s, 5), "ours_s": round(ours_s, 5), "ratio": round(ratio, 3),
            "target_ratio": 0.8, "chunk_logprobs": not args.no_chunk,
            "trl_loss": trl_loss, "ours_loss": our_loss,
        },
    )  # fmt: skip


if __name__ == "__main__":
    main()
