"""``openmle train sft CONFIG.toml``: supervised fine-tuning from a TOML file, resumable.

The TOML file (read with :mod:`tomllib`; relative paths are relative to the file)::

    model = "tiny"               # the tiny CPU model, or a Hugging Face id/path (extra hf)
    data = "sft.jsonl"           # an SFT export (openmle.search.export_sft)
    output_dir = "out"           # checkpoint/ and metrics.jsonl go here
    batch_size = 8               # records per optimiser step, in file order
    checkpoint_every = 100       # optimiser steps between checkpoints (and one at the end)
    max_steps = 1000             # optional: stop after this many steps in all
    [tiny]                       # optional TinyLMConfig fields (model = "tiny" only)
    dim = 32
    [config]                     # SFTConfig fields (over --preset paper's when given)
    lr = 1e-5

An unknown key anywhere is a usage error (exit 2) naming the key and the keys allowed. A second
run with the same ``output_dir`` loads ``output_dir/checkpoint`` (model, optimiser, RNG, step)
and continues from its step; the learning-rate schedule's ``total_steps`` is
``epochs * ceil(records / batch_size)`` in both runs, so the resumed steps equal an
uninterrupted run's. Exit codes: 0 trained, 1 a training or checkpoint error, 2 a bad file.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

import attrs

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
_TOP = ("model", "data", "output_dir", "batch_size", "checkpoint_every", "max_steps")
_TABLES = ("tiny", "config")


def register(subparsers: Any) -> None:
    """Add ``train sft`` to the ``openmle`` parser."""
    train = subparsers.add_parser(
        "train",
        help="train the operator model from a TOML file (SFT)",
        description="Train the operator model from a TOML file; a second run with the same "
        "output_dir resumes from its checkpoint. Exit codes: 0 ok, 1 training failed, "
        "2 a bad file or key. Needs the torch extra.",
    )
    sub = train.add_subparsers(dest="train_command", metavar="SUBCOMMAND")
    train.set_defaults(handler=lambda args: _usage(train))
    s = sub.add_parser(
        "sft",
        help="supervised fine-tuning on an SFT export (openmle.train.SFTTrainer)",
        description="Fine-tune on the records of an SFT export; keys: model, data, output_dir, "
        "batch_size, checkpoint_every, max_steps, [tiny], [config] (SFTConfig fields).",
    )
    s.add_argument("config", metavar="CONFIG.toml", help="the run's TOML file")
    s.add_argument(
        "--preset",
        choices=("paper",),
        default=None,
        help="start [config] from SFTConfig.paper() (the file's [config] keys override it)",
    )
    add_track_flag(s)
    s.set_defaults(handler=_sft)


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


def _need(doc: dict[str, Any], key: str, kind: type | tuple[type, ...], file: Path) -> Any:
    if key not in doc:
        raise InvalidArgument(f"{file}: missing key {key!r}; add it at the top of the file")
    v = doc[key]
    if not isinstance(v, kind) or isinstance(v, bool):
        raise InvalidArgument(f"{file}: key {key!r} has the wrong type ({type(v).__name__})")
    if isinstance(v, int) and v < 1:
        raise InvalidArgument(f"{file}: key {key!r} must be >= 1, got {v}")
    return v


def _read(file: Path) -> dict[str, Any]:
    try:
        doc = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidArgument(f"cannot read {file}: {exc}; pass an existing TOML file") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"{file} is not valid TOML: {exc}") from exc
    _unknown(str(file), set(doc), [*_TOP, *_TABLES])
    for t in _TABLES:
        if t in doc and not isinstance(doc[t], dict):
            raise InvalidArgument(f"{file}: {t!r} must be a table ([{t}])")
    return doc


def _sft(args: argparse.Namespace) -> int:
    file = Path(args.config)
    doc = _read(file)
    base = file.parent
    model_name = _need(doc, "model", str, file)
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
    n_batches = math.ceil(len(records) / batch_size)
    preset = SFTConfig.paper if args.preset == "paper" else SFTConfig
    probe = preset(**cfg_keys)  # validates the fields (InvalidArgument names a bad one)
    config = attrs.evolve(probe, total_steps=probe.total_steps or probe.epochs * n_batches)

    model, tokenizer = _model(model_name, doc.get("tiny"), file)
    batches = [
        SFTBatch.from_messages(tokenizer, [r.messages for r in records[i : i + batch_size]])
        for i in range(0, len(records), batch_size)
    ]
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
    on_step = track_steps(tracker)
    with closing_on_error(tracker), (out / "metrics.jsonl").open("a", encoding="utf-8") as log:
        while trainer.step_count < last:
            m = trainer.step(batches[trainer.step_count % n_batches])
            log.write(json.dumps(m, sort_keys=True) + "\n")
            log.flush()
            on_step(m)
            if trainer.step_count % every == 0 or trainer.step_count == last:
                _save(trainer, ckpt)
    close_track(tracker)
    print(json.dumps({"step": trainer.step_count, "checkpoint": str(ckpt)}))
    return EXIT_OK


def _trim_metrics(path: Path, step: int) -> None:
    """Drop the metrics of steps after ``step`` (run after the last checkpoint, then lost)."""
    if not path.is_file():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            done = json.loads(line).get("step", 0) <= step
        except (ValueError, AttributeError):
            done = False  # a line cut short by the crash
        if done:
            keep.append(line + "\n")
    path.write_text("".join(keep), encoding="utf-8")


def _save(trainer: Any, ckpt: Path) -> None:
    """Write the checkpoint next to the old one, then swap, so a crash leaves one whole."""
    tmp, old = ckpt.with_name("checkpoint.tmp"), ckpt.with_name("checkpoint.old")
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save(tmp)
    shutil.rmtree(old, ignore_errors=True)
    if ckpt.exists():
        ckpt.rename(old)
    tmp.rename(ckpt)
    shutil.rmtree(old, ignore_errors=True)


def _model(name: str, tiny: dict[str, Any] | None, file: Path) -> tuple[Any, Any]:
    """``(model, tokenizer)``: the tiny CPU model with the byte tokenizer, or a HF model."""
    from openmle.train import ByteTokenizer, HFTokenizer, TinyCausalLM, TinyLMConfig

    if name == "tiny":
        kw = dict(tiny or {})
        _unknown(f"{file} [tiny]", set(kw), [a.name for a in attrs.fields(TinyLMConfig)])
        return TinyCausalLM(TinyLMConfig(**kw)), ByteTokenizer()
    if tiny is not None:
        raise InvalidArgument(f"{file}: [tiny] is for model = 'tiny' only; remove it")
    from openmle._compat import require

    transformers: Any = require("transformers", "hf")

    model = transformers.AutoModelForCausalLM.from_pretrained(name)
    return model, HFTokenizer(transformers.AutoTokenizer.from_pretrained(name))
