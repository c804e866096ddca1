"""Fixtures of the backend integration tests: the Ray cluster.

The Docker Engine fixtures (``docker_engine``, ``managed_containers``) are a plugin shared by
every test folder, ``tests/_docker_engine.py``; :class:`Engine` and ``_client`` are imported
from there for the tests here (``from .conftest import Engine``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests._docker_engine import Engine, _client

__all__ = ["Engine", "_client"]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A real local Ray cluster (2 CPUs, no dashboard, small object store) for the session.

    Workers get ``src/`` on ``PYTHONPATH`` so they import this checkout of ``openmle``, and the
    test helper module is pickled by value (it is not importable on workers). Another folder's
    conftest that imports this fixture gets its own instance in the same session: that one
    finds the cluster up and shares it (its owner shuts it down).
    """
    ray = pytest.importorskip("ray", reason="the 'ray' extra is not installed")
    if ray.is_initialized():
        yield ray
        return
    import openmle

    from . import _ray_helpers

    src = str(Path(openmle.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    ray.cloudpickle.register_pickle_by_value(_ray_helpers)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024 * 1024,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
        logging_level="warning",
        log_to_driver=False,
    )
    try:
        yield ray
    finally:
        ray.shutdown()
