"""``openmle train sft|gspo CONFIG.toml``: the SFT and GSPO recipes from a TOML file, resumable.

``sft``: the TOML file (read with :mod:`tomllib`; relative paths are relative to the file)::

    model = "tiny"               # the tiny CPU model, or a Hugging Face id/path (extra hf)
    data = "sft.jsonl"           # an SFT export (openmle.search.export_sft)
    output_dir = "out"           # checkpoint/ and metrics.jsonl go here
    batch_size = 8               # records per optimiser step, in file order
    checkpoint_every = 100       # optimiser steps between checkpoints (and one at the end)
    max_steps = 1000             # optional: stop after this many steps in all
    device = "auto"              # optional: "auto" (CUDA when available), "cpu", "cuda[:N]"
    [tiny]                       # optional TinyLMConfig fields (model = "tiny" only)
    [lora]                       # optional LoRAConfig fields: LoRA/QLoRA adapters (extra peft)
    dim = 32
    [config]                     # SFTConfig fields (over --preset paper's when given)
    lr = 1e-5

An unknown key anywhere is a usage error (exit 2) naming the key and the keys allowed. A second
run with the same ``output_dir`` loads ``output_dir/checkpoint`` (model, optimiser, RNG, step)
and continues from its step; the learning-rate schedule's ``total_steps`` is
``epochs * ceil(records / batch_size)`` in both runs, so the resumed steps equal an
uninterrupted run's. Exit codes: 0 trained, 1 a training or checkpoint error, 2 a bad file.

``gspo``: rollouts from the policy on the tasks, run in a :class:`~openmle.backends.LocalSandbox`,
rewarded by a reward profile, trained with :class:`~openmle.train.GSPOTrainer`
(``engine = "openmle"``, :func:`~openmle.train.train_on_policy`) or TRL's ``GRPOTrainer`` with
the profile's advantages (``engine = "trl"``, :class:`~openmle.train.OpenMLEGRPOTrainer`)::

    model = "tiny"               # "tiny", or a Hugging Face id/path (extra hf; trl needs one)
    output_dir = "out"           # checkpoint/ and metrics.jsonl (openmle); TRL's checkpoints (trl)
    steps = 100                  # rollout batches in all (one GSPOTrainer.step each)
    groups_per_step = 4          # groups per rollout batch (16 with --preset paper)
    checkpoint_every = 10        # rollout batches between checkpoints (and one at the end)
    engine = "openmle"           # or "trl"
    [[tasks]]                    # one table per task: a bundled name or a task package path
    name = "tabular-binary"
    timeout_s = 600.0
    [tiny]                       # TinyLMConfig fields (model = "tiny" only)
    [lora]                       # LoRAConfig fields (extra peft); TRL's peft_config under trl
    [policy]                     # LocalPolicy fields: max_new_tokens, temperature
    [rollout]                    # RolloutProducer fields: group_size, seed, max_pool, [rollout.mix]
    [profile]                    # RewardProfile.default() overrides: advantage, map_scores, ...
    [sandbox]                    # LocalSandbox fields: max_concurrency, isolation, memory_mb, ...
    [config]                     # GSPOConfig fields (over GSPOConfig.paper()'s with --preset paper)
    [trl]                        # trl.GRPOConfig fields (engine = "trl")

A second run with the same ``output_dir`` resumes: the trainer's checkpoint (model, optimiser,
RNG, step) plus the producer's state (``rollout.json``: its generator, score history and program
pools), so the resumed batches are the uninterrupted run's. Under ``engine = "trl"`` TRL's own
``resume_from_checkpoint`` is used (the reward function's score history is not in TRL's
checkpoint: adaptive bounds restart from the resumed batch).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import attrs

from openmle._cli._interrupts import deferred, run_async
from openmle._cli._track import (
    add_track_flag,
    close_track,
    closing_on_error,
    open_track,
    track_steps,
)
from openmle.errors import InvalidArgument

__all__ = ["register"]

EXIT_OK = 0
_TOP = ("model", "data", "output_dir", "batch_size", "checkpoint_every", "max_steps", "device")
_TABLES = ("tiny", "config", "lora")
_GSPO_TOP = (
    "model", "output_dir", "steps", "groups_per_step", "checkpoint_every", "engine", "device",
)  # fmt: skip
_GSPO_TABLES = ("tiny", "config", "lora", "policy", "rollout", "profile", "sandbox", "trl")
_PAPER_GROUPS_PER_STEP = 16


def register(subparsers: Any) -> None:
    """Add ``train sft`` to the ``openmle`` parser."""
    train = subparsers.add_parser(
        "train",
        help="train the operator model from a TOML file (SFT or GSPO)",
        description="Train the operator model from a TOML file; a second run with the same "
        "output_dir resumes from its checkpoint. Exit codes: 0 ok, 1 training failed, "
        "2 a bad file or key. Needs the torch extra.",
    )
    sub = train.add_subparsers(dest="train_command", metavar="SUBCOMMAND")
    train.set_defaults(handler=lambda args: _usage(train))
    _run_parser(
        sub,
        "sft",
        _sft,
        help="supervised fine-tuning on an SFT export (openmle.train.SFTTrainer)",
        description="Fine-tune on the records of an SFT export; keys: model, data, output_dir, "
        "batch_size, checkpoint_every, max_steps, device, [tiny], [lora], [config] (SFTConfig "
        "fields).",
        preset="start [config] from SFTConfig.paper() (the file's [config] keys override it)",
    )
    _run_parser(
        sub,
        "gspo",
        _gspo,
        help="GSPO on sandbox rollouts (openmle.train.GSPOTrainer, or TRL with engine = 'trl')",
        description="Sample groups from the policy on the tasks, run the programs in a "
        "LocalSandbox, reward them with the profile and train with GSPO; keys: model, "
        "output_dir, steps, groups_per_step, checkpoint_every, engine, device, [[tasks]], "
        "[tiny], [lora], [policy], [rollout], [profile], [sandbox], [config] (GSPOConfig "
        "fields), [trl] (trl.GRPOConfig fields).",
        preset="the paper's recipe: GSPOConfig.paper(), RolloutProducer.paper() (groups of 16), "
        "LocalPolicy.paper() and 16 groups per step (the file's keys override them)",
    )


def _run_parser(
    sub: Any,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    help: str,
    description: str,
    preset: str,
) -> None:
    """Add ``train NAME``: a CONFIG.toml, ``--preset paper`` (described by ``preset``), --track."""
    p = sub.add_parser(name, help=help, description=description)
    p.add_argument("config", metavar="CONFIG.toml", help="the run's TOML file")
    p.add_argument("--preset", choices=("paper",), default=None, help=preset)
    add_track_flag(p)
    p.set_defaults(handler=handler)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _unknown(where: str, keys: set[str], allowed: tuple[str, ...] | list[str]) -> None:
    bad = sorted(keys - set(allowed))
    if bad:
        raise InvalidArgument(
            f"unknown key {bad[0]!r} in {where}; use one of: {', '.join(sorted(allowed))} "
            "(see openmle train sft --help)"
        )


def _required(doc: dict[str, Any], keys: tuple[str, ...], file: Path) -> None:
    """Every required key ``doc`` lacks, named in one error (not one per run)."""
    missing = [k for k in keys if k not in doc]
    if missing:
        names = ", ".join(repr(k) for k in missing)
        raise InvalidArgument(
            f"{file}: missing key{'s' if len(missing) > 1 else ''} {names}; "
            "add them at the top of the file"
        )


def _need(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], file: Path) -> Any:
    if key not in doc:
        raise InvalidArgument(f"{file}: missing key {key!r}; add it at the top of the file")
    v = doc[key]
    if not isinstance(v, kind) or isinstance(v, bool):
        raise InvalidArgument(f"{file}: key {key!r} has the wrong type ({type(v).__name__})")
    if isinstance(v, int) and v < 1:
        raise InvalidArgument(f"{file}: key {key!r} must be >= 1, got {v}")
    return v


def _read(
    file: Path,
    top: tuple[str, ...] = _TOP,
    tables: tuple[str, ...] = _TABLES,
    arrays: tuple[str, ...] = (),
    required: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The TOML ``file``: unknown keys, tables that are not tables and every missing
    ``required`` key (all named in one error) are refused.
    """
    try:
        doc = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidArgument(f"cannot read {file}: {exc}; pass an existing TOML file") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"{file} is not valid TOML: {exc}") from exc
    _unknown(str(file), set(doc), [*top, *tables, *arrays])
    for t in tables:
        if t in doc and not isinstance(doc[t], dict):
            raise InvalidArgument(f"{file}: {t!r} must be a table ([{t}])")
    for a in arrays:
        if a in doc and not (isinstance(doc[a], list) and all(isinstance(x, dict) for x in doc[a])):
            raise InvalidArgument(f"{file}: {a!r} must be an array of tables ([[{a}]])")
    _required(doc, required, file)
    return doc


def _sft(args: argparse.Namespace) -> int:
    file = Path(args.config)
    doc = _read(file, required=("model", "data", "output_dir", "batch_size", "checkpoint_every"))
    device = _device(doc, file)
    base = file.parent
    model_name = _model_ref(_need(doc, "model", str, file), file)
    data = base / _need(doc, "data", str, file)
    out = base / _need(doc, "output_dir", str, file)
    batch_size = _need(doc, "batch_size", int, file)
    every = _need(doc, "checkpoint_every", int, file)
    max_steps = _need(doc, "max_steps", int, file) if "max_steps" in doc else None

    from openmle.search import read_sft_jsonl
    from openmle.train import SFTBatch, SFTConfig, SFTTrainer

    fields = [a.name for a in attrs.fields(SFTConfig)]
    cfg_keys: dict[str, Any] = dict(doc.get("config", {}))
    _unknown(f"{file} [config]", set(cfg_keys), fields)
    if "betas" in cfg_keys and isinstance(cfg_keys["betas"], list):
        cfg_keys["betas"] = tuple(cfg_keys["betas"])
    if not data.is_file():
        raise InvalidArgument(f"{file}: data {str(data)!r} is not a file; write it with export_sft")
    try:
        records = read_sft_jsonl(data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidArgument(f"{data} is not an SFT export: {exc}") from exc
    if not records:
        raise InvalidArgument(f"{data} holds no records; export some runs first")
    preset = SFTConfig.paper if args.preset == "paper" else SFTConfig
    probe = preset(**cfg_keys)  # validates the fields (InvalidArgument names a bad one)

    model, tokenizer = _model(model_name, doc.get("tiny"), file, doc.get("lora"))
    model = _place(model, device)
    room = getattr(getattr(model, "config", None), "max_seq_len", None)
    seqs = _sft_sequences(tokenizer, records, probe.max_length, room, file)
    batches = [
        SFTBatch.from_sequences(
            [p for p, _ in seqs[i : i + batch_size]],
            [a for _, a in seqs[i : i + batch_size]],
            pad_token_id=tokenizer.pad_token_id,
        )
        for i in range(0, len(seqs), batch_size)
    ]
    n_batches = len(batches)
    config = attrs.evolve(probe, total_steps=probe.total_steps or probe.epochs * n_batches)
    trainer = SFTTrainer(model, config)
    ckpt = out / "checkpoint"
    if (ckpt / "trainer.json").is_file():
        trainer.load(ckpt)
        print(f"resumed from {ckpt} at step {trainer.step_count}", file=sys.stderr)
        _trim_metrics(out / "metrics.jsonl", trainer.step_count)
    last = (
        config.epochs * n_batches
        if max_steps is None
        else min(max_steps, config.epochs * n_batches)
    )
    out.mkdir(parents=True, exist_ok=True)
    tracker = open_track(args, out.name, "openmle-train")
    with closing_on_error(tracker):
        _sft_steps(
            trainer, batches, out, ckpt, last=last, every=every, on_step=track_steps(tracker)
        )
    close_track(tracker)
    print(json.dumps({"step": trainer.step_count, "checkpoint": str(ckpt)}))
    return EXIT_OK


def _sft_sequences(
    tokenizer: Any, records: list[Any], cut: int | None, room: int | None, file: Path
) -> list[tuple[list[int], list[int]]]:
    """Each record's ``(prompt ids, answer ids)``, without the records that would train on no
    token: those whose prompt fills the length cut ``cut`` (``[config] max_length``; counted on
    stderr). A record longer than the model's positions ``room`` (``[tiny] max_seq_len``) with
    no cut at or below it is refused, as is a data set with no record left.
    """
    from openmle.train import encode_chat

    seqs = []
    for i, r in enumerate(records):
        if not r.messages or r.messages[-1].role != "assistant":
            raise InvalidArgument(f"{file}: record {i} does not end with an assistant message")
        seqs.append(encode_chat(tokenizer, r.messages[:-1], r.messages[-1].content))
    longest = max(len(p) + len(a) for p, a in seqs)
    if room is not None and longest > room and (cut is None or cut > room):
        raise InvalidArgument(
            f"{file}: the longest record is {longest} tokens but the model takes {room} "
            f"([tiny] max_seq_len); set [config] max_length = {room} (or less) to cut records "
            "to it, or raise [tiny] max_seq_len"
        )
    if cut is None:
        return seqs
    kept = [(p, a) for p, a in seqs if len(p) < cut]
    if not kept:
        shortest = min(len(p) for p, _ in seqs)
        raise InvalidArgument(
            f"{file}: every record's prompt fills [config] max_length = {cut} (the shortest "
            f"prompt is {shortest} tokens), so no answer token would be trained; raise "
            "[config] max_length (and [tiny] max_seq_len) above it, or export shorter records"
        )
    if len(kept) < len(seqs):
        print(
            f"openmle train sft: dropped {len(seqs) - len(kept)} of {len(seqs)} records whose "
            f"prompt fills [config] max_length = {cut} (no answer token left to train on)",
            file=sys.stderr,
        )
    return kept


def _sft_steps(
    trainer: Any,
    batches: list[Any],
    out: Path,
    ckpt: Path,
    *,
    last: int,
    every: int,
    on_step: Callable[[Any], None],
) -> None:
    """Step ``trainer`` up to step ``last`` over ``batches`` (cycled), each step's metrics to
    ``metrics.jsonl`` and ``on_step``, a checkpoint every ``every`` steps and at the end.
    """
    with _open_metrics(out) as log:
        while trainer.step_count < last:
            m = trainer.step(batches[trainer.step_count % len(batches)])
            log.write(json.dumps(m, sort_keys=True) + "\n")
            log.flush()
            on_step(m)
            if trainer.step_count % every == 0 or trainer.step_count == last:
                _save(trainer, ckpt)


_MAX_METRICS_BYTES = 4 * 2**30  # metrics.jsonl read back on resume (a line per step)


def _trim_metrics(path: Path, step: int, *, key: str = "step") -> None:
    """Drop the metrics of steps after ``step`` (run after the last checkpoint, then lost).

    The file is read without following a link and written as a new file in its place (an
    ``output_dir`` from elsewhere may hold links); one that cannot be read back (a link, not
    a regular file, larger than :data:`_MAX_METRICS_BYTES`) is replaced by an empty one.
    """
    from openmle._readback import open_back
    from openmle._writeback import write_file

    keep: list[bytes] = []
    try:
        with os.fdopen(open_back(path, max_bytes=_MAX_METRICS_BYTES), "rb") as f:
            for line in f:
                try:
                    record = json.loads(line)
                    done = isinstance(record, dict) and record.get(key, 0) <= step
                except (ValueError, TypeError):
                    done = False  # a line cut short by the crash
                if done:
                    keep.append(line.rstrip(b"\n") + b"\n")
    except FileNotFoundError:
        return
    except OSError:
        keep = []
    write_file(path, b"".join(keep))


def _open_metrics(out: Path) -> TextIO:
    """``out/metrics.jsonl`` open for appending text; a link or a file with another name
    there is refused, never written through.

    Raises:
        InvalidArgument: it is not a regular file of the output directory's own.
    """
    from openmle._writeback import open_append

    path = out / "metrics.jsonl"
    try:
        fd = open_append(path)
    except OSError as exc:
        raise InvalidArgument(
            f"cannot append to {path}: {exc.strerror or exc}; remove it or choose another "
            "output_dir"
        ) from None
    return os.fdopen(fd, "a", encoding="utf-8")


def _save(trainer: Any, ckpt: Path, *, extra: dict[str, str] | None = None) -> None:
    """Write the checkpoint (and the ``extra`` files) next to the old one, then swap, so a crash
    leaves one whole. Whatever stands at ``checkpoint.tmp`` or ``checkpoint.old`` (a link from
    an ``output_dir`` made elsewhere) is removed first, never written through.
    """
    from openmle._trees import remove_tree
    from openmle._writeback import write_file

    tmp, old = ckpt.with_name("checkpoint.tmp"), ckpt.with_name("checkpoint.old")
    for stale in (tmp, old):
        if not remove_tree(stale):
            raise OSError(f"cannot remove {stale}")
    tmp.mkdir()
    trainer.save(tmp)
    for name, text in (extra or {}).items():
        write_file(tmp / name, text.encode())
    if ckpt.is_symlink() or ckpt.exists():
        ckpt.rename(old)
    tmp.rename(ckpt)
    remove_tree(old)


def _device(doc: dict[str, Any], file: Path) -> str:
    """``device``: "auto" (default: CUDA when available), "cpu", "cuda" or "cuda:N", resolved
    and checked when the file is read (a malformed value, a CUDA device on a torch without
    CUDA, or a ``cuda:N`` past the GPUs torch sees is refused, naming ``device``).
    """
    import torch

    device = doc.get("device", "auto")
    cuda = re.fullmatch(r"cuda(?::(\d+))?", device) if isinstance(device, str) else None
    if not isinstance(device, str) or not (device in ("auto", "cpu") or cuda):
        raise InvalidArgument(
            f"{file}: device must be 'auto', 'cpu', 'cuda' or 'cuda:N' (N a GPU index: 0, 1, "
            f"...), got {device!r}"
        )
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device != "cpu" and not torch.cuda.is_available():
        raise InvalidArgument(
            f"{file}: device = {device!r} but torch {torch.__version__} sees no CUDA GPU "
            '(torch.cuda.is_available() is False); set device = "cpu" or "auto", or run '
            "where a GPU and a CUDA build of torch are"
        )
    index = int(cuda[1]) if cuda is not None and cuda[1] is not None else None
    if index is not None and index >= (count := torch.cuda.device_count()):
        raise InvalidArgument(
            f"{file}: device = {device!r} but torch sees {count} CUDA GPU(s) (cuda:0 to "
            f'cuda:{count - 1}, after CUDA_VISIBLE_DEVICES); set device = "cuda" or an index '
            f"below {count}"
        )
    return device


def _place(model: Any, device: str) -> Any:
    """``model`` on ``device`` (a QLoRA model is left where from_pretrained placed it)."""
    if getattr(model, "is_loaded_in_4bit", False) or getattr(model, "hf_device_map", None):
        return model  # placed by from_pretrained (QLoRA)
    return model.to(device)


def _model_ref(name: str, file: Path) -> str:
    """``model``: "tiny", a directory relative to the file, or a Hugging Face id as given."""
    local = file.parent / name
    return str(local.resolve()) if name != "tiny" and local.is_dir() else name


def _lora(table: dict[str, Any] | None, file: Path) -> Any:
    """``[lora]`` as a LoRAConfig (None without the table)."""
    if table is None:
        return None
    from openmle.train import LoRAConfig

    _unknown(f"{file} [lora]", set(table), [a.name for a in attrs.fields(LoRAConfig)])
    return LoRAConfig(**table)


def _model(
    name: str, tiny: dict[str, Any] | None, file: Path, lora: dict[str, Any] | None = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)``: the tiny CPU model with the byte tokenizer, or a HF model; with
    ``[lora]``, LoRA adapters on it (QLoRA: 4-bit weights, HF models on CUDA only).
    """
    from openmle.train import ByteTokenizer, HFTokenizer, TinyCausalLM, TinyLMConfig, apply_lora

    adapters = _lora(lora, file)
    if name == "tiny":
        kw = dict(tiny or {})
        _unknown(f"{file} [tiny]", set(kw), [a.name for a in attrs.fields(TinyLMConfig)])
        if adapters is not None and adapters.quantize is not None:
            raise InvalidArgument(f"{file}: [lora] quantize is for Hugging Face models only")
        model: Any = TinyCausalLM(TinyLMConfig(**kw))
        return (model if adapters is None else apply_lora(model, adapters)), ByteTokenizer()
    if tiny is not None:
        raise InvalidArgument(f"{file}: [tiny] is for model = 'tiny' only; remove it")
    from openmle._compat import require

    transformers: Any = require("transformers", "hf")
    model = _hf_model(transformers, name, adapters)
    if adapters is not None:
        model = apply_lora(model, adapters)
    return model, HFTokenizer(transformers.AutoTokenizer.from_pretrained(name))


def _hf_model(transformers: Any, name: str, adapters: Any) -> Any:
    """A transformers causal LM; in 4 bits on the GPU for QLoRA."""
    if adapters is None or adapters.quantize is None:
        return transformers.AutoModelForCausalLM.from_pretrained(name)
    from openmle.train import quantization_config

    return transformers.AutoModelForCausalLM.from_pretrained(
        name, quantization_config=quantization_config(adapters.quantize), device_map={"": 0}
    )


_ROLLOUT_KEYS = ("group_size", "seed", "max_pool", "mix")
_POLICY_KEYS = ("max_new_tokens", "temperature")
_TASK_KEYS = ("name", "description", "timeout_s")
_SANDBOX_KEYS = ("max_concurrency", "isolation", "memory_mb", "max_processes", "keep_workspaces")
_MAX_STATE_BYTES = 256 * 2**20  # rollout.json: pools of programs and their logs


def _table(doc: dict[str, Any], name: str, allowed: tuple[str, ...] | list[str], file: Path) -> Any:
    kw: dict[str, Any] = dict(doc.get(name, {}))
    _unknown(f"{file} [{name}]", set(kw), allowed)
    return kw


def _tasks(doc: dict[str, Any], file: Path) -> list[Any]:
    """``[[tasks]]`` as RolloutTasks: each a bundled name or a package path (file-relative)."""
    from openmle.gym import resolve_task
    from openmle.train import RolloutTask

    rows = doc.get("tasks")
    if not rows:
        raise InvalidArgument(
            f"{file}: no [[tasks]]; add one table per task, e.g. [[tasks]] name = "
            "'tabular-binary' (a bundled name or a task package path)"
        )
    out = []
    for i, row in enumerate(rows):
        _unknown(f"{file} [[tasks]] #{i + 1}", set(row), _TASK_KEYS)
        name = row.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidArgument(f"{file}: [[tasks]] #{i + 1} needs name = 'a task or a path'")
        local = file.parent / name
        ref = str(local.resolve()) if local.is_dir() else name
        task = resolve_task(ref)  # InvalidArgument names the bundled tasks
        timeout = row.get("timeout_s", min(600.0, task.time_limit_s))
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise InvalidArgument(f"{file}: [[tasks]] #{i + 1} timeout_s must be a number > 0")
        description = row.get("description", task.description)
        if not isinstance(description, str):
            raise InvalidArgument(f"{file}: [[tasks]] #{i + 1} description must be a string")
        out.append(
            RolloutTask(
                name=ref,
                description=description,
                meta=task.meta,
                timeout_s=float(timeout),
                resources=task.resources,
            )
        )
    return out


def _gspo(args: argparse.Namespace) -> int:
    file = Path(args.config)
    paper = args.preset == "paper"
    required = ("model", "output_dir", "steps", "checkpoint_every", "groups_per_step")
    doc = _read(file, _GSPO_TOP, _GSPO_TABLES, ("tasks",), required[: 4 if paper else 5])
    device = _device(doc, file)
    model_name = _model_ref(_need(doc, "model", str, file), file)
    out = file.parent / _need(doc, "output_dir", str, file)
    steps = _need(doc, "steps", int, file)
    every = _need(doc, "checkpoint_every", int, file)
    if "groups_per_step" in doc or not paper:
        per_step = _need(doc, "groups_per_step", int, file)
    else:
        per_step = _PAPER_GROUPS_PER_STEP
    engine = _engine(doc, file)
    tasks = _tasks(doc, file)
    rollout, policy_kw, sandbox_kw, profile = _rollout_tables(doc, file)
    group_size = rollout.get("group_size", 16 if paper else 8)
    if engine == "trl":
        return _gspo_trl(
            doc, file, out, model_name, tasks, profile, policy_kw, sandbox_kw,
            steps=steps, every=every, per_step=per_step, group_size=group_size,
            seed=rollout.get("seed", 0), paper=paper, track=getattr(args, "track", None),
        )  # fmt: skip
    if "trl" in doc:
        raise InvalidArgument(f"{file}: [trl] is for engine = 'trl' only; remove it")

    from openmle.train import GSPOTrainer, LocalPolicy, RolloutProducer

    config = _gspo_config(doc, file, paper=paper, group_size=group_size, per_step=per_step)
    model, tokenizer = _model(model_name, doc.get("tiny"), file, doc.get("lora"))
    model = _place(model, device)
    policy = (LocalPolicy.paper if paper else LocalPolicy)(model, tokenizer, **policy_kw)
    trainer = GSPOTrainer(model, config)
    ckpt = out / "checkpoint"
    resume = (ckpt / "trainer.json").is_file()
    if resume:
        trainer.load(ckpt)
    from openmle.backends import LocalSandbox

    sandbox = LocalSandbox(**sandbox_kw)
    make = RolloutProducer.paper if paper else RolloutProducer
    done = 0
    try:
        producer = make(policy=policy, sandbox=sandbox, tasks=tasks, profile=profile, **rollout)
        if resume:
            done = _load_rollout_state(producer, ckpt / "rollout.json")
            print(f"resumed from {ckpt} at rollout batch {done}", file=sys.stderr)
            _trim_metrics(out / "metrics.jsonl", done, key="batch")
    except BaseException:
        with deferred():  # a Ctrl-C while closing comes after the close
            run_async(sandbox.aclose)
        raise
    out.mkdir(parents=True, exist_ok=True)
    pad = tokenizer.pad_token_id
    tracker = open_track(args, out.name, "openmle-train")
    with closing_on_error(tracker):
        rc = _run_gspo(
            producer, trainer, sandbox, out, ckpt, done, steps, every, per_step, pad,
            track_steps(tracker),
        )  # fmt: skip
    close_track(tracker)
    return rc


def _engine(doc: dict[str, Any], file: Path) -> str:
    """``engine``: "openmle" (default) or "trl"."""
    engine = doc.get("engine", "openmle")
    if engine not in ("openmle", "trl"):
        raise InvalidArgument(f"{file}: engine must be 'openmle' or 'trl', got {engine!r}")
    return str(engine)


def _rollout_tables(doc: dict[str, Any], file: Path) -> tuple[Any, Any, Any, Any]:
    """``[rollout]`` (with ``[rollout.mix]`` as an OperatorMix), ``[policy]``, ``[sandbox]``
    and ``[profile]`` (as ``RewardProfile.default(**profile)``).
    """
    from openmle.rewards import RewardProfile
    from openmle.search import OperatorMix

    rollout = _table(doc, "rollout", _ROLLOUT_KEYS, file)
    policy_kw = _table(doc, "policy", _POLICY_KEYS, file)
    sandbox_kw = _table(doc, "sandbox", _SANDBOX_KEYS, file)
    profile_kw = _table(doc, "profile", [a.name for a in attrs.fields(RewardProfile)], file)
    if "mix" in rollout:
        if not isinstance(rollout["mix"], dict):
            raise InvalidArgument(f"{file}: [rollout] mix must be a table ([rollout.mix])")
        _unknown(f"{file} [rollout.mix]", set(rollout["mix"]), _MIX_KEYS)
        rollout["mix"] = OperatorMix(**rollout["mix"])
    return rollout, policy_kw, sandbox_kw, RewardProfile.default(**profile_kw)


def _gspo_config(
    doc: dict[str, Any], file: Path, *, paper: bool, group_size: int, per_step: int
) -> Any:
    """``[config]`` as a GSPOConfig, its checked shape matching the rollouts'."""
    from openmle.train import GSPOConfig

    cfg_keys = _table(doc, "config", [a.name for a in attrs.fields(GSPOConfig)], file)
    if isinstance(cfg_keys.get("betas"), list):
        cfg_keys["betas"] = tuple(cfg_keys["betas"])
    config = (GSPOConfig.paper if paper else GSPOConfig)(**cfg_keys)
    shape = (config.group_size, config.rollout_batch_size)
    if any(c is not None and c != r for c, r in zip(shape, (group_size, per_step), strict=True)):
        raise InvalidArgument(
            f"{file}: [config] checks group_size={config.group_size} x rollout_batch_size="
            f"{config.rollout_batch_size} but the rollouts make [rollout] group_size="
            f"{group_size} x groups_per_step={per_step}; make them match or set [config] "
            "group_size and rollout_batch_size to the rollouts' shape"
        )
    return config


_MIX_KEYS = ("draft", "improve", "debug", "crossover")


def _load_rollout_state(producer: Any, path: Path) -> int:
    """Restore the producer from ``rollout.json``; the rollout batches done."""
    from openmle._readback import read_back_json
    from openmle.errors import TrainerError

    try:
        state = read_back_json(path, max_bytes=_MAX_STATE_BYTES)
    except (OSError, ValueError) as exc:
        raise TrainerError(f"cannot read {path}: {exc}; remove the checkpoint to restart") from exc
    if not isinstance(state, dict) or not isinstance(state.get("batches"), int):
        raise TrainerError(f"{path} is not a rollout state; remove the checkpoint to restart")
    try:
        producer.load_state_dict(state.get("producer"))
    except InvalidArgument as exc:
        raise TrainerError(f"{path}: {exc}; remove the checkpoint to restart") from exc
    return int(state["batches"])


def _run_gspo(
    producer: Any,
    trainer: Any,
    sandbox: Any,
    out: Path,
    ckpt: Path,
    done: int,
    steps: int,
    every: int,
    per_step: int,
    pad: int,
    tracked: Callable[[Any], None],
) -> int:
    import anyio

    from openmle.train import train_on_policy

    log: list[TextIO] = []  # metrics.jsonl, opened in main (a refusal still closes the sandbox)
    count = [done]

    def on_step(report: Any) -> None:
        count[0] += 1
        r = report.mean_reward
        row = {"batch": count[0], "mean_reward": r if math.isfinite(r) else None,
               **report.metrics}  # fmt: skip
        log[0].write(json.dumps(row, sort_keys=True) + "\n")
        log[0].flush()
        tracked(report)

    def save(batches: int) -> None:
        state = {"batches": batches, "producer": producer.state_dict()}
        _save(trainer, ckpt, extra={"rollout.json": json.dumps(state)})

    async def main() -> None:
        try:
            log.append(_open_metrics(out))
            while count[0] < steps:
                n = min(every - count[0] % every, steps - count[0])
                await train_on_policy(
                    producer, trainer, steps=n, groups_per_step=per_step, pad_token_id=pad,
                    on_step=on_step,
                )  # fmt: skip
                await anyio.to_thread.run_sync(save, count[0])
        finally:
            with anyio.CancelScope(shield=True):
                await sandbox.aclose()

    try:
        run_async(main)  # the first Ctrl-C cancels it; the sandbox is closed, shielded
    finally:
        for f in log:
            f.close()
    print(json.dumps({"batch": count[0], "step": trainer.step_count, "checkpoint": str(ckpt)}))
    return EXIT_OK


def _gspo_trl(
    doc: dict[str, Any],
    file: Path,
    out: Path,
    model_name: str,
    tasks: list[Any],
    profile: Any,
    policy_kw: dict[str, Any],
    sandbox_kw: dict[str, Any],
    *,
    steps: int,
    every: int,
    per_step: int,
    group_size: int,
    seed: Any,
    paper: bool,
    track: str | None = None,
) -> int:
    """``engine = "trl"``: OpenMLEGRPOTrainer (sequence-level IS) with the profile's advantages."""
    import dataclasses

    from openmle._compat import require

    for t in ("tiny", "config"):
        if t in doc:
            raise InvalidArgument(
                f"{file}: [{t}] is for engine = 'openmle'; under 'trl' put trl.GRPOConfig fields "
                "in [trl]"
            )
    if model_name == "tiny":
        raise InvalidArgument(
            f"{file}: engine = 'trl' needs a Hugging Face model id or path in model, not 'tiny'"
        )
    trl: Any = require("trl", "trl")
    transformers: Any = require("transformers", "hf")
    from openmle.backends import LocalSandbox
    from openmle.train import OpenMLEGRPOTrainer, SandboxReward, prompt_dataset

    names = {f.name for f in dataclasses.fields(trl.GRPOConfig) if f.init}
    user = _table(doc, "trl", sorted(names), file)
    kw: dict[str, Any] = {
        "output_dir": str(out), "importance_sampling_level": "sequence",
        "num_generations": group_size, "per_device_train_batch_size": group_size * per_step,
        "max_steps": steps, "save_steps": every, "save_strategy": "steps",
        "logging_steps": 1, "report_to": "none", "seed": seed,
    }  # fmt: skip
    if paper:  # GSPOConfig.paper() in TRL's names
        kw.update(
            learning_rate=1e-6, lr_scheduler_type="constant", weight_decay=0.1, adam_beta1=0.9,
            adam_beta2=0.98, max_grad_norm=1.0, epsilon=3.5e-4, epsilon_high=3.5e-4, beta=0.0,
            temperature=1.0, max_completion_length=24_576, steps_per_generation=2,
        )  # fmt: skip
    if "max_new_tokens" in policy_kw:
        kw["max_completion_length"] = policy_kw["max_new_tokens"]
    if "temperature" in policy_kw:
        kw["temperature"] = policy_kw["temperature"]
    if track:  # --track: TRL's own integrations write to the same local tracker
        from openmle.tracking import TrackSpec

        spec = TrackSpec.parse(track)
        spec.where.mkdir(parents=True, exist_ok=True)  # --track checked it; made as TRL starts
        kw.update(spec.trl_args())
        os.environ.update(spec.trl_env())
    kw.update(user)
    args = trl.GRPOConfig(**kw)
    sandbox = LocalSandbox(**sandbox_kw)
    reward = SandboxReward(sandbox, tasks, num_generations=args.num_generations, profile=profile)
    rows = args.per_device_train_batch_size * max(1, args.max_steps) // args.num_generations
    dataset = prompt_dataset(tasks, repeat=max(1, rows // len(tasks) + 1))
    tok = transformers.AutoTokenizer.from_pretrained(model_name)
    adapters = _lora(doc.get("lora"), file)
    model: Any = model_name
    if adapters is not None and adapters.quantize is not None:  # QLoRA: load in 4 bits first
        model = _hf_model(transformers, model_name, adapters)
    trainer = OpenMLEGRPOTrainer(
        model=model, reward_funcs=[reward], args=args, train_dataset=dataset,
        processing_class=tok, peft_config=None if adapters is None else adapters.peft(),
    )  # fmt: skip
    resume = any(p.name.startswith("checkpoint-") for p in out.glob("checkpoint-*"))
    try:
        trainer.train(resume_from_checkpoint=True if resume else None)
    finally:
        with deferred():  # a Ctrl-C while closing comes after the close
            run_async(sandbox.aclose)
    print(json.dumps({"step": trainer.state.global_step, "output_dir": str(out)}))
    return EXIT_OK
