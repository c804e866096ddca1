"""``openmle train gspo`` with ``engine = "trl"``: TRL's GRPOTrainer (sequence-level IS = GSPO)
with the profile's advantages, LoRA adapters through PEFT, TRL checkpoints and resume, on a
tiny local Llama (CPU)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
pytest.importorskip("datasets")
pytest.importorskip("trl", reason="needs trl: pip install 'openmle[trl]'")
pytest.importorskip("peft", reason="needs peft: pip install 'openmle[peft]'")

from tests.integration.train._tiny_hf import digit_tokenizer, save_tiny_llama  # noqa: E402

from openmle._cli import main  # noqa: E402

pytestmark = [
    pytest.mark.torch,
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"),
]


def _model_dir(path: Path) -> Path:
    save_tiny_llama(path, layers=1)
    digit_tokenizer().save_pretrained(path)
    return path


def _package(root: Path) -> None:
    pub, priv = root / "data" / "public", root / "data" / "private"
    pub.mkdir(parents=True)
    priv.mkdir(parents=True)

    def write(p: Path, header: list[str], rows: list[list[Any]]) -> None:
        with p.open("w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)

    write(pub / "train.csv", ["id", "x", "y"], [[i, i, 2 * i] for i in range(20)])
    write(pub / "test.csv", ["id", "x"], [[i, i] for i in range(20, 26)])
    write(pub / "sample_submission.csv", ["id", "y"], [[i, 0] for i in range(20, 26)])
    write(priv / "test_answer.csv", ["id", "y"], [[i, 2 * i] for i in range(20, 26)])
    (pub / "description.txt").write_text("Predict y. RMSE.\n")
    (root / "task.toml").write_text('name = "lin"\nmetric = "rmse"\n')


def test_trl_engine_trains_lora_adapters_and_resumes(tmp_path: Path) -> None:
    _model_dir(tmp_path / "model")
    _package(tmp_path / "lin")
    f = tmp_path / "trl.toml"
    f.write_text(
        'model = "model"\noutput_dir = "out"\nsteps = 2\ngroups_per_step = 2\n'
        'checkpoint_every = 1\nengine = "trl"\n'
        '[[tasks]]\nname = "lin"\ntimeout_s = 30\n'
        "[rollout]\ngroup_size = 2\nseed = 0\n"
        "[policy]\nmax_new_tokens = 4\n"
        '[lora]\nr = 2\nalpha = 4\ntarget_modules = ["q_proj", "v_proj"]\n'
        "[trl]\nlearning_rate = 0.05\nuse_cpu = true\nactivation_checkpointing = false\n"
    )
    assert main(["train", "gspo", str(f)]) == 0
    out = tmp_path / "out"
    assert (out / "checkpoint-2" / "adapter_model.safetensors").is_file()  # PEFT adapters only
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    f.write_text(f.read_text().replace("steps = 2", "steps = 3"))
    assert main(["train", "gspo", str(f)]) == 0  # resumes from checkpoint-2
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3 and len(state["log_history"]) >= 3
