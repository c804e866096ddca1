"""The crash-and-resume run the ``openmle train`` tests compare with an uninterrupted one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["crash_and_resume"]


def crash_and_resume(
    kind: str, config: Callable[..., Path], key: str, steps: tuple[int, int], lost: str
) -> Path:
    """``openmle train KIND`` on ``config(out="whole", KEY=steps[1])``, then on the config
    ``half = config(out="split", KEY=steps[0])``, whose metrics then get ``lost`` appended
    (what a crash mid-step leaves); ``half``'s ``KEY = steps[0]`` becomes ``steps[1]`` and it
    runs again, resuming. Each run must exit 0; returns ``half``."""
    from openmle._cli import main

    short, full = steps
    assert main(["train", kind, str(config(out="whole", **{key: full}))]) == 0
    half = config(out="split", **{key: short})
    assert main(["train", kind, str(half)]) == 0
    with (half.parent / "split" / "metrics.jsonl").open("a") as f:
        f.write(lost)
    half.write_text(half.read_text().replace(f"{key} = {short}", f"{key} = {full}"))
    assert main(["train", kind, str(half)]) == 0
    return half
