"""A bench directory as a client of a job service writes it (for the service-side tests)."""

from __future__ import annotations

import json
from pathlib import Path

from openmle.bench import BenchConfig
from openmle.bench._engines import ServiceTasks


def client_bench(path: Path, registry: str | Path | None, data: str | Path) -> str:
    """A bench directory at ``path`` whose manifest names ``registry`` and ``data`` as a
    client writes them, with the task directory of ``mini-tabular@seed-0``; that directory's
    path."""
    config = BenchConfig(
        suite="custom",
        competitions=("mini-tabular",),
        seeds=(0,),
        model="offline",
        data_dir=str(data),
        registry=None if registry is None else str(registry),
    )
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(
        json.dumps({"kind": "openmle-bench", "config": config.to_dict()})
    )
    return str(ServiceTasks(inner=None, bench_dir=path)._task_dir("mini-tabular@seed-0"))
