"""The test engine itself: it answers the Docker Engine API and holds a usable sandbox image."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Engine

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def test_engine_runs_the_sandbox_image(docker_engine: Engine) -> None:
    """A container from the sandbox image runs python3 with numpy and no network."""
    import docker

    api: Any = docker.APIClient(base_url=docker_engine.base_url, version="auto")
    try:
        made = api.create_container_from_config(
            {
                "Image": docker_engine.image,
                "Cmd": ["python3", "-c", "import numpy; print('numpy', numpy.__version__)"],
                "NetworkDisabled": True,
                "HostConfig": {"NetworkMode": "none"},
            }
        )
        try:
            api.start(made["Id"])
            assert api.wait(made["Id"], timeout=60)["StatusCode"] == 0
            assert api.logs(made["Id"]).startswith(b"numpy ")
        finally:
            api.remove_container(made["Id"], force=True)
    finally:
        api.close()
