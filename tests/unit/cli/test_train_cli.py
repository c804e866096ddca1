"""``openmle train sft CONFIG.toml``: runs N steps, refuses unknown keys, resumes exactly."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from tests.unit.cli._train_resume import crash_and_resume

pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle import Message
from openmle._cli import main
from openmle.search import SFTRecord

pytestmark = pytest.mark.torch


def _export(path: Path, n: int = 4, long: int = 0) -> None:
    """``n`` short records, then ``long`` whose prompt is 5,000 characters (a real export's
    prompts run to thousands of bytes: the tiny model's tokens)."""
    rows = []
    for i in range(n + long):
        prompt = f"task {i}: write the program" + ("." * 5000 if i >= n else "")
        r = SFTRecord(
            messages=(
                Message(role="user", content=prompt),
                Message(role="assistant", content=f"print({i})"),
            ),
            task="t", run_id="r", path="parallel", operator="draft", node_id=f"n{i}",
            score=0.5,
            segment_id=f"n{i}",
        )  # fmt: skip
        rows.append(json.dumps(r.to_dict()))
    path.write_text("\n".join(rows) + "\n")


def _toml(
    dir: Path, *, out: str, max_steps: int, every: int = 1, extra: str = "", config: str = ""
) -> Path:
    _export(dir / "sft.jsonl")
    f = dir / f"{out}.toml"
    f.write_text(
        f'model = "tiny"\ndata = "sft.jsonl"\noutput_dir = "{out}"\nbatch_size = 2\n'
        f"checkpoint_every = {every}\nmax_steps = {max_steps}\n{extra}"
        "[tiny]\ndim = 16\nn_layers = 1\nn_heads = 2\nmax_seq_len = 128\n"
        f'[config]\nlr = 1e-3\nepochs = 2\nschedule = "cosine"\nwarmup_ratio = 0.25\n{config}'
    )
    return f


def _losses(out: Path) -> list[float]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x)["loss"] for x in lines]


def test_config_file_runs_n_steps_and_checkpoints(tmp_path: Path) -> None:
    assert main(["train", "sft", str(_toml(tmp_path, out="run", max_steps=3, every=2))]) == 0
    info = json.loads((tmp_path / "run" / "checkpoint" / "trainer.json").read_text())
    assert info["step"] == 3 and info["kind"] == "sft"
    assert info["config"]["total_steps"] == 4  # 2 epochs of 2 batches
    assert len(_losses(tmp_path / "run")) == 3


def test_resume_continues_with_the_uninterrupted_losses(tmp_path: Path) -> None:
    lost = '{"loss": 9.0, "step": 3.0}\n{"loss": 9'  # a step lost in a crash
    half = crash_and_resume("sft", partial(_toml, tmp_path), "max_steps", (2, 4), lost)
    whole, split = _losses(tmp_path / "whole"), _losses(tmp_path / "split")
    assert len(split) == 4
    assert split == pytest.approx(whole, rel=1e-6, abs=1e-9)
    assert main(["train", "sft", str(half)]) == 0  # done: nothing more to run
    assert len(_losses(tmp_path / "split")) == 4


@pytest.mark.parametrize(
    ("extra", "config", "key"),
    [("learning_rate = 1\n", "", "learning_rate"), ("", "lrr = 1e-3\n", "lrr")],
)
def test_unknown_key_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, config: str, key: str
) -> None:
    f = _toml(tmp_path, out="bad", max_steps=1, extra=extra, config=config)
    assert main(["train", "sft", str(f)]) == 2
    err = capsys.readouterr().err
    assert repr(key) in err and "use one of" in err
    assert not (tmp_path / "bad").exists()


def test_paper_preset_is_the_base_of_config(tmp_path: Path) -> None:
    f = _toml(tmp_path, out="p", max_steps=1, config="max_length = 64\n")
    assert main(["train", "sft", str(f), "--preset", "paper"]) == 0
    cfg = json.loads((tmp_path / "p" / "checkpoint" / "trainer.json").read_text())["config"]
    assert cfg["global_batch_size"] == 128 and cfg["max_length"] == 64 and cfg["lr"] == 1e-3


def test_the_how_to_toml_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/how-to/train-operators.md's TOML block, as written, on an export with a record
    longer than its context (a real export's were 36,301 tokens: a traceback)."""
    import re

    doc = Path(__file__).parents[3] / "docs" / "how-to" / "train-operators.md"
    (block,) = [
        b
        for b in re.findall(r"```toml\n(.*?)```", doc.read_text(), flags=re.S)
        if 'data = "sft.jsonl"' in b
    ]
    _export(tmp_path / "sft.jsonl", long=1)
    f = tmp_path / "sft.toml"
    f.write_text(block)
    assert main(["train", "sft", str(f)]) == 0
    losses = [
        json.loads(x) for x in (tmp_path / "sft-run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert len(losses) == 2 and all(m["tokens"] > 0 for m in losses)
    assert "dropped 1 of 5 records" in capsys.readouterr().err  # its prompt is over 4,096


def test_a_record_longer_than_the_tiny_model_names_the_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was `ValueError: sequence length ... > max_seq_len` from the forward."""
    f = _toml(tmp_path, out="long", max_steps=1)
    _export(tmp_path / "sft.jsonl", long=1)
    assert main(["train", "sft", str(f)]) == 2
    err = capsys.readouterr().err
    assert "[tiny] max_seq_len" in err and "[config] max_length = 128" in err
    assert "Traceback" not in err and not (tmp_path / "long").exists()


def test_records_with_no_answer_token_left_are_dropped_or_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cut inside every prompt trained on 0 tokens with loss 0.0 at every step."""
    f = _toml(tmp_path, out="cut", max_steps=1, config="max_length = 64\n")
    _export(tmp_path / "sft.jsonl", long=1)
    assert main(["train", "sft", str(f)]) == 0
    assert "dropped 1 of 5 records" in capsys.readouterr().err
    (m,) = [json.loads(x) for x in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert m["tokens"] > 0
    f = _toml(tmp_path, out="none", max_steps=1, config="max_length = 8\n")
    assert main(["train", "sft", str(f)]) == 2
    err = capsys.readouterr().err
    assert "[config] max_length = 8" in err and "no answer token" in err


def test_cuda_on_a_torch_without_cuda_names_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was `AssertionError: Torch not compiled with CUDA enabled` after loading the model."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    f = _toml(tmp_path, out="gpu", max_steps=1, extra='device = "cuda"\n')
    assert main(["train", "sft", str(f)]) == 2
    err = capsys.readouterr().err
    assert "device = 'cuda'" in err and 'set device = "cpu"' in err
    assert not (tmp_path / "gpu").exists()


@pytest.mark.parametrize(
    ("device", "said"),
    [
        ("cuda:2", "device = 'cuda:2' but torch sees 2 CUDA GPU(s) (cuda:0 to cuda:1"),
        ("cuda:7", 'set device = "cuda" or an index below 2'),
        ("cuda:x", "device must be 'auto', 'cpu', 'cuda' or 'cuda:N'"),
        ("cuda:", "got 'cuda:'"),
        ("cuda:-1", "got 'cuda:-1'"),
    ],
)
def test_cuda_index_past_the_gpus_or_malformed_names_device(
    device: str,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``cuda:N`` past the GPUs (or a malformed ``cuda:...``) passed the check and failed after
    the model was loaded (`invalid device ordinal` / a torch parse error); now refused, one line
    naming ``device``, before anything is written.
    """
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    f = _toml(tmp_path, out="gpu", max_steps=1, extra=f'device = "{device}"\n')
    assert main(["train", "sft", str(f)]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "gpu").exists()


def test_missing_keys_are_named_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It named batch_size, then (after a fix) checkpoint_every."""
    f = tmp_path / "m.toml"
    f.write_text('model = "tiny"\ndata = "sft.jsonl"\noutput_dir = "o"\n')
    assert main(["train", "sft", str(f)]) == 2
    err = capsys.readouterr().err
    assert "'batch_size', 'checkpoint_every'" in err


@pytest.mark.parametrize("link", ["metrics.jsonl", "checkpoint.tmp", "checkpoint.old"])
def test_a_received_output_dir_cannot_write_outside_itself(tmp_path: Path, link: str) -> None:
    """Resuming an ``output_dir`` from elsewhere whose files are links: ``metrics.jsonl`` ->
    a file of the user's was emptied (the resume keeps its lines up to the checkpoint, none
    of a file that is not metrics) and appended to; ``checkpoint.tmp`` -> a folder of the
    user's got the new checkpoint's files written into it. Now the links are replaced or
    removed, never followed."""
    assert main(["train", "sft", str(_toml(tmp_path, out="run", max_steps=2, every=1))]) == 0
    run = tmp_path / "run"
    victim = tmp_path / "home"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me\n")
    (victim / "model.pt").write_text("mine\n")
    target = victim / "notes.txt" if link == "metrics.jsonl" else victim
    (run / link).unlink(missing_ok=True)
    (run / link).symlink_to(target)
    assert main(["train", "sft", str(_toml(tmp_path, out="run", max_steps=3, every=1))]) == 0
    assert (victim / "notes.txt").read_text() == "keep me\n"
    assert (victim / "model.pt").read_text() == "mine\n"
    assert sorted(p.name for p in victim.iterdir()) == ["model.pt", "notes.txt"]
    # the linked metrics were no metrics of this run: the resumed step's line starts anew
    assert len(_losses(run)) == (1 if link == "metrics.jsonl" else 3)
    assert not (run / "metrics.jsonl").is_symlink()
    info = json.loads((run / "checkpoint" / "trainer.json").read_text())
    assert info["step"] == 3


def test_a_fresh_run_refuses_a_linked_metrics_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No checkpoint yet, ``metrics.jsonl`` a link: refused naming the file and the fix, the
    linked file untouched (it was appended to)."""
    victim = tmp_path / "notes.txt"
    victim.write_text("keep me\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").symlink_to(victim)
    assert main(["train", "sft", str(_toml(tmp_path, out="run", max_steps=1))]) == 2
    err = capsys.readouterr().err
    assert "metrics.jsonl" in err and "remove it or choose another output_dir" in err, err
    assert victim.read_text() == "keep me\n"
