"""The crash-and-resume run the ``openmle train`` tests compare with an uninterrupted one."""

from __future__ import annotations

from pathlib import Path

__all__ = ["crash_and_resume"]


def crash_and_resume(
    kind: str, whole: Path, half: Path, *, lost: str, steps: tuple[str, str]
) -> None:
    """``openmle train KIND`` on the config ``whole``, then on ``half`` (writing to
    ``half``'s folder ``split``), whose metrics then get ``lost`` appended (what a crash
    mid-step leaves); ``half``'s step line ``steps[0]`` becomes ``steps[1]`` and it runs again,
    resuming. Each run must exit 0."""
    from openmle._cli import main

    assert main(["train", kind, str(whole)]) == 0
    assert main(["train", kind, str(half)]) == 0
    with (half.parent / "split" / "metrics.jsonl").open("a") as f:
        f.write(lost)
    half.write_text(half.read_text().replace(*steps))
    assert main(["train", kind, str(half)]) == 0
