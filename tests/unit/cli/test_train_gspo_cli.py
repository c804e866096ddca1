"""``openmle train gspo CONFIG.toml``: rollouts on a task package, GSPO steps, checkpoints that
resume exactly (the trainer's and the rollout producer's state), bad keys named, the paper preset
and the TRL engine selectable."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import pytest
from tests.unit.cli._train_resume import crash_and_resume

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle._cli import main  # noqa: E402

pytestmark = pytest.mark.torch


def _package(root: Path) -> Path:
    """A small regression task package (rmse)."""
    pub, priv = root / "data" / "public", root / "data" / "private"
    pub.mkdir(parents=True)
    priv.mkdir(parents=True)
    rows = [[i, i * 0.5, 2.0 * i + 1.0] for i in range(30)]

    def write(path: Path, header: list[str], body: Sequence[Sequence[object]]) -> None:
        with path.open("w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(body)

    write(pub / "train.csv", ["id", "x", "y"], [list(r) for r in rows[:24]])
    write(pub / "test.csv", ["id", "x"], [r[:2] for r in rows[24:]])
    write(pub / "sample_submission.csv", ["id", "y"], [[r[0], 0.0] for r in rows[24:]])
    write(priv / "test_answer.csv", ["id", "y"], [[r[0], r[2]] for r in rows[24:]])
    (pub / "description.txt").write_text("Predict y from x. RMSE. Columns id,y.\n")
    (root / "task.toml").write_text('name = "lin"\nmetric = "rmse"\n')
    return root


def _toml(dir: Path, *, out: str, steps: int, every: int = 1, extra: str = "") -> Path:
    if not (dir / "lin").exists():
        _package(dir / "lin")
    f = dir / f"{out}.toml"
    f.write_text(
        f'model = "tiny"\noutput_dir = "{out}"\nsteps = {steps}\ngroups_per_step = 2\n'
        f"checkpoint_every = {every}\n{extra}"
        '[[tasks]]\nname = "lin"\ntimeout_s = 30\n'
        "[tiny]\ndim = 16\nn_layers = 1\nn_heads = 2\nmax_seq_len = 4096\n"
        "[policy]\nmax_new_tokens = 8\n"
        "[rollout]\ngroup_size = 2\nseed = 3\n"
        "[rollout.mix]\ndraft = 1.0\nimprove = 0.0\ndebug = 0.0\ncrossover = 0.0\n"
        "[config]\nlr = 1e-2\nweight_decay = 0.1\n"
    )
    return f


def _metrics(out: Path) -> list[dict[str, float]]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def test_config_file_runs_and_checkpoints_trainer_and_rollouts(tmp_path: Path) -> None:
    assert main(["train", "gspo", str(_toml(tmp_path, out="run", steps=3, every=2))]) == 0
    ck = tmp_path / "run" / "checkpoint"
    info = json.loads((ck / "trainer.json").read_text())
    assert info["kind"] == "gspo" and info["step"] == 3 and info["config"]["lr"] == 1e-2
    state = json.loads((ck / "rollout.json").read_text())
    assert state["batches"] == 3 and state["producer"]["policy_version"] == 3
    rows = _metrics(tmp_path / "run")
    assert [r["batch"] for r in rows] == [1, 2, 3]
    assert all(r["sequences"] == 4 for r in rows)  # 2 groups of 2 per batch


def test_resume_continues_as_the_uninterrupted_run(tmp_path: Path) -> None:
    """3 batches in one run equal 2 + (crash) + 1 resumed: the same metrics, the same weights and
    the same producer state (generator, history, pools)."""
    lost = '{"batch": 3, "loss": 9.0}\n{"batch": 4, "lo'  # a batch lost in a crash
    half = crash_and_resume("gspo", partial(_toml, tmp_path), "steps", (2, 3), lost)
    whole, split = _metrics(tmp_path / "whole"), _metrics(tmp_path / "split")
    assert len(split) == 3
    for a, b in zip(whole, split, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k
    sw = torch.load(tmp_path / "whole" / "checkpoint" / "model.pt")
    ss = torch.load(tmp_path / "split" / "checkpoint" / "model.pt")
    for k in sw:
        torch.testing.assert_close(sw[k], ss[k], rtol=0, atol=0)
    rw = json.loads((tmp_path / "whole" / "checkpoint" / "rollout.json").read_text())
    rs = json.loads((tmp_path / "split" / "checkpoint" / "rollout.json").read_text())
    assert rw == rs
    assert main(["train", "gspo", str(half)]) == 0  # done: nothing more to run
    assert len(_metrics(tmp_path / "split")) == 3


@pytest.mark.parametrize(
    ("extra", "key"),
    [("learning_rate = 1\n", "learning_rate"), ("[profile]\nadvantages = 'grpo'\n", "advantages")],
)
def test_unknown_key_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, key: str
) -> None:
    f = _toml(tmp_path, out="bad", steps=1)
    text = f.read_text()
    if extra.startswith("["):
        text += extra
    else:
        text = extra + text
    f.write_text(text)
    assert main(["train", "gspo", str(f)]) == 2
    err = capsys.readouterr().err
    assert repr(key) in err and "use one of" in err
    assert not (tmp_path / "bad").exists()


def test_a_corrupt_rollout_state_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _toml(tmp_path, out="c", steps=1)
    assert main(["train", "gspo", str(f)]) == 0
    (tmp_path / "c" / "checkpoint" / "rollout.json").write_text('{"batches": 1, "producer": 3}')
    f.write_text(f.read_text().replace("steps = 1", "steps = 2"))
    assert main(["train", "gspo", str(f)]) == 1
    assert "remove the checkpoint to restart" in capsys.readouterr().err


def test_paper_preset_checks_the_rollout_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--preset paper is GSPOConfig.paper(): 16 x 16 is checked against the rollouts' shape up
    front (here 2 x 2), naming both; matching them runs with the paper's clip and steps."""
    f = _toml(tmp_path, out="p", steps=1)
    assert main(["train", "gspo", str(f), "--preset", "paper"]) == 2
    err = capsys.readouterr().err
    assert "group_size=16 x rollout_batch_size=16" in err and "groups_per_step=2" in err
    shape = "[config]\ngroup_size = 2\nrollout_batch_size = 2\nsteps_per_batch = 1\n"
    f.write_text(f.read_text().replace("[config]\n", shape))
    assert main(["train", "gspo", str(f), "--preset", "paper"]) == 0
    cfg = json.loads((tmp_path / "p" / "checkpoint" / "trainer.json").read_text())["config"]
    assert cfg["clip_eps_low"] == 3.5e-4 and cfg["lr"] == 1e-2 and cfg["group_size"] == 2


def test_trl_engine_refuses_the_tiny_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _toml(tmp_path, out="t", steps=1, extra='engine = "trl"\n')
    assert main(["train", "gspo", str(f)]) == 2
    assert "[tiny] is for engine = 'openmle'" in capsys.readouterr().err


def test_the_how_to_gspo_toml_runs(tmp_path: Path) -> None:
    """docs/how-to/train-operators.md's GSPO block, as written except for a shorter run (one
    batch of 2 groups of 4 answers, 8 new tokens each) on the bundled task it names."""
    import re

    doc = Path(__file__).parents[3] / "docs" / "how-to" / "train-operators.md"
    (block,) = [
        b for b in re.findall(r"```toml\n(.*?)```", doc.read_text(), flags=re.S) if "[[tasks]]" in b
    ]
    short = re.sub(r"(?m)^steps = \d+", "steps = 1", block)
    short = re.sub(r"(?m)^max_new_tokens = \d+", "max_new_tokens = 8", short)
    assert short != block
    f = tmp_path / "gspo.toml"
    f.write_text(short)
    assert main(["train", "gspo", str(f)]) == 0
    (row,) = _metrics(tmp_path / "gspo-run")
    assert row["batch"] == 1 and row["sequences"] == 8


def test_track_jsonl_logs_every_rollout_batch(tmp_path: Path) -> None:
    """``--track jsonl:DIR``: each batch's trainer metrics (and the mean reward when finite) in
    the tracker's file, one record per step, the same numbers as ``metrics.jsonl``."""
    track = tmp_path / "track"
    config = _toml(tmp_path, out="run", steps=2, every=2)
    assert main(["train", "gspo", str(config), "--track", f"jsonl:{track}"]) == 0
    recs = [json.loads(x) for x in (track / "run" / "tracking.jsonl").read_text().splitlines()]
    steps = [r for r in recs if r["kind"] == "metrics"]
    assert len(steps) == 2 and recs[-1]["kind"] == "close"
    rows = _metrics(tmp_path / "run")
    for got, row in zip(steps, rows, strict=True):
        assert got["metrics"]["train/loss"] == pytest.approx(row["loss"])


def test_a_config_group_size_unlike_the_rollouts_is_refused_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[config] group_size = 3 against [rollout] group_size = 2 ran (the check needed
    rollout_batch_size too); the doc says a differing shape is refused before any rollout."""
    f = _toml(tmp_path, out="g", steps=1)
    f.write_text(f.read_text().replace("[config]\n", "[config]\ngroup_size = 3\n"))
    assert main(["train", "gspo", str(f)]) == 2
    err = capsys.readouterr().err
    assert "group_size=3" in err and "[rollout] group_size=2" in err
    assert not (tmp_path / "g").exists()


def test_missing_keys_are_named_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "m.toml"
    f.write_text('model = "tiny"\n')
    assert main(["train", "gspo", str(f)]) == 2
    err = capsys.readouterr().err
    for key in ("output_dir", "steps", "checkpoint_every", "groups_per_step"):
        assert repr(key) in err


def test_a_linked_metrics_file_is_refused_and_never_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ``output_dir`` from elsewhere whose ``metrics.jsonl`` links to a file of the user's:
    a fresh run is refused naming it and the fix (the rows were appended to that file), and a
    resume replaces the link (it emptied that file, keeping its "metrics" up to the
    checkpoint); the linked file is untouched either way."""
    victim = tmp_path / "notes.txt"
    victim.write_text("keep me\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").symlink_to(victim)
    assert main(["train", "gspo", str(_toml(tmp_path, out="run", steps=1))]) == 2
    assert "remove it or choose another output_dir" in capsys.readouterr().err
    (tmp_path / "run" / "metrics.jsonl").unlink()
    assert main(["train", "gspo", str(_toml(tmp_path, out="run", steps=1))]) == 0
    (tmp_path / "run" / "metrics.jsonl").unlink()
    (tmp_path / "run" / "metrics.jsonl").symlink_to(victim)
    assert main(["train", "gspo", str(_toml(tmp_path, out="run", steps=2))]) == 0
    assert victim.read_text() == "keep me\n"
    assert [r["batch"] for r in _metrics(tmp_path / "run")] == [2]
