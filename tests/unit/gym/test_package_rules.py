"""Hostile task packages: paths out of the package, absurd resources, symbolic links in the
public data, and a metric that never returns during ``validate`` (issue 12, task packages)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from openmle.errors import TaskPackageError
from openmle.gym import load_task, validate_path

from .conftest import PackageBuilder, write_csv


@pytest.mark.parametrize("board", ["/etc/passwd", "../outside.csv", "sub/../../outside.csv"])
def test_leaderboard_outside_the_package_is_refused(
    make_package: PackageBuilder, tmp_path: Path, board: str
) -> None:
    """``leaderboard = "/etc/passwd"`` was read and its first line echoed; ``../`` passed."""
    write_csv(tmp_path / "outside.csv", ["root:x:0:0"], [["1"]])
    root = make_package(toml=f'metric = "rmse"\nleaderboard = "{board}"\n')
    with pytest.raises(TaskPackageError, match="leaderboard") as info:
        load_task(root)
    assert "root:" not in str(info.value)
    report = validate_path(root)
    assert not report.ok and all("root:" not in str(p) for p in report.problems)


def test_leaderboard_symlink_out_of_the_package_is_refused(
    make_package: PackageBuilder, tmp_path: Path
) -> None:
    """A leaderboard that is a symbolic link out of the package is refused; its content is
    never echoed (named in task.toml: at load; the default leaderboard.csv: by validate)."""
    secret = tmp_path / "secret.csv"
    write_csv(secret, ["root:x:0:0:secret"], [["1"]])
    named = make_package("named", toml='metric = "rmse"\nleaderboard = "board.csv"\n')
    (named / "board.csv").symlink_to(secret)
    with pytest.raises(TaskPackageError, match="outside the package"):
        load_task(named)
    default = make_package("default")
    (default / "leaderboard.csv").symlink_to(secret)
    report = validate_path(default)
    assert not report.ok
    assert any(p.file == "leaderboard.csv" for p in report.errors)
    assert all("root:" not in str(p) for p in report.problems)


def test_leaderboard_errors_do_not_echo_content(make_package: PackageBuilder) -> None:
    """A leaderboard without a score column is named, its header is not quoted."""
    root = make_package(toml='metric = "rmse"\nleaderboard = "board.csv"\n')
    write_csv(root / "board.csv", ["private-token-123"], [["1"]])
    report = validate_path(root)
    assert any(p.file == "board.csv" for p in report.errors)
    assert all("private-token-123" not in str(p) for p in report.problems)


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("time_limit_s = 1e300\n", "time_limit_s"),
        ("grade_timeout_s = 1e9\n", "grade_timeout_s"),
        ("[resources]\ncpus = 100000\n", "resources.cpus"),
        ("[resources]\ngpus = 64\n", "resources.gpus"),
        ("[resources]\nmemory_mb = 1e12\n", "resources.memory_mb"),
    ],
)
def test_resource_values_have_maxima(make_package: PackageBuilder, toml: str, key: str) -> None:
    """``time_limit_s=1e300``, ``cpus=100000`` and ``gpus=64`` used to pass validation."""
    root = make_package(toml='metric = "rmse"\n' + toml)
    with pytest.raises(TaskPackageError, match=key) as info:
        load_task(root)
    assert "at most" in str(info.value) or "in (0, " in str(info.value)


def test_symlinks_in_public_data_are_flagged(make_package: PackageBuilder, tmp_path: Path) -> None:
    """A symbolic link under data/public (a program would follow it) is an error."""
    root = make_package()
    (tmp_path / "elsewhere.txt").write_text("x")
    (root / "data/public/extra").mkdir()
    (root / "data/public/extra/notes.txt").symlink_to(tmp_path / "elsewhere.txt")
    report = validate_path(root, smoke_test=False)
    assert [p.file for p in report.errors] == ["data/public/extra/notes.txt"]


@pytest.mark.needs("pandas")  # a custom metric.py runs under the pandas contract
def test_looping_metric_costs_the_grade_timeout_once(
    make_package: PackageBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A metric that is slow on the test split and never returns on the validation split
    made validate take the first grade plus a whole ``grade_timeout_s`` more (about twice
    the limit); now every grade of one validation shares one budget. (The old code took
    whole budget again for the second grade.) Checked by the limit each grading process gets,
    not by wall-clock speed: after a first grade that slept half the budget, the next grade
    may use at most what is left."""
    budget = 12.0
    root = make_package(toml=f"higher_is_better = false\ngrade_timeout_s = {budget}\n")
    (root / "utils").mkdir()
    (root / "utils/metric.py").write_text(
        textwrap.dedent(
            f"""\
            import time
            class LoopMetrics:
                def __init__(self):
                    self.higher_is_better = False
                def evaluate(self, y_true, y_pred):
                    if len(y_true) == 10:  # the test split: slow
                        time.sleep({budget / 2})
                        return 1.0
                    while True:  # the validation split: never returns
                        pass
            """
        )
    )
    from openmle.gym import _package

    given: list[float] = []
    real_run_child = _package.run_child  # type: ignore[attr-defined]

    def recording(config: dict[str, Any], *, limits: Any, cwd: Any = None) -> Any:
        if config.get("mode") != "inspect":
            given.append(limits.timeout_s)
        return real_run_child(config, limits=limits, cwd=cwd)

    monkeypatch.setattr(_package, "run_child", recording)
    report = validate_path(root)
    assert not report.ok
    # The looping grade meets its wall-clock limit, its CPU limit (which follows the wall
    # clock, the same number of seconds) or the CPU hard limit first, by the machine's luck:
    # any of them, named, is the stop this test wants.
    stops = ("longer than", "of CPU time", "was killed", "grade_timeout_s")
    assert any(any(s in p.message for s in stops) for p in report.errors), report.problems
    assert len(given) >= 2, given
    assert given[0] <= budget
    # The first grade slept budget / 2: every later grade gets at most the rest.
    assert all(t <= budget / 2 + 0.5 for t in given[1:]), given


@pytest.mark.parametrize("how", ["dev-zero", "fifo", "huge", "nested", "secret"])
def test_task_toml_is_read_as_a_bounded_regular_file(
    make_package: PackageBuilder, tmp_path: Path, how: str
) -> None:
    """``task.toml -> /dev/zero`` was read until MemoryError, a FIFO hung ``validate`` and
    ``grade``, 10**5 nested arrays raised RecursionError (a traceback)."""
    import os

    root = make_package()
    toml = root / "task.toml"
    toml.unlink()
    secret = tmp_path / "secret"
    secret.write_text('name = "root:x:0:0"\n')
    if how == "dev-zero":
        toml.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(toml)
    elif how == "huge":
        toml.write_text('name = "' + "a" * (2 << 20) + '"\n')
    elif how == "nested":
        toml.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    else:
        toml.symlink_to(secret)
    with pytest.raises(TaskPackageError, match=r"task\.toml (cannot be read|nests)") as info:
        load_task(root)  # a hang is a pytest-timeout failure
    assert "root:" not in str(info.value)
    report = validate_path(root)
    assert not report.ok and report.errors[0].file == "task.toml"


@pytest.mark.parametrize("name", ["data/private/test_answer.csv", "data/public/train.csv"])
@pytest.mark.parametrize("how", ["dev-zero", "fifo"])
def test_grading_never_reads_a_device_or_waits_on_a_fifo(
    make_package: PackageBuilder, name: str, how: str
) -> None:
    """The validation view's key read ``train.csv`` whole and the answers' header unbounded:
    ``-> /dev/zero`` ended in MemoryError, a FIFO hung ``openmle task grade``."""
    import os

    root = make_package()
    sample = root / "data" / "public" / "sample_submission.csv"
    (root / "sub.csv").write_bytes(sample.read_bytes())
    (root / name).unlink()
    if how == "fifo":
        os.mkfifo(root / name)
    else:
        (root / name).symlink_to("/dev/zero")
    for split in ("valid", "test"):
        report = load_task(root).grade(root / "sub.csv", split)  # a hang: a timeout failure
        # the test split does not need train.csv
        assert report.valid is (split == "test" and name.endswith("train.csv"))
