"""`openmle bench` command line: doctor's table and exit code, experiment files, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from openmle._cli import main

pytest.importorskip("yaml")


def test_doctor_table_and_exit_code(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, data = mini
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))  # where doctor builds views
    assert main(["bench", "doctor", "mle-bench-lite", "--data", str(data),
                 "--registry", str(registry)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "3 of 3 competitions ready" in out and "mini-jsonl" in out
    data2 = tmp_path / "data"
    shutil.copytree(data, data2)
    shutil.rmtree(data2 / "mini-images" / "prepared" / "public")
    rc = main(["bench", "doctor", "mini-images,mini-tabular", "--data", str(data2),
               "--registry", str(registry), "--json"])  # fmt: skip
    lines = json.loads(capsys.readouterr().out)
    assert rc == 1 and [ln["ok"] for ln in lines] == [False, True]
    assert "mlebench prepare -c mini-images" in lines[0]["fixes"][0]
    data3 = tmp_path / "data3"
    shutil.copytree(data, data3)
    (data3 / "mini-images" / "prepared" / "public" / "train.csv").unlink()
    args = ["bench", "doctor", "mini-images", "--data", str(data3), "--registry", str(registry)]
    assert main(args) == 1  # no rule can split it: not ready for the split protocol
    assert "--validation self" in capsys.readouterr().out
    assert main([*args, "--validation", "self"]) == 0  # self needs no view
    assert main(["bench", "doctor", "mle-bench-lite"]) == 2  # only smoke needs no --data
    assert "Expected --data" in capsys.readouterr().err


def test_experiment_file_errors_name_the_key(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry, data = mini
    exp = tmp_path / "exp.toml"
    exp.write_text(f'suite = "mle-bench-lite"\ndata = "{data}"\nseedz = 3\n')
    assert main(["bench", "run", str(exp)]) == 2  # a usage error (InvalidArgument)
    assert "unknown key(s) ['seedz']" in capsys.readouterr().err
    exp.write_text(f'suite = "mle-bench-lite"\ndata = "{data}"\nregistry = "{registry}"\n')
    assert main(["bench", "run", str(exp)]) == 2
    assert "Expected out" in capsys.readouterr().err
    assert main(["bench", "report", str(tmp_path)]) == 2
    assert "not a bench directory" in capsys.readouterr().err
    out = tmp_path / "b"
    assert main(["bench", "run", "mini-nope", "--data", str(data), "--registry",
                 str(registry), "--out", str(out)]) == 2  # fmt: skip
    assert "Unknown suite" in capsys.readouterr().err and not out.exists()
